"""Multi-head self-attention through `scaled_dot_product_attention`, or spelled out when training with
attention dropout on CPU.

Q, K and V come from one fused projection (one GEMM instead of three); the checkpoint layer splits it into
HF's `query`/`key`/`value` on save and joins them on load. Inputs are packed tokens: attention is the one
place that needs a [heads, sequences, length, head_dim] layout, so it scatters each attention group's tokens
into its own grid and gathers them out again here.

With attention dropout, SDPA on CPU falls back to its math path and draws the dropout mask one Bernoulli
sample at a time; the explicit path below computes the same thing with bertforge's cheaper mask
(`model/dropout.py`) and is 1.30x as fast for `mini`'s attention, forward + backward
(`benchmarks/bench_step_parts.py`). Training in bf16 on CPU takes the explicit path too: SDPA's bf16 backward
is slower than its fp32 one, and several times the explicit path's bf16 batched matmuls. Otherwise
(inference, fp32 training without dropout) SDPA's fused kernel stays, as it never holds the [seq, seq] scores
of all heads at once.

Three options of modern encoders act here. Rotary positions (`model/rotary.py`) rotate the queries and keys
of the packed tokens before they are scattered. Local attention (ModernBERT's sliding window) is a mask: each
group's grid columns are the sequences' own positions, so `local_attention_batch` narrows each group's mask
to a band around the diagonal, and the kernels are the same. T5's relative position bias
(`model/relative_bias.py`) is a mask too: an additive float one, cast here to the queries' dtype.

Longformer's layers (`config.sliding_windows`) attend differently: band by band within a window plus the
batch's global tokens, never through a [seq, seq] mask (`model/sliding_window.py`); their layers hold the extra
projections of the global tokens (`query_global`, and `kv_global`, which the checkpoint layer splits into HF's
`key_global`/`value_global`). BigBird's (`config.block_sparse`) attend block by block on the batch's padded grid
(`model/block_sparse.py`).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from bertforge.config import BertConfig
from bertforge.model.dropout import dropout
from bertforge.model.kernels import FAST, Kernels
from bertforge.model.packing import AttentionGroup, PackedBatch
from bertforge.model.rotary import apply_rotary
from bertforge.model.block_sparse import block_sparse_attention, dense_block_attention, from_grid, to_grid
from bertforge.model.sliding_window import sliding_window_attention

def attention_with_dropout(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                           p: float, cheap_dropout: bool = True) -> torch.Tensor:
    """softmax(q k^T / sqrt(d) + mask) with dropout p, times v: what SDPA computes, for `[..., seq, d]` inputs
    and a boolean "may attend" mask or an additive float mask, broadcastable to `[..., seq, seq]`."""
    *lead, L, d = q.shape
    n = q.numel() // (L * d)
    q = q.reshape(n, L, d) * (1.0 / math.sqrt(d))  # scaling q costs half a pass over the scores
    kt = k.reshape(n, L, d).transpose(1, 2)
    if mask is None:
        scores = torch.bmm(q, kt)
    else:
        if mask.dtype == torch.bool:
            bias = torch.zeros(mask.shape, dtype=q.dtype, device=q.device).masked_fill_(~mask, float("-inf"))
        else:
            bias = mask.to(q.dtype)
        bias = bias.expand(*lead, mask.shape[-2], L).reshape(n, mask.shape[-2], L)
        scores = torch.baddbmm(bias, q, kt)
    probs = dropout(torch.softmax(scores, dim=-1), p, cheap=cheap_dropout)
    return torch.bmm(probs, v.reshape(n, L, d)).view(*lead, L, d)


class _ScatterToGroups(torch.autograd.Function):
    """Packed q/k/v `[3, heads, tokens, head_dim]` -> q, k, v as zero-padded `[heads, count, length, head_dim]`
    grids, three per attention group (`model/packing.py`).

    One Function for the sake of its backward. Autograd's own (slice -> index_copy_ -> unbind) would stack the
    three gradients into a new tensor, copy SDPA's strided gradients to make them viewable, add one full-size
    buffer per group, and gather the real rows into a heads-major tensor that the QKV projection's backward then
    copies again into token-major order. Here each gradient is gathered once, in whatever layout SDPA returned
    it, straight into the token-major `[tokens, 3, heads, head_dim]` buffer the projection's backward reads as is.
    """

    @staticmethod
    def forward(ctx, heads_major: torch.Tensor, groups: list[AttentionGroup]):
        ctx.groups = groups
        three, h, _, d = heads_major.shape
        ctx.shape, ctx.dtype, ctx.device = (h, d), heads_major.dtype, heads_major.device
        out: list[torch.Tensor] = []
        for g in groups:
            rows = heads_major[:, :, g.start:g.stop]
            if g.slots is None:  # no padding: the grid is the tokens in order
                grid = rows.contiguous()
            else:
                grid = heads_major.new_zeros(three, h, g.count * g.length, d).index_copy_(2, g.slots, rows)
            out.extend(grid.view(three, h, g.count, g.length, d).unbind(0))
        return tuple(out)

    @staticmethod
    def backward(ctx, *grads: torch.Tensor):
        groups: list[AttentionGroup] = ctx.groups
        h, d = ctx.shape
        token_major = torch.empty(groups[-1].stop, 3, h, d, dtype=ctx.dtype, device=ctx.device)
        for gi, g in enumerate(groups):
            n, L = g.count, g.length
            by_position = None  # the real tokens' slots in a [length, count] grid, built once per group
            for i in range(3):
                grad, into = grads[3 * gi + i], token_major[g.start:g.stop, i]     # into: [tokens, heads, d]
                if grad is None:                                                 # an output nobody used
                    into.zero_()
                elif g.slots is None:
                    into.view(n, L, h, d).permute(2, 0, 1, 3).copy_(grad)
                elif grad.transpose(1, 2).is_contiguous():  # [heads, length, count, d] in memory (CPU flash)
                    if by_position is None:
                        by_position = (g.slots % L) * n + torch.div(g.slots, L, rounding_mode="floor")
                    torch.index_select(grad.transpose(1, 2).view(h, L * n, d), 1, by_position,
                                       out=into.transpose(0, 1))
                else:
                    torch.index_select(grad.reshape(h, n * L, d), 1, g.slots, out=into.transpose(0, 1))
        return token_major.permute(1, 2, 0, 3), None


class _GatherFromGroups(torch.autograd.Function):
    """Each group's attention output `[heads, count, length, head_dim]` -> the real tokens' `[tokens, hidden]`
    rows, in packed order, written once; the backward scatters each group's rows back into its grid."""

    @staticmethod
    def forward(ctx, groups: list[AttentionGroup], *ys: torch.Tensor) -> torch.Tensor:
        ctx.groups = groups
        h, d = ys[0].shape[0], ys[0].shape[-1]
        ctx.heads, ctx.head_dim = h, d
        out = ys[0].new_empty(groups[-1].stop, h, d)
        for g, y in zip(groups, ys):
            into = out[g.start:g.stop]                                         # [tokens, heads, d]
            if g.slots is None:
                into.view(g.count, g.length, h, d).copy_(y.permute(1, 2, 0, 3))
            else:
                torch.index_select(y.reshape(h, g.count * g.length, d), 1, g.slots, out=into.transpose(0, 1))
        return out.view(-1, h * d)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        groups: list[AttentionGroup] = ctx.groups
        h, d = ctx.heads, ctx.head_dim
        grad = grad.reshape(-1, h, d)
        grads = []
        for g in groups:
            rows = grad[g.start:g.stop]                                        # [tokens, heads, d]
            if g.slots is None:
                grads.append(rows.view(g.count, g.length, h, d).permute(2, 0, 1, 3))
            else:
                grid = rows.new_zeros(h, g.count * g.length, d).index_copy_(1, g.slots, rows.transpose(0, 1))
                grads.append(grid.view(h, g.count, g.length, d))
        return (None, *grads)


def _local_mask(group: AttentionGroup, half_window: int, device: torch.device) -> torch.Tensor:
    """The group's "may attend" mask narrowed to keys within `half_window` positions of the query.

    A padded query slot keeps the keys it had: its output is never read, but a row with no key at all would
    make softmax NaN, and NaN survives being multiplied by the zero gradient of an unread row.
    """
    L = group.length
    pos = torch.arange(L, device=device)
    band = (pos[:, None] - pos[None, :]).abs() <= half_window                # [length, length]
    if group.mask is None:
        return band[None, None]
    keys = group.mask.any(dim=-2)                                              # [1, count, length]: real keys
    return group.mask & (band | ~keys[..., :, None])


def local_attention_batch(batch: PackedBatch, window: int) -> PackedBatch:
    """The same packing with every group's mask limited to a sliding window of `window` tokens in all
    (`window // 2` either side, as ModernBERT's `local_attention`); what local layers attend with."""
    half = window // 2
    groups = [dataclasses.replace(g, mask=_local_mask(g, half, batch.device)) for g in batch.groups]
    return dataclasses.replace(batch, groups=groups)


def _sdpa_mask(mask: torch.Tensor | None, q: torch.Tensor) -> torch.Tensor | None:
    """SDPA takes a boolean mask as is, an additive one only in the queries' dtype."""
    return mask if mask is None or mask.dtype == torch.bool else mask.to(q.dtype)


class SelfAttention(nn.Module):
    """Fused-QKV multi-head attention over packed tokens, group by group (see the module docstring)."""

    kernels: Kernels = FAST  # set for the whole model by `set_kernels`
    keep_scores = False  # opt-in (TinyBERT): record q k^T / sqrt(d), before mask and softmax, on the padded path
    scores: Optional[torch.Tensor] = None  # [batch, heads, seq, seq] of the last forward, when keep_scores

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size, bias=config.attention_bias)
        self.out = nn.Linear(config.hidden_size, config.hidden_size, bias=config.attention_bias)
        self.dropout_p = config.attention_probs_dropout_prob
        if config.sliding_windows is not None:  # Longformer: global tokens attend through projections of their own
            self.query_global = nn.Linear(config.hidden_size, config.hidden_size, bias=config.attention_bias)
            self.kv_global = nn.Linear(config.hidden_size, 2 * config.hidden_size, bias=config.attention_bias)

    def _explicit(self, qkv: torch.Tensor) -> bool:
        """Spell attention out (`attention_with_dropout`) instead of calling SDPA? On CPU, SDPA is the slower of
        the two when training with attention dropout (its math path draws the mask one Bernoulli sample at a
        time) and when training in bf16 (its bf16 backward; the explicit path's bf16 batched matmuls are not)."""
        if qkv.device.type != "cpu":
            return False
        kernels = self.kernels
        return ((kernels.explicit_attention_dropout and self.training and self.dropout_p > 0)
                or (kernels.explicit_attention_bf16 and qkv.dtype == torch.bfloat16 and qkv.requires_grad))

    def _grid_attention(self, x: torch.Tensor, mask: Optional[torch.Tensor]) -> torch.Tensor:
        """[batch, seq, hidden] -> [batch, seq, hidden] with an additive [batch, 1, 1, seq] mask (`Kernels.export`),
        spelled as ONNX Runtime's attention fusion expects: one projection per Q, K and V (rows of the fused
        one), heads as [batch, heads, seq, head_dim], q k^T / sqrt(d) + mask, softmax, times v."""
        B, L, width = x.shape[0], x.shape[1], self.num_heads * self.head_dim
        weight, bias = self.qkv.weight, self.qkv.bias

        def heads(i: int) -> torch.Tensor:
            part = slice(i * width, (i + 1) * width)
            y = F.linear(x, weight[part], None if bias is None else bias[part])
            return y.view(B, L, self.num_heads, self.head_dim).transpose(1, 2)

        q, k, v = heads(0), heads(1), heads(2)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores + mask.to(scores.dtype)
        probs = F.dropout(torch.softmax(scores, dim=-1), self.dropout_p, self.training)
        return self.out(torch.matmul(probs, v).transpose(1, 2).reshape(B, L, width))

    def forward(self, x: torch.Tensor, batch: PackedBatch,
                rope: Optional[tuple[torch.Tensor, torch.Tensor]] = None,
                rows: Optional[torch.Tensor] = None) -> torch.Tensor:
        """`rope`: the packed tokens' rotary (cos, sin) tables (`RotaryEmbedding`), or None. `rows`: the packed
        rows whose output is wanted (a last layer whose heads read only some rows); every token is still a key
        and a value, but the output projection runs on these rows alone."""
        if batch.grid:
            return self._grid_attention(x, batch.groups[0].mask)
        T, h, d = x.shape[0], self.num_heads, self.head_dim
        # Heads-major layout [3, heads, tokens, head_dim]: each group's tokens go into its grid with one
        # index_copy_ along a single dimension, q/k/v come out contiguous (SDPA's kernels then copy nothing),
        # and padded slots stay zero (their keys are masked anyway). SDPA takes any leading dims: (heads, count).
        token_major = self.qkv(x).view(T, 3, h, d)
        if rope is not None:
            token_major = apply_rotary(token_major, *rope)
        heads_major = token_major.permute(1, 2, 0, 3)
        if batch.window is not None:
            return self._sliding_window(x, heads_major, batch, rows)
        if batch.blocks is not None:
            return self._block_sparse(token_major, batch, rows)
        kernels = self.kernels
        explicit = self._explicit(heads_major)
        dropout_p = self.dropout_p if self.training else 0.0
        if not batch.is_packed:  # the padded reference path: one [batch, seq] grid, plain reshapes (exportable)
            B, L = batch.batch_size, batch.seq_len
            q, k, v = heads_major.reshape(3, h, B, L, d).unbind(0)
            mask = batch.groups[0].mask
            if self.keep_scores:
                self.scores = (q @ k.transpose(-1, -2)).transpose(0, 1) / math.sqrt(d)
            if explicit:
                y = attention_with_dropout(q, k, v, mask, dropout_p, kernels.cheap_dropout)
            else:
                y = F.scaled_dot_product_attention(q, k, v, attn_mask=_sdpa_mask(mask, q), dropout_p=dropout_p)
            y = y.permute(1, 2, 0, 3).reshape(B * L, h * d)
            return self.out(y if rows is None else y[rows])
        qkv = _ScatterToGroups.apply(heads_major, batch.groups)
        ys = []
        for i, g in enumerate(batch.groups):
            q, k, v = qkv[3 * i:3 * i + 3]                                     # each [heads, count, length, d]
            if explicit:
                ys.append(attention_with_dropout(q, k, v, g.mask, dropout_p, kernels.cheap_dropout))
            else:
                ys.append(F.scaled_dot_product_attention(q, k, v, attn_mask=_sdpa_mask(g.mask, q), dropout_p=dropout_p))
        y = _GatherFromGroups.apply(batch.groups, *ys)
        return self.out(y if rows is None else y[rows])

    def _sliding_window(self, x: torch.Tensor, heads_major: torch.Tensor, batch: PackedBatch,
                        rows: Optional[torch.Tensor]) -> torch.Tensor:
        """Longformer's attention (`model/sliding_window.py`) on each group's grid; the global tokens' rows are
        then replaced by their global attention's outputs."""
        h, d = self.num_heads, self.head_dim
        if batch.is_packed:
            qkv = _ScatterToGroups.apply(heads_major, batch.groups)
            grids = [tuple(qkv[3 * i:3 * i + 3]) for i in range(len(batch.groups))]
        else:
            grids = [tuple(heads_major.reshape(3, h, batch.batch_size, batch.seq_len, d).unbind(0))]
        ys = sliding_window_attention(self, grids, x, batch)
        global_rows = ys.pop() if batch.window.rows is not None else None
        if batch.is_packed:
            y = _GatherFromGroups.apply(batch.groups, *ys)
        else:
            y = ys[0].permute(1, 2, 0, 3).reshape(batch.batch_size * batch.seq_len, h * d)
        if global_rows is not None:
            y = y.index_copy(0, batch.window.rows, global_rows.to(y.dtype))
        return self.out(y if rows is None else y[rows])

    def _block_sparse(self, token_major: torch.Tensor, batch: PackedBatch, rows: Optional[torch.Tensor]) -> torch.Tensor:
        """BigBird's attention (`model/block_sparse.py`) on the batch's padded grid, block by block (or, with the
        reference kernels, under the pattern's dense mask)."""
        pattern = batch.blocks
        q, k, v = to_grid(token_major, batch, pattern.length).permute(2, 3, 0, 1, 4).unbind(0)  # [h, B, length, d]
        p = self.dropout_p if self.training else 0.0
        attend = block_sparse_attention if self.kernels.banded_attention else dense_block_attention
        y = attend(q, k, v, pattern, p).permute(1, 2, 0, 3)                                      # [B, length, h, d]
        y = from_grid(y.reshape(*y.shape[:2], -1), batch)
        return self.out(y if rows is None else y[rows])

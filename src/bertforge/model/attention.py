"""Multi-head self-attention through `scaled_dot_product_attention`, or spelled out when training with
attention dropout on CPU.

Q, K and V come from one fused projection (one GEMM instead of three); the checkpoint layer splits it into
HF's `query`/`key`/`value` on save and joins them on load. Inputs are packed tokens: attention is the one
place that needs the [batch, heads, seq, head_dim] layout, so it scatters in and gathers out here.

With attention dropout, SDPA on CPU falls back to its math path and draws the dropout mask one Bernoulli
sample at a time; the explicit path below computes the same thing with bertforge's cheaper mask
(`model/dropout.py`) and is 1.35x as fast for `mini`'s attention, forward + backward. Without dropout
(inference, fine-tuned models evaluated, dropout-0 recipes) SDPA's fused kernel stays, as it never holds
the [seq, seq] scores of all heads at once.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from bertforge.config import BertConfig
from bertforge.model.dropout import dropout
from bertforge.model.packing import PackedBatch


def attention_with_dropout(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                           p: float) -> torch.Tensor:
    """softmax(q k^T / sqrt(d) + mask) with dropout p, times v: what SDPA computes, for `[..., seq, d]` inputs
    and a boolean "may attend" mask broadcastable to `[..., seq, seq]`."""
    *lead, L, d = q.shape
    n = q.numel() // (L * d)
    q = q.reshape(n, L, d) * (1.0 / math.sqrt(d))  # scaling q costs half a pass over the scores
    kt = k.reshape(n, L, d).transpose(1, 2)
    if mask is None:
        scores = torch.bmm(q, kt)
    else:
        bias = torch.zeros(mask.shape, dtype=q.dtype, device=q.device).masked_fill_(~mask, float("-inf"))
        bias = bias.expand(*lead, mask.shape[-2], L).reshape(n, mask.shape[-2], L)
        scores = torch.baddbmm(bias, q, kt)
    probs = dropout(torch.softmax(scores, dim=-1), p)
    return torch.bmm(probs, v.reshape(n, L, d)).view(*lead, L, d)


class _ScatterToHeads(torch.autograd.Function):
    """Packed q/k/v `[3, heads, tokens, head_dim]` -> three zero-padded `[heads, batch, seq, head_dim]` grids
    (`indices` None: a batch without padding, the grid is the tokens in order).

    One Function for the sake of its backward. Autograd's own (unbind -> index_copy_) stacks the three gradients
    into a new tensor, copies SDPA's strided gradients to make them viewable, and gathers the real rows into a
    heads-major tensor that the QKV projection's backward then copies again into token-major order. Here each
    gradient is gathered once, in whatever layout SDPA returned it, straight into the token-major
    `[tokens, 3, heads, head_dim]` buffer that the projection's backward reads as is. Same values.
    """

    @staticmethod
    def forward(ctx, heads_major: torch.Tensor, indices: torch.Tensor | None, batch_size: int, seq_len: int):
        ctx.save_for_backward(indices)
        three, h, _, d = heads_major.shape
        if indices is None:  # no padding: every grid slot is a token, in order
            grid = heads_major.contiguous()
        else:
            grid = heads_major.new_zeros(three, h, batch_size * seq_len, d).index_copy_(2, indices, heads_major)
        return grid.view(three, h, batch_size, seq_len, d).unbind(0)

    @staticmethod
    def backward(ctx, *grads: torch.Tensor):
        (indices,) = ctx.saved_tensors
        h, B, L, d = grads[0].shape
        if indices is None:
            token_major = grads[0].new_empty(B * L, len(grads), h, d)
            for i, g in enumerate(grads):
                token_major[:, i].view(B, L, h, d).permute(2, 0, 1, 3).copy_(g)
            return token_major.permute(1, 2, 0, 3), None, None, None
        token_major = grads[0].new_empty(indices.numel(), len(grads), h, d)
        by_seq = None
        for i, g in enumerate(grads):
            if g.transpose(1, 2).is_contiguous():  # [heads, seq, batch, d] in memory, as CPU flash attention gives
                if by_seq is None:  # the real tokens' rows in that order
                    by_seq = (indices % L) * B + torch.div(indices, L, rounding_mode="floor")
                rows, source = by_seq, g.transpose(1, 2).view(h, L * B, d)
            else:
                rows, source = indices, g.reshape(h, B * L, d)
            torch.index_select(source, 1, rows, out=token_major[:, i].transpose(0, 1))
        return token_major.permute(1, 2, 0, 3), None, None, None


class SelfAttention(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.out = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout_p = config.attention_probs_dropout_prob

    def forward(self, x: torch.Tensor, batch: PackedBatch) -> torch.Tensor:
        B, L, T = batch.batch_size, batch.seq_len, x.shape[0]
        h, d = self.num_heads, self.head_dim
        # Heads-major layout [3, heads, B*L, head_dim]: packed tokens go in with one index_copy_ along a
        # single dimension, q/k/v come out contiguous (SDPA's kernels then copy nothing), and padded slots
        # stay zero (their keys are masked anyway). SDPA takes any leading dims: here (heads, batch).
        heads_major = self.qkv(x).view(T, 3, h, d).permute(1, 2, 0, 3)
        q, k, v = _ScatterToHeads.apply(heads_major, batch.indices, B, L)      # each [heads, B, L, head_dim]
        mask = batch.attention_mask
        mask = mask.transpose(0, 1) if mask is not None else None          # [1, B, 1|L, L]
        if self.training and self.dropout_p > 0 and x.device.type == "cpu":
            y = attention_with_dropout(q, k, v, mask, self.dropout_p)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                               dropout_p=self.dropout_p if self.training else 0.0)
        y = y.reshape(h, B * L, d)
        if batch.is_packed:
            y = y.index_select(1, batch.indices)                           # real tokens only
        return self.out(y.transpose(0, 1).reshape(T, h * d))

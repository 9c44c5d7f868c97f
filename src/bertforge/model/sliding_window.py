"""Longformer's attention (Beltagy et al., 2020): a sliding window plus global tokens, computed band by band.

Each token attends to the keys within `radius` = attention_window // 2 positions of it, and to the global tokens
of its sequence (with the layer's ordinary Q/K/V); each global token attends to every key of its sequence, with
separate projections (HF's `query_global`, `key_global`, `value_global`), and its output replaces the windowed one.

The banded path never forms a [length, length] score matrix (except for an input no longer than three radii,
where that matrix is smaller than the chunks'; see `_windowed`). The queries are cut into chunks of `radius` rows;
chunk c can only see keys in [(c-1) radius, (c+2) radius), so its keys are a `3 radius` slice of the padded keys
(`unfold`: a view, no copy until the matmul), its scores are [radius, 3 radius] and a fixed band mask keeps the
offsets within the window. The global keys' scores are a few more columns of the same softmax. Memory and time are
O(length x radius) per head; the global queries add O(globals x length). The dense path (`Kernels.banded_attention`
off: the reference) builds the same pattern as one [length, length] mask for SDPA; tests hold the two equal.

Works on the grids of `model/packing.py` (one per attention group, or the padded batch): padded slots are not
keys, and a padded query's row, which nobody reads, is kept finite (masked scores are the dtype's lowest value,
never -inf, so a row with no key is uniform rather than NaN).
"""
from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from bertforge.model.dropout import dropout
from bertforge.model.kernels import Kernels
from bertforge.model.packing import AttentionGroup, GroupGlobals, PackedBatch, SlidingWindow


# ---- the pattern, built once per forward -----------------------------------------------------------------------
def _grid(flags: torch.Tensor, group: AttentionGroup) -> torch.Tensor:
    """A group's packed per-token flags [tokens] -> its [count, length] grid (False at padded slots)."""
    if group.slots is None:
        return flags.view(group.count, group.length)
    grid = flags.new_zeros(group.count * group.length)
    return grid.index_copy_(0, group.slots, flags).view(group.count, group.length)


def _group_globals(batch: PackedBatch, group: AttentionGroup) -> GroupGlobals:
    n, L = group.count, group.length
    if group.mask is not None and group.mask.shape[-2] != 1:
        raise ValueError("sliding-window attention is bidirectional; it has no causal form")
    keys = (group.mask.reshape(n, L) if group.mask is not None
            else torch.ones(n, L, dtype=torch.bool, device=batch.device))
    if batch.global_tokens is None:
        flags = torch.zeros(n, L, dtype=torch.bool, device=batch.device)
    else:
        flags = _grid(batch.global_tokens[group.start:group.stop], group) & keys
    most = int(flags.sum(dim=1).max()) if n else 0
    position = torch.arange(L, device=batch.device)
    # global positions first, in order, then the others: the first `most` columns are each row's global tokens
    order = torch.where(flags, position, position + L).argsort(dim=1)[:, :most]
    valid = torch.arange(most, device=batch.device) < flags.sum(dim=1, keepdim=True)
    return GroupGlobals(keys, flags, order, valid)


def sliding_window_pattern(batch: PackedBatch, radius: int) -> SlidingWindow:
    """The pattern of `batch` (its groups' real and global tokens) for a window of `radius` either side."""
    if torch.jit.is_tracing():
        raise ValueError("Longformer's attention plans its chunks and global tokens from each batch in Python, which "
                         "a trace would freeze to the example batch: it has no ONNX export; serve the folder with "
                         "the PyTorch backend")
    groups = [_group_globals(batch, g) for g in batch.groups]
    rows = None
    if batch.global_tokens is not None and bool(batch.global_tokens.any()):
        rows = batch.global_tokens.nonzero().squeeze(1)
    return SlidingWindow(radius, groups, rows)


# ---- the windowed attention of every query -----------------------------------------------------------------
def _band(radius: int, device: torch.device) -> torch.Tensor:
    """[radius, 3 radius]: query a of a chunk may see key b of the chunk's 3-chunk key slice (|offset| <= radius)."""
    a = torch.arange(radius, device=device)[:, None]
    b = torch.arange(3 * radius, device=device)[None, :]
    return (b - radius - a).abs() <= radius


def _chunked(t: torch.Tensor, radius: int, padded: int) -> torch.Tensor:
    """[..., length, d] -> [..., chunks, d, 3 radius]: each query chunk's key slice, a strided view of `t` padded
    with `radius` rows before and enough after."""
    before, after = radius, padded - t.shape[-2] + radius
    return F.pad(t, (0, 0, before, after)).unfold(-2, 3 * radius, radius)


def banded_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, local_keys: torch.Tensor,
                     global_k: Optional[torch.Tensor], global_v: Optional[torch.Tensor],
                     global_valid: Optional[torch.Tensor], radius: int, p: float = 0.0,
                     cheap_dropout: bool = True) -> torch.Tensor:
    """softmax over (the window's keys, the global keys) for every query, chunk by chunk.

    q, k, v: [heads, n, length, d]. `local_keys` [n, length]: keys a query may see inside its window (real and
    not global: a global key is one of the extra columns, so it is never counted twice). `global_k`/`global_v`
    [heads, n, most, d] with `global_valid` [n, most], or None. Returns [heads, n, length, d]."""
    h, n, L, d = q.shape
    chunks = -(-L // radius)
    padded = chunks * radius
    low = torch.finfo(q.dtype).min
    qc = F.pad(q * (1.0 / math.sqrt(d)), (0, 0, 0, padded - L)).view(h, n, chunks, radius, d)
    keys_ok = local_keys.new_zeros(n, padded + 2 * radius)
    keys_ok[:, radius:radius + L] = local_keys
    allowed = _band(radius, q.device) & keys_ok.unfold(1, 3 * radius, radius)[:, :, None, :]  # [n, chunks, r, 3r]
    scores = torch.matmul(qc, _chunked(k, radius, padded)).masked_fill_(~allowed, low)        # [h, n, chunks, r, 3r]
    most = 0 if global_k is None else global_k.shape[-2]
    if most:
        extra = torch.matmul(qc, global_k.transpose(-1, -2)[:, :, None])                      # [h, n, chunks, r, most]
        scores = torch.cat([extra.masked_fill_(~global_valid[:, None, None, :], low), scores], dim=-1)
    wide = torch.promote_types(q.dtype, torch.float32)  # bf16/fp16 scores are softmaxed in fp32, as HF does
    probs = dropout(torch.softmax(scores, dim=-1, dtype=wide).to(q.dtype), p, cheap=cheap_dropout)
    out = torch.matmul(probs[..., most:], _chunked(v, radius, padded).transpose(-1, -2))
    if most:
        out = out + torch.matmul(probs[..., :most], global_v[:, :, None])
    return out.reshape(h, n, padded, d)[:, :, :L]


def window_mask(keys: torch.Tensor, global_tokens: torch.Tensor, radius: int) -> torch.Tensor:
    """The same pattern as one dense [n, length, length] "may attend" mask: real keys within `radius`, or global.
    A row with no key (a padded query far from any real token) may see every key: it is never read."""
    L = keys.shape[1]
    position = torch.arange(L, device=keys.device)
    band = (position[:, None] - position[None, :]).abs() <= radius
    allowed = keys[:, None, :] & (band[None] | global_tokens[:, None, :])
    return allowed | ~allowed.any(dim=-1, keepdim=True)


def _gathered(t: torch.Tensor, pattern: GroupGlobals) -> torch.Tensor:
    """[heads, n, length, d] -> the global tokens' rows [heads, n, most, d] (row 0 where `valid` is False)."""
    n = t.shape[1]
    return t[:, torch.arange(n, device=t.device)[:, None], pattern.positions]


def _windowed(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pattern: GroupGlobals, radius: int, p: float,
              kernels: Kernels) -> torch.Tensor:
    """Every query's sliding-window + global-key attention on one grid. A grid no longer than three radii (a
    fine-tuning batch of paragraphs on a 4,096-token model) takes the dense path unless `dense_short_windows` is
    off: the banded path pads it to whole chunks of `radius` queries, each scoring `3 radius` keys, more work and
    memory than the [length, length] scores, for the same pattern."""
    short = kernels.dense_short_windows and q.shape[-2] <= 3 * radius
    if not kernels.banded_attention or short:
        mask = window_mask(pattern.keys, pattern.global_tokens, radius)[None]
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
    local = pattern.keys & ~pattern.global_tokens
    if pattern.most == 0:
        return banded_attention(q, k, v, local, None, None, None, radius, p, kernels.cheap_dropout)
    return banded_attention(q, k, v, local, _gathered(k, pattern), _gathered(v, pattern), pattern.valid, radius, p,
                            kernels.cheap_dropout)


# ---- the global queries ----------------------------------------------------------------------------------------
def _to_grid(rows: torch.Tensor, group: AttentionGroup) -> torch.Tensor:
    """A group's packed rows [tokens, ...] -> [count, length, ...] (zeros at padded slots), differentiably."""
    if group.slots is None:
        return rows.reshape(group.count, group.length, *rows.shape[1:])
    grid = rows.new_zeros(group.count * group.length, *rows.shape[1:])
    return grid.index_copy(0, group.slots, rows).view(group.count, group.length, *rows.shape[1:])


def _global_outputs(attention: nn.Module, x: torch.Tensor, batch: PackedBatch, p: float) -> torch.Tensor:
    """The global tokens' outputs [globals, hidden], in the order of `batch.window.rows`: each attends to every
    real key of its sequence through the global projections."""
    h, d = attention.num_heads, attention.head_dim
    window = batch.window
    queries = attention.query_global(x[window.rows]).view(-1, h, d)                      # [globals, h, d]
    kv = attention.kv_global(x).view(-1, 2, h, d)
    outs, taken = [], 0
    for group, pattern in zip(batch.groups, window.groups):
        count = int(pattern.valid.sum())
        if count == 0:
            continue
        mine = queries[taken:taken + count]
        taken += count
        slots = pattern.valid.reshape(-1).nonzero().squeeze(1)
        q = mine.new_zeros(group.count * pattern.most, h, d).index_copy(0, slots, mine)
        q = q.view(group.count, pattern.most, h, d).permute(2, 0, 1, 3)                    # [h, n, most, d]
        k, v = _to_grid(kv[group.start:group.stop], group).permute(2, 3, 0, 1, 4).unbind(0)  # [h, n, length, d]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=pattern.keys[None, :, None, :], dropout_p=p)
        outs.append(y.permute(1, 2, 0, 3).reshape(group.count * pattern.most, h * d)[slots])
    return torch.cat(outs)


# ---- one layer's attention -------------------------------------------------------------------------------------
def sliding_window_attention(attention: nn.Module, qkv_grids: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
                             x: torch.Tensor, batch: PackedBatch) -> list[torch.Tensor]:
    """Each group's output grid [heads, count, length, d] with the global tokens' rows still windowed, and (as
    the last element, when there are global tokens) their global outputs [globals, hidden] to write over them.

    `attention` is the layer's `SelfAttention` (its heads, dropout, kernels and global projections); `qkv_grids`
    its Q, K, V in each group's grid."""
    window = batch.window
    p = attention.dropout_p if attention.training else 0.0
    kernels = attention.kernels
    ys = [_windowed(q, k, v, pattern, window.radius, p, kernels) for (q, k, v), pattern in zip(qkv_grids, window.groups)]
    if window.rows is not None:
        ys.append(_global_outputs(attention, x, batch, p))
    return ys

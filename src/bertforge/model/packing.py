"""Removing padding: run every dense layer on real tokens only, and attention on grids sized to the sequences.

A batch of variable-length sequences padded to its longest one wastes the padded share of every matmul.
`PackedBatch` records where the real tokens sit, so layers work on a `[tokens, hidden]` matrix and only
attention, which must see each sequence on its own, scatters back to a `[sequences, length]` grid.

Attention's cost grows with the grid's length squared, so one grid padded to the longest sequence wastes
most of it on a batch of mixed lengths (pre-training pairs: half the grid; SST-2: three quarters). The
sequences are therefore split into a few *attention groups* of similar length, each with its own grid
(`plan_groups`). The packed rows are ordered group by group, so a group's tokens are one contiguous block.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

MAX_GROUPS = 4  # 1 turns grouping off: one grid padded to the longest sequence
MIN_SAVING = 0.1  # a split must cut the attention grid's cost by this share, or the batch stays one grid


@dataclass
class AttentionGroup:
    """Sequences that attend in one `[count, length]` grid; their tokens are packed rows `start:stop`."""
    start: int
    stop: int
    count: int
    length: int
    # slot (in the flattened [count*length] grid) of each of the group's packed tokens; None: no padding
    slots: Optional[torch.Tensor]
    # [1, count, 1|length, length] boolean "may attend" mask, in SDPA's layout, or None (no mask needed)
    mask: Optional[torch.Tensor]


@dataclass
class GroupGlobals:
    """One attention group's global tokens (Longformer), in its `[count, length]` grid, for `model/sliding_window.py`.

    `positions[s, i]` is the grid position of sequence s's i-th global token (`valid` says which of the
    `[count, most]` entries are real); the group's global tokens in packed order are the True entries of
    `valid` in row-major order, which is how their queries are placed in a `[count, most]` grid."""
    keys: torch.Tensor          # [count, length] bool: real tokens (what every key mask starts from)
    global_tokens: torch.Tensor  # [count, length] bool: real tokens with global attention
    positions: torch.Tensor     # [count, most] long
    valid: torch.Tensor         # [count, most] bool

    @property
    def most(self) -> int:
        return self.positions.shape[1]


@dataclass
class SlidingWindow:
    """Longformer's attention pattern over a packing: a token attends to the keys within `radius` positions of
    it and to its sequence's global tokens; a global token attends to every key of its sequence (with the
    layer's global projections). `rows` are the packed rows of the global tokens, group by group (None: none)."""
    radius: int
    groups: list[GroupGlobals]
    rows: Optional[torch.Tensor]


@dataclass
class BlockPattern:
    """One batch's block-sparse layout: the grid, its real keys and the random blocks of each head."""
    block: int
    length: int                    # the grid's length: the batch's, rounded up to whole blocks
    keys: torch.Tensor             # [batch, length] bool: real tokens
    full: bool                     # too short for the pattern: full attention, as transformers switches to
    table: Optional[torch.Tensor]  # [heads, blocks - 2, 5 + r] key blocks of each middle query block
    valid: Optional[torch.Tensor]  # [blocks - 2, 5 + r] bool: False where a window block repeats a global one


def plan_groups(spans: list[int], max_groups: int = MAX_GROUPS, min_saving: float = MIN_SAVING) -> list[list[int]]:
    """Split sequences (by index) into at most `max_groups` runs of similar span, minimising sum(count * length^2).

    Exact dynamic programme over the distinct spans (at most the sequence length of them). Fewer groups win
    unless more cut the cost by `min_saving`: every group costs a few more kernel calls per layer.
    """
    order = sorted(range(len(spans)), key=lambda i: spans[i])
    values, counts = np.unique(np.asarray([spans[i] for i in order], dtype=np.float64), return_counts=True)
    D = len(values)
    cum = np.concatenate([[0.0], np.cumsum(counts)])
    sq = values ** 2
    # best[g][j]: cost of covering distinct spans 0..j with g+1 groups; cut[g][j]: where the last group starts
    best = np.full((max_groups, D), np.inf)
    cut = np.zeros((max_groups, D), dtype=np.int64)
    best[0] = cum[1:] * sq
    for g in range(1, max_groups):
        for j in range(g, D):
            starts = np.arange(1, j + 1)                       # last group covers distinct spans starts..j
            cost = best[g - 1][starts - 1] + (cum[j + 1] - cum[starts]) * sq[j]
            k = int(np.argmin(cost))
            best[g][j], cut[g][j] = cost[k], starts[k]
    n_groups = 1
    for g in range(1, min(max_groups, D)):
        if best[g][D - 1] <= (1.0 - min_saving) * best[n_groups - 1][D - 1]:
            n_groups = g + 1
    bounds, j = [], D - 1                                      # walk the cuts back: distinct-span ranges
    for g in range(n_groups - 1, -1, -1):
        s = int(cut[g][j]) if g > 0 else 0
        bounds.append((s, j))
        j = s - 1
    groups, taken = [], 0
    for s, e in reversed(bounds):
        n = int(cum[e + 1] - cum[s])
        groups.append(sorted(order[taken:taken + n]))          # batch order inside a group
        taken += n
    return groups


def additive_mask(attention_mask: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """[batch, seq] 0/1 -> [batch, 1, 1, seq]: 0 where a key may be attended, the lowest float where not.
    Spelled (1 - mask) * min as BERT's reference code does: ONNX Runtime's attention fusion recognises it."""
    if attention_mask is None:
        return None
    if attention_mask.dim() != 2:
        raise ValueError(f"attention_mask must be [batch, seq] of 0/1, got shape {tuple(attention_mask.shape)}")
    return (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * torch.finfo(torch.float32).min


@dataclass
class PackedBatch:
    batch_size: int
    seq_len: int
    # positions (in the flattened [batch*seq] grid) of the packed rows, group by group; None: no padding
    indices: Optional[torch.Tensor]
    groups: list[AttentionGroup]
    device: torch.device = torch.device("cpu")
    causal: bool = False
    # the layers keep the padded [batch, seq, hidden] layout and the one group's mask is additive, [batch, 1, 1, seq]
    # (`Kernels.grid_layout`: what an ONNX export records); `BertModel.forward` returns the last layer's output as it
    # is, `encode` flattens it to [batch*seq, hidden] rows for the heads
    grid: bool = False
    # Longformer: the packed rows' global-attention flags ([tokens] bool; None: no global token), and, in the
    # batch a sliding-window layer attends with, its pattern (`Encoder` sets it per window size)
    global_tokens: Optional[torch.Tensor] = None
    window: Optional[SlidingWindow] = None
    # BigBird: the block-sparse layout of the batch's padded grid (`model/block_sparse.py`), or None
    blocks: Optional[BlockPattern] = None

    @classmethod
    def from_mask(cls, attention_mask: Optional[torch.Tensor], batch_size: int, seq_len: int,
                  device: torch.device, causal: bool = False, unpad: bool = True,
                  max_groups: int = MAX_GROUPS, grid: bool = False) -> "PackedBatch":
        B, L = batch_size, seq_len
        if grid:
            if causal:
                raise ValueError("the grid layout has no causal mask")
            return cls(B, L, None, [AttentionGroup(0, B * L, B, L, None, additive_mask(attention_mask))], device,
                       grid=True)
        tril = torch.ones(L, L, dtype=torch.bool, device=device).tril() if causal else None
        if attention_mask is None or bool(attention_mask.all()):
            mask = tril[None, None] if causal else None
            return cls(B, L, None, [AttentionGroup(0, B * L, B, L, None, mask)], device, causal)
        if attention_mask.dim() != 2:
            raise ValueError(f"attention_mask must be [batch, seq] of 0/1, got shape {tuple(attention_mask.shape)}")
        keys = attention_mask.bool()
        # A sequence with no real token would leave a query row with nothing to attend to (NaN); let it see
        # its first position. Its outputs are never read.
        empty = ~keys.any(dim=1)
        if empty.any():
            keys = keys.clone()
            keys[empty, 0] = True
        if not unpad:  # layers see the padded [batch*seq] rows; attention is one grid
            mask = keys[None, :, None, :] & tril if causal else keys[None, :, None, :]
            return cls(B, L, None, [AttentionGroup(0, B * L, B, L, None, mask)], device, causal)
        # span = last real position + 1: a sequence's grid row must reach it (left padding spans all of L)
        spans = (L - keys.flip(1).int().argmax(dim=1)).tolist()
        real = attention_mask.bool()
        groups, indices, start = [], [], 0
        for members in plan_groups(spans, max_groups):
            length = max(spans[i] for i in members)
            rows = torch.tensor(members, device=device)
            sub = real[rows, :length]                                    # [count, length]
            slots = sub.reshape(-1).nonzero().squeeze(1)
            indices.append(rows[slots // length] * L + slots % length)
            group_keys = keys[rows, :length]
            mask = group_keys[None, :, None, :]
            if causal:
                mask = mask & tril[:length, :length]
            elif bool(group_keys.all()):
                mask = None
            groups.append(AttentionGroup(start, start + slots.numel(), len(members), length, slots, mask))
            start += slots.numel()
        return cls(B, L, torch.cat(indices), groups, device, causal)

    @property
    def is_packed(self) -> bool:
        return self.indices is not None

    def pack(self, padded: torch.Tensor) -> torch.Tensor:
        """[batch, seq, ...] -> [tokens, ...] (real tokens only when packed)."""
        flat = padded.reshape(self.batch_size * self.seq_len, *padded.shape[2:])
        return flat if self.indices is None else flat.index_select(0, self.indices)

    def unpack(self, packed: torch.Tensor) -> torch.Tensor:
        """[tokens, ...] -> [batch, seq, ...], zeros at padded positions."""
        if self.indices is None:
            return packed.reshape(self.batch_size, self.seq_len, *packed.shape[1:])
        out = packed.new_zeros(self.batch_size * self.seq_len, *packed.shape[1:])
        out = out.index_copy(0, self.indices, packed)
        return out.reshape(self.batch_size, self.seq_len, *packed.shape[1:])

    def _row_of_position(self) -> torch.Tensor:
        """Packed row of every flattened [batch*seq] position (-1 at padding)."""
        rows = torch.full((self.batch_size * self.seq_len,), -1, dtype=torch.long, device=self.device)
        return rows.index_copy_(0, self.indices, torch.arange(self.indices.numel(), device=self.device))

    def first_token_rows(self) -> torch.Tensor:
        """Row of each sequence's position 0 ([CLS]) in the packed matrix (its first real token if padded left)."""
        starts = torch.arange(self.batch_size, device=self.device) * self.seq_len
        if self.indices is None:
            return starts
        # the first real position of each sequence: positions are increasing within a sequence's rows
        first = torch.full((self.batch_size,), self.seq_len * self.batch_size, dtype=torch.long, device=self.device)
        first = first.scatter_reduce(0, self.indices // self.seq_len, self.indices, reduce="amin")
        rows = self._row_of_position()
        return rows[first.clamp_(max=self.batch_size * self.seq_len - 1)].clamp_(min=0)

    def rows_of(self, positions: torch.Tensor) -> torch.Tensor:
        """Packed rows of the flattened [batch*seq] positions selected by a boolean [batch, seq] mask."""
        flat = positions.reshape(-1).nonzero().squeeze(1)
        if self.indices is None:
            return flat
        return self._row_of_position()[flat]

"""Removing padding: run every dense layer on real tokens only.

A batch of variable-length sequences padded to its longest one wastes the padded share of every matmul.
`PackedBatch` records where the real tokens sit, so layers work on a `[tokens, hidden]` matrix and only
attention, which must see each sequence on its own, scatters back to `[batch, seq]`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch


@dataclass
class PackedBatch:
    batch_size: int
    seq_len: int
    # positions (in the flattened [batch*seq] grid) of the real tokens; None when the batch has no padding
    indices: Optional[torch.Tensor]
    # [batch, 1, 1|seq, seq] boolean "may attend" mask for attention, or None (no padding, not causal)
    attention_mask: Optional[torch.Tensor]
    device: torch.device = torch.device("cpu")
    causal: bool = False

    @classmethod
    def from_mask(cls, attention_mask: Optional[torch.Tensor], batch_size: int, seq_len: int,
                  device: torch.device, causal: bool = False, unpad: bool = True) -> "PackedBatch":
        if attention_mask is None or bool(attention_mask.all()):
            mask = None
            if causal:
                mask = torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()[None, None]
            return cls(batch_size, seq_len, None, mask, device, causal)
        if attention_mask.dim() != 2:
            raise ValueError(f"attention_mask must be [batch, seq] of 0/1, got shape {tuple(attention_mask.shape)}")
        keys = attention_mask.bool()
        # A sequence with no real token would leave a query row with nothing to attend to (NaN); let it see
        # its first position. Its outputs are never read.
        empty = ~keys.any(dim=1)
        if empty.any():
            keys = keys.clone()
            keys[empty, 0] = True
        mask = keys[:, None, None, :]
        if causal:
            mask = mask & torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()[None, None]
        indices = attention_mask.reshape(-1).nonzero().squeeze(1) if unpad else None
        return cls(batch_size, seq_len, indices, mask, device, causal)

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

    def first_token_rows(self) -> torch.Tensor:
        """Row of each sequence's position 0 ([CLS]) in the packed matrix."""
        starts = torch.arange(self.batch_size, device=self.device) * self.seq_len
        if self.indices is None:
            return starts
        return torch.searchsorted(self.indices, starts).clamp_(max=self.indices.numel() - 1)

    def rows_of(self, positions: torch.Tensor) -> torch.Tensor:
        """Packed rows of the flattened [batch*seq] positions selected by a boolean [batch, seq] mask."""
        flat = positions.reshape(-1).nonzero().squeeze(1)
        if self.indices is None:
            return flat
        return torch.searchsorted(self.indices, flat)

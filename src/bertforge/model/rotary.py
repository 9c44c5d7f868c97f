"""Rotary position embeddings (RoFormer, Su et al. 2021), as ModernBERT uses them.

Each (i, i + d/2) pair of a head's query and key is rotated by an angle proportional to the token's position,
so q·k depends on the distance between two tokens and not on where they sit. There is no position table:
a `theta` (the base of the angle frequencies) is all there is to configure, one for global and one for local
layers in ModernBERT.

Rotation acts on packed tokens, before attention scatters them into its grids, so each token's own position
id is all it needs: unpadding and attention groups never see it.
"""
from __future__ import annotations

import torch
from torch import nn


class RotaryEmbedding(nn.Module):
    """cos/sin tables for given positions, `[tokens, head_dim]` in the dtype asked for (angles in fp32)."""

    def __init__(self, head_dim: int, theta: float) -> None:
        super().__init__()
        self.theta = float(theta)
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        # not persistent: derived from the config, and never part of a checkpoint
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        angles = positions.to(torch.float32)[:, None] * self.inv_freq.to(positions.device)[None, :]
        angles = torch.cat((angles, angles), dim=-1)
        return angles.cos().to(dtype), angles.sin().to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(x1, x2) -> (-x2, x1) over the last dimension's two halves."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary(qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the queries and keys of a token-major `[tokens, 3, heads, head_dim]` projection; V is untouched.

    `cos`/`sin` are `[tokens, head_dim]`, one row per packed token.
    """
    qk = qkv[:, :2]
    cos, sin = cos[:, None, None, :], sin[:, None, None, :]
    rotated = qk * cos + rotate_half(qk) * sin
    return torch.cat((rotated, qkv[:, 2:]), dim=1)

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
    """The rotation tables for given positions: cos and sin of each (position, frequency), in the dtype asked
    for (angles in fp32), laid out as `[tokens, 2, heads, head_dim / 2]` -- the shape of the queries' and keys'
    halves they multiply. Built once per forward and shared by the layers: full-size tables make every pass of
    the rotation a plain elementwise product (broadcasting over the middle dimensions is several times slower
    on CPU)."""

    def __init__(self, head_dim: int, theta: float) -> None:
        super().__init__()
        self.theta = float(theta)
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        # not persistent: derived from the config, and never part of a checkpoint
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, positions: torch.Tensor, dtype: torch.dtype, heads: int) -> tuple[torch.Tensor, torch.Tensor]:
        angles = positions.to(torch.float32)[:, None] * self.inv_freq.to(positions.device)[None, :]
        shape = (angles.shape[0], 2, heads, angles.shape[1])
        table = angles[:, None, None, :].expand(shape)
        return table.cos().to(dtype).contiguous(), table.sin().to(dtype).contiguous()


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, sign: float) -> torch.Tensor:
    """Rotate the q and k halves of a `[tokens, 3, heads, head_dim]` tensor by +angle (sign 1) or -angle (-1),
    V copied as is: (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin) for +angle."""
    half = x.shape[-1] // 2
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    x1, x2 = x[:, :2, :, :half], x[:, :2, :, half:]
    torch.mul(x1, cos, out=out[:, :2, :, :half]).addcmul_(x2, sin, value=-sign)
    torch.mul(x2, cos, out=out[:, :2, :, half:]).addcmul_(x1, sin, value=sign)
    out[:, 2:].copy_(x[:, 2:])
    return out


class _Rotary(torch.autograd.Function):
    """The rotation and, as its backward, the inverse rotation of the gradient: four elementwise passes each
    way, where autograd's version of `q * cos + rotate_half(q) * sin` makes a dozen."""

    @staticmethod
    def forward(ctx, qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(cos, sin)
        return _rotate(qkv, cos, sin, 1.0)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        cos, sin = ctx.saved_tensors
        return _rotate(grad, cos, sin, -1.0), None, None


def apply_rotary(qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the queries and keys of a token-major `[tokens, 3, heads, head_dim]` projection; V is untouched.

    `cos`/`sin` are `RotaryEmbedding`'s tables, `[tokens, 2, heads, head_dim / 2]`, one row per packed token.
    """
    return _Rotary.apply(qkv, cos, sin)

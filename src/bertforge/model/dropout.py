"""Dropout whose random mask is cheap to draw on CPU.

On CPU, PyTorch's dropout draws one Bernoulli sample per element (`bernoulli_`): in a profile of `mini`
pre-training those draws were 8 % of the whole step, more than LayerNorm, GELU and the optimizer together.
Here one 64-bit random integer gives four 16-bit lanes, and an element is dropped when its lane falls below
`round(p * 65536)`, so the drop rate is p to within 1 / 131072 (0.1 -> 0.100006) and a mask costs about a
quarter of `bernoulli_`'s time; dropout forward + backward is 1.6x as fast (`benchmarks/bench_step_parts.py`).
The kept values are scaled by 1 / (1 - p) as usual; the mask is kept as bools for the backward. Elsewhere
(CUDA draws its masks in-kernel) and at p = 0 this is `F.dropout`.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from bertforge.model.kernels import FAST, Kernels

_LANES = 65536  # values of one 16-bit lane


def keep_mask(shape: torch.Size | tuple[int, ...], p: float, device: torch.device | str = "cpu") -> torch.Tensor:
    """Bool mask, True = keep, each element dropped with probability p (to 1 / 131072), from the global RNG."""
    n = math.prod(shape)
    words = torch.randint(-2**63, 2**63 - 1, ((n + 3) // 4,), dtype=torch.int64, device=device)
    lanes = words.view(torch.int16)[:n].view(shape)
    return lanes >= round(p * _LANES) - _LANES // 2


class _MaskedScale(torch.autograd.Function):
    """x * keep * scale, with the same mask and scale applied to the gradient."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, keep: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.save_for_backward(keep)
        ctx.scale = scale
        return x.mul(keep).mul_(scale)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (keep,) = ctx.saved_tensors
        return grad.mul(keep).mul_(ctx.scale), None, None


def dropout(x: torch.Tensor, p: float, training: bool = True, cheap: bool = True) -> torch.Tensor:
    """`F.dropout` with a cheaper mask on CPU (see the module docstring); `cheap=False` is `F.dropout`."""
    if not training or p == 0.0:
        return x
    if not cheap or x.device.type != "cpu" or p >= 1.0:
        return F.dropout(x, p, training=True)
    return _MaskedScale.apply(x, keep_mask(x.shape, p), 1.0 / (1.0 - p))


class Dropout(nn.Dropout):
    """Drop-in `nn.Dropout` (same `p`, same repr) that uses `dropout` above when the model's kernels say so."""

    kernels: Kernels = FAST

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training, cheap=self.kernels.cheap_dropout)

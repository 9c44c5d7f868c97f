"""The vocabulary decoder's matmul in cache-sized tiles (CPU).

`[rows, H] x [H, 30522]` writes a 30,522-wide output; MKL runs it at 55-65 % of the rate it reaches on square
GEMMs, the slowest GEMM of a `mini` training step (about 9 % of it). Computed as tiles of 512 rows x 1,024
vocabulary columns (a 2 MB output tile that stays in cache while it is written), the same products run 1.26x
as fast (`benchmarks/bench_step_parts.py`, `mini`'s shape), and each tile is one `addmm` over the full H:
every output element is the same dot product. Backward is autograd's (two GEMMs and a
sum). Other devices, other dtypes and autocast take `F.linear`.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

TILE_ROWS = 512
TILE_COLUMNS = 1024


class _TiledLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor]) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        rows, columns = x.shape[0], weight.shape[0]
        out = x.new_empty(rows, columns)
        for c in range(0, columns, TILE_COLUMNS):
            w = weight[c:c + TILE_COLUMNS].t()
            b = bias[c:c + TILE_COLUMNS] if bias is not None else None
            for r in range(0, rows, TILE_ROWS):
                tile = out[r:r + TILE_ROWS, c:c + TILE_COLUMNS]
                if b is None:
                    torch.mm(x[r:r + TILE_ROWS], w, out=tile)
                else:
                    torch.addmm(b, x[r:r + TILE_ROWS], w, out=tile)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, weight = ctx.saved_tensors
        grad_x = grad @ weight if ctx.needs_input_grad[0] else None
        grad_w = grad.t() @ x if ctx.needs_input_grad[1] else None
        grad_b = grad.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return grad_x, grad_w, grad_b


def tiled_linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """`F.linear(x, weight, bias)`; on CPU in fp32, computed tile by tile (see the module docstring)."""
    if (x.device.type != "cpu" or x.dtype != torch.float32 or weight.dtype != torch.float32
            or torch.is_autocast_enabled("cpu") or x.numel() == 0):
        return F.linear(x, weight, bias)
    flat = x.reshape(-1, x.shape[-1])
    return _TiledLinear.apply(flat, weight, bias).view(*x.shape[:-1], weight.shape[0])

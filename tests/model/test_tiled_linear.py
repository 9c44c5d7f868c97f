"""The tiled vocabulary matmul gives F.linear's values and gradients, whatever the remainders."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from bertforge.model import tiled_linear as tl


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(1100, 16), (3, 5, 16), (7, 16)])
def test_values_and_gradients_match_f_linear(bias, shape):
    torch.manual_seed(0)
    x = torch.randn(*shape, requires_grad=True)
    w = torch.randn(2500, 16, requires_grad=True)                    # 2 full column tiles and a remainder
    b = torch.randn(2500, requires_grad=True) if bias else None
    grad = torch.randn(*shape[:-1], 2500)
    results = []
    for fn in (tl.tiled_linear, F.linear):
        out = fn(x, w, b)
        inputs = (x, w) + ((b,) if bias else ())
        results.append((out.detach(), torch.autograd.grad(out, inputs, grad)))
    (ours, our_grads), (ref, ref_grads) = results
    torch.testing.assert_close(ours, ref, atol=1e-5, rtol=1e-5)
    for a, r in zip(our_grads, ref_grads):
        torch.testing.assert_close(a, r, atol=1e-4, rtol=1e-5)


def test_the_tiles_are_what_runs(monkeypatch):
    calls = []
    real = tl._TiledLinear.apply
    monkeypatch.setattr(tl._TiledLinear, "apply", lambda *a: calls.append(1) or real(*a))
    x, w = torch.randn(4, 8), torch.randn(30, 8)
    tl.tiled_linear(x, w)
    assert calls == [1]
    with torch.autocast("cpu", dtype=torch.bfloat16):                 # autocast: F.linear's bf16 matmul
        assert tl.tiled_linear(x, w).dtype == torch.bfloat16
    tl.tiled_linear(x.double(), w.double())
    assert calls == [1]

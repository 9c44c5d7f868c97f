"""bertforge's CPU dropout: the drop rate, the scaling, the gradient and the seed behave as `F.dropout`'s."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from bertforge.model.dropout import Dropout, dropout, keep_mask


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_drop_rate_matches_p(p):
    torch.manual_seed(0)
    n = 2_000_000
    dropped = 1.0 - keep_mask((n,), p).float().mean().item()
    assert abs(dropped - p) < 5 * (p * (1 - p) / n) ** 0.5 + 1e-5      # 5 sigma, plus the 1/131072 rounding


def test_lanes_are_independent():
    """Four neighbouring elements share one 64-bit draw: each lane must still drop at p, uncorrelated."""
    torch.manual_seed(1)
    keep = keep_mask((500_000, 4), 0.1).float()
    for lane in range(4):
        assert abs(keep[:, lane].mean().item() - 0.9) < 0.003
    centred = keep - keep.mean(0)
    corr = (centred.T @ centred) / (centred.shape[0] * centred.std(0)[:, None] * centred.std(0)[None, :])
    off_diagonal = corr - torch.diag(torch.diag(corr))
    assert off_diagonal.abs().max().item() < 0.01


def test_scaling_and_gradient_use_one_mask():
    torch.manual_seed(2)
    x = (torch.rand(64, 33) + 0.5).requires_grad_()
    y = dropout(x, 0.2)
    kept = y != 0
    assert 0 < kept.sum() < x.numel()
    torch.testing.assert_close(y[kept], x.detach()[kept] / 0.8)
    grad = torch.randn_like(x)
    y.backward(grad)
    torch.testing.assert_close(x.grad, torch.where(kept, grad / 0.8, torch.zeros_like(grad)))


def test_seeded_and_fresh_each_call():
    x = torch.ones(10_000)
    torch.manual_seed(3)
    a, b = dropout(x, 0.1), dropout(x, 0.1)
    torch.manual_seed(3)
    assert torch.equal(dropout(x, 0.1), a)
    assert not torch.equal(a, b)


def test_identity_when_off():
    x = torch.randn(5, 7)
    assert dropout(x, 0.1, training=False) is x
    assert dropout(x, 0.0) is x
    assert torch.equal(dropout(x, 1.0), torch.zeros_like(x))


def test_module_is_a_drop_in_for_nn_dropout():
    module = Dropout(0.25)
    assert isinstance(module, nn.Dropout) and module.p == 0.25 and repr(module) == repr(nn.Dropout(0.25))
    x = torch.randn(100, 100)
    assert torch.equal(module.eval()(x), x)
    out = module.train()(x)
    assert 0.15 < (out == 0).float().mean().item() < 0.35

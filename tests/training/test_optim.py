"""Learning-rate schedules: the step schedule and the wall-clock budget schedule."""
from __future__ import annotations

import pytest
import torch

from bertforge.training.optim import budget_lr_factor, linear_warmup_decay


def test_step_schedule_warms_up_then_decays_to_zero():
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = linear_warmup_decay(opt, warmup_steps=4, total_steps=12)
    factors = []
    for _ in range(12):
        factors.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert factors[:4] == [0.25, 0.5, 0.75, 1.0]
    assert factors[4] == 1.0 and factors[8] == 0.5 and factors[-1] == pytest.approx(0.125)


def test_budget_schedule_peaks_at_full_lr_after_a_long_warmup():
    budget = 100.0
    # warmup by steps: 300 steps that happened to take 40 s
    assert budget_lr_factor(0, 300, 0.1, budget, None) == pytest.approx(1 / 300)
    assert budget_lr_factor(299, 300, 40.0, budget, None) == 1.0
    # after warmup, the decay runs over the 60 s left, so the peak is the full lr, not 0.6 of it
    assert budget_lr_factor(300, 300, 40.0, budget, 40.0) == 1.0
    assert budget_lr_factor(500, 300, 70.0, budget, 40.0) == pytest.approx(0.5)
    assert budget_lr_factor(900, 300, 100.0, budget, 40.0) == 0.0
    assert budget_lr_factor(900, 300, 130.0, budget, 40.0) == 0.0  # never negative past the budget


def test_budget_schedule_without_warmup_decays_over_the_whole_budget():
    assert budget_lr_factor(0, 0, 0.0, 10.0, 0.0) == 1.0
    assert budget_lr_factor(5, 0, 2.5, 10.0, 0.0) == pytest.approx(0.75)


def test_lamb_steps_follow_the_paper_by_hand():
    """Three LAMB steps (You et al. 2019, Algorithm 2) on a layer with a matrix (weight decay) and a bias (none),
    against the update written out in float64: Adam's bias-corrected moments, plus decay, scaled by ||w|| / ||r||."""
    from bertforge.training.optim import build_optimizer
    torch.manual_seed(0)
    layer = torch.nn.Linear(5, 3)
    lr, decay, (b1, b2), eps = 0.01, 0.01, (0.9, 0.999), 1e-6
    optimizer = build_optimizer(layer, lr, weight_decay=decay, kind="lamb")
    hand = {name: (p.detach().double().clone(), torch.zeros_like(p, dtype=torch.float64),
                   torch.zeros_like(p, dtype=torch.float64)) for name, p in layer.named_parameters()}
    g = torch.Generator().manual_seed(1)
    for t in range(1, 4):
        grads = {name: torch.randn(p.shape, generator=g) * t for name, p in layer.named_parameters()}
        for name, p in layer.named_parameters():
            p.grad = grads[name].clone()
        optimizer.step()
        for name, (w, m, v) in hand.items():
            grad = grads[name].double()
            m.mul_(b1).add_((1 - b1) * grad)
            v.mul_(b2).add_((1 - b2) * grad * grad)
            r = (m / (1 - b1 ** t)) / ((v / (1 - b2 ** t)).sqrt() + eps) + (decay if w.ndim == 2 else 0.0) * w
            trust = w.norm() / r.norm() if w.norm() > 0 and r.norm() > 0 else 1.0
            w.sub_(lr * trust * r)
        for name, p in layer.named_parameters():
            torch.testing.assert_close(p.detach().double(), hand[name][0], rtol=1e-5, atol=1e-7,
                                       msg=lambda detail, name=name, t=t: f"step {t}, {name}: {detail}")

"""The lr schedules of `--schedule`, step by step against torch's own schedulers (independent implementations)."""
from __future__ import annotations

import math

import pytest
import torch

from bertforge.training import options
from bertforge.training.optim import budget_lr_factor, build_optimizer, build_scheduler, set_beta1
from bertforge.training.options import TrainOptions
from bertforge.training.schedules import SCHEDULES
from bertforge.settings import SettingError

PEAK = 0.01


def adamw() -> torch.optim.Optimizer:
    return build_optimizer(torch.nn.Linear(3, 2), PEAK)


def ours(name: str, warmup: int, total: int) -> tuple[list[float], list[float]]:
    """The lr and beta1 each of `total` steps uses, driven as the engine drives them."""
    opt = adamw()
    sched = build_scheduler(opt, name, warmup, total)
    lrs, betas = [], []
    for step in range(total):
        lrs.append(opt.param_groups[0]["lr"])
        betas.append(opt.param_groups[0]["betas"][0])
        opt.step()
        sched.step()
        set_beta1(opt, name, step + 1, warmup, total)
    return lrs, betas


def reference(opt: torch.optim.Optimizer, sched, steps: int) -> tuple[list[float], list[float]]:
    lrs, betas = [], []
    for _ in range(steps):
        lrs.append(opt.param_groups[0]["lr"])
        betas.append(opt.param_groups[0]["betas"][0])
        opt.step()
        if len(lrs) < steps:  # OneCycleLR refuses to step past its last step
            sched.step()
    return lrs, betas


@pytest.mark.parametrize("total, warmup", [(20, 0), (37, 0), (20, 5), (64, 9)])
def test_onecycle_is_torchs_one_cycle_policy_lr_and_beta1(total, warmup):
    opt = torch.optim.AdamW(torch.nn.Linear(3, 2).parameters(), lr=PEAK)
    pct_start = warmup / total if warmup else 0.3
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=PEAK, total_steps=total, pct_start=pct_start, anneal_strategy="cos", cycle_momentum=True,
        base_momentum=0.85, max_momentum=0.95, div_factor=25, final_div_factor=1e4, three_phase=False)
    want_lr, want_beta = reference(opt, sched, total)
    got_lr, got_beta = ours("onecycle", warmup, total)
    assert got_lr == pytest.approx(want_lr, rel=1e-9)
    assert got_beta == pytest.approx(want_beta, rel=1e-9)
    assert got_lr[0] == pytest.approx(PEAK / 25) and got_lr[-1] == pytest.approx(PEAK / 25e4)
    assert max(got_lr) == pytest.approx(PEAK, rel=1e-3) and min(got_beta) == pytest.approx(0.85, abs=1e-3)


@pytest.mark.parametrize("total, warmup", [(20, 0), (30, 6)])
def test_cosine_is_linear_warmup_then_torchs_cosine_annealing_to_zero(total, warmup):
    want_lr = []
    if warmup:
        opt = torch.optim.AdamW(torch.nn.Linear(3, 2).parameters(), lr=PEAK)
        head = torch.optim.lr_scheduler.LinearLR(opt, start_factor=1 / warmup, end_factor=1.0,
                                                 total_iters=warmup - 1)
        want_lr += reference(opt, head, warmup)[0]
    opt = torch.optim.AdamW(torch.nn.Linear(3, 2).parameters(), lr=PEAK)
    tail = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total - warmup, eta_min=0.0)
    want_lr += reference(opt, tail, total - warmup)[0]
    got_lr, got_beta = ours("cosine", warmup, total)
    assert got_lr == pytest.approx(want_lr, rel=1e-9, abs=1e-15)
    assert set(got_beta) == {0.9}, "only one-cycle moves beta1"


def test_constant_is_warmup_then_flat():
    got_lr, _ = ours("constant", 4, 12)
    assert got_lr == pytest.approx([PEAK * s / 4 for s in (1, 2, 3, 4)] + [PEAK] * 8, rel=1e-12)


def test_the_default_schedule_of_every_verb_is_the_papers_linear_one():
    defaults = [TrainOptions(), options.pretrain_defaults(), options.distill_defaults(), options.seq2seq_defaults(),
                options.finetune_defaults(), options.task_distill_defaults()]
    assert {d.schedule for d in defaults} == {"linear"}
    got_lr, _ = ours("linear", 3, 9)
    assert got_lr == pytest.approx([PEAK * f for f in (1 / 3, 2 / 3, 1, 1, 5 / 6, 4 / 6, 3 / 6, 2 / 6, 1 / 6)])


@pytest.mark.parametrize("name, shape", [("cosine", lambda x: 0.5 * (1 + math.cos(math.pi * x))),
                                         ("constant", lambda x: 1.0), ("linear", lambda x: 1 - x)])
def test_a_time_budget_follows_the_schedules_shape_over_the_time_left_after_warmup(name, shape):
    decay = SCHEDULES[name].decay
    assert budget_lr_factor(2, 4, 5.0, 100.0, None, decay) == pytest.approx(3 / 4)
    for elapsed in (20.0, 45.0, 70.0, 100.0, 130.0):  # warmup ended at 20 s of a 100 s budget
        x = min(1.0, (elapsed - 20.0) / 80.0)
        assert budget_lr_factor(50, 4, elapsed, 100.0, 20.0, decay) == pytest.approx(shape(x), abs=1e-12)


def test_onecycle_under_a_time_budget_is_refused_naming_both_flags():
    with pytest.raises(SettingError, match=r"^--schedule onecycle .*--time-budget.*--max-steps"):
        TrainOptions(time_budget=60.0, schedule="onecycle").check()
    TrainOptions(time_budget=60.0, schedule="cosine").check()
    TrainOptions(max_steps=10, time_budget=60.0, schedule="constant").check()
    with pytest.raises(SettingError, match=r"--schedule"):
        TrainOptions(max_steps=10, schedule="triangular").check()


def test_the_command_line_refuses_onecycle_with_a_time_budget_in_one_line(tmp_path, capsys):
    from bertforge.cli import main
    assert main(["pretrain", "--data", str(tmp_path), "--output", str(tmp_path / "out"), "--time-budget", "1m",
                 "--schedule", "onecycle"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["bertforge pretrain: error: --schedule onecycle is defined over steps and cannot follow "
                   "--time-budget: give --max-steps instead, or a schedule of linear, cosine, constant"]
    assert not (tmp_path / "out").exists()

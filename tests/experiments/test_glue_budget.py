"""experiments/glue_budget.py: step budgets from the calibration, transformers' lr pick, and the floor row."""
from __future__ import annotations

import json
import sys
from argparse import Namespace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))
import glue_budget  # noqa: E402

CALIBRATION = {"seconds_per_step": {"fast": 1.5, "bert": 1.2, "transformers": 7.0}}


def test_each_budget_is_the_whole_steps_of_the_calibrated_step_time():
    args = Namespace(contenders=["fast", "bert", "transformers"], budgets=["20m", "1h", "3h"], hf_lrs=[5e-4, 1e-3],
                     max_steps_cap=None, sweep_budget="20m")
    jobs, sweep = glue_budget.plan_jobs(CALIBRATION, args)
    assert {job.name: job.steps for job in jobs} == {"fast-20m": 800, "fast-1h": 2400, "fast-3h": 7200,
                                                     "bert-20m": 1000, "bert-1h": 3000, "bert-3h": 9000}
    assert {job.name: job.steps for job in sweep} == {"transformers-20m-lr0.0005": 171, "transformers-20m-lr0.001": 171}
    capped, capped_sweep = glue_budget.plan_jobs(CALIBRATION, Namespace(**{**vars(args), "max_steps_cap": 5}))
    assert {job.steps for job in capped + capped_sweep} == {5}


def test_transformers_lr_is_the_one_with_the_lowest_heldout_loss(tmp_path):
    sweep = [glue_budget.Job("transformers", "20m", 10, lr) for lr in (2.5e-4, 5e-4, 1e-3)]
    for job, loss in zip(sweep, (7.2, 6.9, 7.5)):
        folder = glue_budget.run_folder(tmp_path, job)
        folder.mkdir(parents=True)
        (folder / "pretrain_result.json").write_text(json.dumps({"heldout_mlm_loss": loss}))
    assert glue_budget.best_lr(tmp_path, sweep) == 5e-4


def test_floor_is_the_majority_class_averaged_like_glue():
    result = {"tasks": {"cola": {"majority": {"score": 0.0}}, "sst2": {"majority": {"score": 50.9}},
                        "mrpc": {"majority": {"score": 75.0}}, "wnli": {"majority": {"score": 56.3}}}}
    floor = glue_budget.floor_result(result)
    assert floor["average"] == pytest.approx((0.0 + 50.9 + 75.0) / 3)  # WNLI is never in the average
    assert floor["tasks"]["wnli"]["score"] == 56.3


def test_sweep_runs_at_the_sweep_budget():
    args = Namespace(contenders=["fast", "transformers"], budgets=["20m"], hf_lrs=[5e-4, 1e-3], max_steps_cap=None,
                     sweep_budget="5m")
    jobs, sweep = glue_budget.plan_jobs(CALIBRATION, args)
    assert {job.name: job.steps for job in jobs} == {"fast-20m": 800}
    assert {job.name: job.steps for job in sweep} == {"transformers-5m-lr0.0005": 42, "transformers-5m-lr0.001": 42}


def test_a_waiting_work_lets_the_next_take_the_core_and_a_failed_input_stops_its_followers():
    order = []

    def work(name, fail=False, after=None):
        def run(core):
            order.append(name)
            if fail:
                raise RuntimeError(f"{name} broke")
        ready = (lambda: True) if after is None else (
            lambda: (None if after.name in failed_names else True) if after.done.is_set() else False)
        return glue_budget.Work(name, run, ready)

    failed_names = set()
    a = work("a", fail=True)
    needs_a = work("needs-a", after=a)
    b = work("b")
    needs_b = work("needs-b", after=b)
    c = work("c")
    original_run = a.run
    a.run = lambda core: (failed_names.add("a"), original_run(core))
    failures = glue_budget.schedule([needs_b, b, needs_a, a, c], cores=[0])
    assert order == ["b", "needs-b", "a", "c"]  # one core: b first (needs-b waits), then needs-b once b is done
    assert set(failures) == {"a", "needs-a"} and "broke" in failures["a"]

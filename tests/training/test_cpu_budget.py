"""--cpu-budget: the run stops, and the lr decays, on the training loop's CPU time, over every resume."""
from __future__ import annotations

import json
import time

import pytest

from training.test_engine import ToyStage, run, train_records
from bertforge.settings import SettingError
from bertforge.training.cpu_budget import calibrate_cpu_per_step, steps_for_cpu_budget
from bertforge.training.engine import FaultHooks, Session, TrainOptions

STEP_CPU = 0.125  # seconds a micro-batch costs on the scripted CPU clock (exact in binary)


class CostedStage(ToyStage):
    """Each micro-batch costs STEP_CPU on a scripted CPU clock, so stopping points are exact."""

    clock = [0.0]

    def loss(self, net, batch):
        self.clock[0] += STEP_CPU
        return super().loss(net, batch)


@pytest.fixture
def scripted_cpu(monkeypatch):
    CostedStage.clock[0] = 0.0
    monkeypatch.setattr(time, "process_time", lambda: CostedStage.clock[0])


def summary(folder):
    return json.loads((folder / "training_summary.json").read_text())


def test_a_cpu_budget_stops_the_run_when_its_cpu_time_is_spent_and_the_lr_decays_with_it(tmp_path, scripted_cpu):
    result = run(CostedStage(), tmp_path / "run", max_steps=None, cpu_budget=1.0, warmup_steps=2)
    assert (result.stopped_by, result.step, result.cpu_seconds) == ("cpu-budget", 8, 1.0)
    assert summary(tmp_path / "run")["cpu_seconds"] == 1.0
    lrs = [r["lr"] for r in train_records(tmp_path / "run")]
    # warmup by steps (2; it ends at the CPU time spent before step 2), then linear decay over the CPU time
    # left: step k (0-based) starts at k * STEP_CPU, so the last step's lr is one step's share from 0
    assert lrs[:2] == pytest.approx([0.025, 0.05])
    left = 1.0 - STEP_CPU
    assert lrs[2] == pytest.approx(0.05 * (1.0 - STEP_CPU / left))
    assert lrs[-1] == pytest.approx(0.05 * (1.0 - 6 * STEP_CPU / left)) == pytest.approx(0.05 * STEP_CPU / left)


def test_a_resumed_run_counts_the_cpu_time_spent_before_it(tmp_path, scripted_cpu):
    def kill(step):
        if step == 6:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(CostedStage(), tmp_path / "run", FaultHooks(inside_save=kill), max_steps=None, cpu_budget=1.0,
            save_every=3)
    result = run(CostedStage(), tmp_path / "run", max_steps=None, cpu_budget=1.0, save_every=3)
    assert result.resumed_from is not None and result.resumed_from.name.endswith("3")
    assert (result.stopped_by, result.step, result.cpu_seconds) == ("cpu-budget", 8, 1.0)


def test_the_cpu_budget_is_cpu_time_not_wall_time(tmp_path):
    class Sleepy(ToyStage):
        def next_batch(self):
            time.sleep(0.01)  # wall time without CPU time
            return super().next_batch()

    result = run(Sleepy(), tmp_path / "run", max_steps=10 ** 6, cpu_budget=0.2, log_every=1000)
    assert result.stopped_by == "cpu-budget"
    assert result.cpu_seconds >= 0.2
    assert result.elapsed > result.cpu_seconds  # a wall clock would have stopped it sooner


def test_a_bad_cpu_budget_is_refused_naming_the_flag():
    for bad, message in ((-1.0, "^--cpu-budget must be positive"), (0.0, "^--cpu-budget must be positive")):
        with pytest.raises(SettingError, match=message):
            TrainOptions(cpu_budget=bad).check()
    with pytest.raises(SettingError, match="--time-budget or --cpu-budget, not both"):
        TrainOptions(cpu_budget=60.0, time_budget=60.0).check()
    with pytest.raises(SettingError, match="--schedule onecycle .*--cpu-budget"):
        TrainOptions(cpu_budget=60.0, schedule="onecycle").check()


def test_the_command_line_refuses_a_bad_cpu_budget_in_one_line(tmp_path, capsys):
    from bertforge.cli import main
    with pytest.raises(SystemExit) as exit_:
        main(["pretrain", "--data", str(tmp_path), "--output", str(tmp_path / "out"), "--cpu-budget", "soon"])
    assert exit_.value.code != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--cpu-budget: expected a duration" in err[0]


def test_calibration_measures_a_steps_cpu_cost_and_a_budget_becomes_steps(scripted_cpu):
    opts = TrainOptions(lr=0.05, progress=False, device="cpu", grad_accum=2)
    with Session("cpu") as session:
        per_step = calibrate_cpu_per_step(CostedStage, opts, session, steps=3)
    assert per_step == 2 * STEP_CPU  # two micro-batches a step
    assert steps_for_cpu_budget(3600.0, per_step) == 14400
    assert steps_for_cpu_budget(0.1, per_step) == 1
    with pytest.raises(SettingError, match="^--cpu-budget"):
        steps_for_cpu_budget(-5.0, per_step)

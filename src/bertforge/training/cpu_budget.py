"""A CPU-time budget turned into steps: published step counts rest on a step's CPU cost, which (unlike its wall
time) a loaded machine does not inflate. `calibrate_cpu_per_step` measures a stage's cost with the engine itself;
`steps_for_cpu_budget` turns a budget into the steps a `--max-steps` run makes on it."""
from __future__ import annotations

import dataclasses
import math
import tempfile
from typing import Callable

from bertforge.settings import SettingError
from bertforge.training.engine import Session, Stage, fit
from bertforge.training.options import TrainOptions


def calibrate_cpu_per_step(build_stage: Callable[[], Stage], options: TrainOptions, session: Session, *,
                           steps: int = 5, warmup: int = 1) -> float:
    """CPU seconds (all threads, all ranks) one optimizer step of a fresh `build_stage()` costs under `options`,
    measured by `fit` over `warmup + steps` steps in a scratch folder: the first `warmup` steps (allocations,
    first-call costs) are left out by running `warmup` steps first and subtracting their CPU time."""
    if steps < 1 or warmup < 0:
        raise SettingError(f"a calibration needs at least 1 step and no negative warmup, got {steps} and {warmup}")

    def cpu_of(n: int) -> float:
        if n == 0:
            return 0.0
        opts = dataclasses.replace(options, max_steps=n, time_budget=None, cpu_budget=None, save_every=0,
                                   eval_every=0, patience=None, progress=False, tensorboard=False)
        with tempfile.TemporaryDirectory(prefix="cpu-calibration-") as tmp:
            return fit(build_stage(), opts, session, tmp, say=lambda msg: None).cpu_seconds

    return max(cpu_of(warmup + steps) - cpu_of(warmup), 0.0) / steps


def steps_for_cpu_budget(cpu_budget: float, cpu_per_step: float) -> int:
    """The whole steps a CPU budget pays for at `cpu_per_step` (at least one)."""
    if not (cpu_budget > 0 and math.isfinite(cpu_budget)):
        raise SettingError("{cpu_budget} must be a positive number of seconds, got {got}", owner=TrainOptions,
                           got=cpu_budget)
    if not (cpu_per_step > 0 and math.isfinite(cpu_per_step)):
        raise ValueError(f"a step's CPU cost must be a positive number of seconds, got {cpu_per_step}")
    return max(1, int(cpu_budget // cpu_per_step))

"""The learning-rate schedules every training verb offers (`--schedule`), in one table: `SCHEDULES`.

A schedule gives the lr factor (x the peak `--lr`) of the 0-based step `step` of a run of `total` steps with
`warmup` warm-up steps. Three warm up linearly over `warmup` steps and then follow a decay shape over the rest:

- `linear` (the BERT paper's, the default): straight down to 0;
- `cosine`: half a cosine down to 0 (`torch.optim.lr_scheduler.CosineAnnealingLR` after the warm-up);
- `constant`: flat at the peak.

Under `--time-budget` these warm up by steps and then follow their shape over the time left (`optim.set_budget_lr`).

`onecycle` is Smith's one-cycle policy as fastai and ktrain use it (`torch.optim.lr_scheduler.OneCycleLR` with a
cosine anneal): the lr rises along a cosine from peak/25 to the peak, then falls along a cosine to peak/(25 x 1e4);
AdamW's beta1 moves the other way, 0.95 -> 0.85 -> 0.95, so the update's momentum is lowest where the lr is highest.
It rises over `warmup` steps when the run has a warm-up (fine-tuning's `--warmup`, 10% by default), else over
the first 30% of the run (OneCycleLR's pct_start 0.3). It is defined over steps, so it needs `--max-steps`: a run
under `--time-budget` does not know its number of steps in advance.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

StepFactor = Callable[[int, int, int], float]  # (step, warmup, total) -> a factor, or beta1

ONECYCLE_PCT_START = 0.3        # the rise's share of the run when the run has no warm-up
ONECYCLE_DIV = 25.0             # the lr starts at peak / 25 ...
ONECYCLE_FINAL_DIV = 1e4        # ... and ends at peak / (25 x 1e4)
ONECYCLE_BETA1 = (0.95, 0.85)   # beta1 at the start and end of the cycle, and at the lr's peak


@dataclass(frozen=True)
class Schedule:
    """One entry of `SCHEDULES`: the lr factor of each step, and optionally beta1 of each step (one-cycle) and the
    decay shape on [0, 1] that a time-budgeted run follows over the time left after its warm-up."""

    factor: StepFactor
    beta1: StepFactor | None = None
    decay: Callable[[float], float] | None = None


def _linear(x: float) -> float:
    return 1.0 - x


def _cosine(x: float) -> float:
    return 0.5 * (1.0 + math.cos(math.pi * x))


def _constant(x: float) -> float:
    return 1.0


def warmup_then(decay: Callable[[float], float]) -> Schedule:
    """Linear warm-up over `warmup` steps (step s has (s + 1) / warmup), then `decay` of the fraction of the
    remaining steps done, never below 0."""
    def factor(step: int, warmup: int, total: int) -> float:
        if warmup > 0 and step < warmup:
            return (step + 1) / warmup
        remaining = max(total - warmup, 1)
        return max(0.0, decay(min(1.0, (step - warmup) / remaining)))
    return Schedule(factor, decay=decay)


def _anneal(start: float, end: float, pct: float) -> float:
    """From `start` at pct 0 to `end` at pct 1 along half a cosine."""
    return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1.0)


def _onecycle_phase(step: int, warmup: int, total: int) -> tuple[int, float]:
    """(0, pct) while the lr rises, (1, pct) while it falls; the rise ends at step `peak` (fractional, as in
    OneCycleLR: pct_start x total - 1) and the fall at step total - 1."""
    peak = (warmup if warmup > 0 else ONECYCLE_PCT_START * total) - 1.0
    if step <= peak:
        return 0, step / peak if peak > 0 else 1.0
    span = (total - 1.0) - peak
    return 1, (step - peak) / span if span > 0 else 1.0


def onecycle_factor(step: int, warmup: int, total: int) -> float:
    phase, pct = _onecycle_phase(step, warmup, total)
    low, final = 1.0 / ONECYCLE_DIV, 1.0 / (ONECYCLE_DIV * ONECYCLE_FINAL_DIV)
    return _anneal(low, 1.0, pct) if phase == 0 else _anneal(1.0, final, pct)


def onecycle_beta1(step: int, warmup: int, total: int) -> float:
    phase, pct = _onecycle_phase(step, warmup, total)
    high, low = ONECYCLE_BETA1
    return _anneal(high, low, pct) if phase == 0 else _anneal(low, high, pct)


SCHEDULES: dict[str, Schedule] = {
    "linear": warmup_then(_linear),
    "onecycle": Schedule(onecycle_factor, beta1=onecycle_beta1),
    "cosine": warmup_then(_cosine),
    "constant": warmup_then(_constant),
}
SCHEDULE_NAMES = tuple(SCHEDULES)
BY_TIME = tuple(name for name, s in SCHEDULES.items() if s.decay is not None)  # the ones --time-budget can follow

"""Is one GLUE result better than another, or is the difference the seeds' noise?

Two suites scored by the median over seeds differ by chance alone: on GLUE's small dev sets one fine-tuning seed
moves CoLA or RTE by points. `difference` gives the difference of each task's score and of the average with a
bootstrap interval over the seeds: each side's runs of each task are resampled with replacement (the two sides
independently, since their seeds have nothing to do with each other), and the statistic is recomputed as the
suite computes it — the median run per task, the mean over tasks.

Only results selected by `median` over seeds have such an interval; a `best`-of selection (the BERT paper's pick
over an lr grid) is a maximum, which a bootstrap over a handful of runs does not estimate.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from bertforge.evaluation.glue_result import GlueResult
from bertforge.evaluation.scores import GLUE_TASKS

#: Resamples of the bootstrap: the interval's ends then move by about 0.05 points between random states.
RESAMPLES = 10_000


@dataclass(frozen=True)
class Difference:
    """`other` minus `base` in points, with its bootstrap interval (None when it has none, `why` says why)."""

    value: float
    low: float | None = None
    high: float | None = None
    why: str = ""

    def __str__(self) -> str:
        interval = f" ({self.low:+.1f}..{self.high:+.1f})" if self.low is not None else ""
        return f"{self.value:+.1f}{interval}"


def _selected_runs(result: GlueResult, task: str) -> list[float] | None:
    """The scores of the runs behind a median-selected task score (the selected lr's seeds), None if a run has none."""
    entry = result.tasks[task]
    lr = (entry.selected or {}).get("lr")
    runs = [r for r in entry.runs if lr is None or float(r["lr"]) == float(lr)]
    scores = [r.get("score") for r in runs]
    if any(not isinstance(s, (int, float)) or not math.isfinite(s) for s in scores):
        return None
    return [float(s) for s in scores]


def _why_no_interval(result: GlueResult, runs: dict[str, list[float] | None]) -> str:
    select = result.protocol.get("select")
    if select != "median":
        return f"selected by {select!r}, not the median over seeds"
    few = [t for t, r in runs.items() if r is None or len(r) < 2]
    return f"fewer than 2 scored runs of {', '.join(few)}" if few else ""


def difference(base: GlueResult | dict[str, Any], other: GlueResult | dict[str, Any], confidence: float = 0.95,
               resamples: int = RESAMPLES, seed: int = 0) -> dict[str, Difference]:
    """`other` − `base` for each task both scored by fine-tuning and for the average over the tasks both average
    (key "average"), each with a `confidence` bootstrap interval when both sides are medians over ≥ 2 seeds."""
    from scipy.stats import bootstrap

    base, other = GlueResult.coerce(base), GlueResult.coerce(other)
    tasks = [t for t in GLUE_TASKS if t in base.tasks and t in other.tasks
             and base.tasks[t].method == "finetune" == other.tasks[t].method
             and base.tasks[t].score is not None and other.tasks[t].score is not None]
    averaged = [t for t in tasks if t in base.average_over and t in other.average_over]
    runs = {side: {t: _selected_runs(r, t) for t in tasks} for side, r in (("base", base), ("other", other))}
    why = _why_no_interval(base, runs["base"]) or _why_no_interval(other, runs["other"])
    rng = np.random.default_rng(seed)

    def interval(names: list[str]) -> tuple[float | None, float | None]:
        if why or not names:
            return None, None
        k = len(names)

        def statistic(*samples: np.ndarray, axis: int = -1) -> np.ndarray:
            medians = [np.median(s, axis=axis) for s in samples]
            return sum(medians[k:]) / k - sum(medians[:k]) / k

        data = tuple(runs["base"][t] for t in names) + tuple(runs["other"][t] for t in names)
        ci = bootstrap(data, statistic, n_resamples=resamples, confidence_level=confidence, method="percentile",
                       vectorized=True, paired=False, random_state=rng).confidence_interval
        return float(ci.low), float(ci.high)

    out = {}
    for t in tasks:
        low, high = interval([t])
        out[t] = Difference(other.tasks[t].score - base.tasks[t].score, low, high, why)
    if averaged:
        value = (sum(other.tasks[t].score for t in averaged) - sum(base.tasks[t].score for t in averaged)) / len(averaged)
        low, high = interval(averaged)
        out["average"] = Difference(value, low, high, why)
    return out

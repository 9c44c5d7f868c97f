"""The difference of two GLUE results and its bootstrap interval over seeds, against a bootstrap written here
with numpy alone, and on suites whose difference is known by construction."""
from __future__ import annotations

import numpy as np
import pytest

from bertforge.evaluation.difference import difference
from bertforge.evaluation.glue import assemble, task_entry
from bertforge.evaluation.protocols import get_protocol

RTE = [55.96, 54.15, 53.79, 54.87, 55.60]
COLA = [19.21, 12.42, 11.46, 13.33, 16.28]


def suite(name: str, scores: dict[str, list[float]], select: str = "median", lr: float = 1e-4) -> dict:
    metric = {"rte": "accuracy", "cola": "mcc"}
    tasks = {t: task_entry(t, [{"seed": 42 + i, "lr": lr, "metrics": {metric[t]: s}, "score": s, "seconds": 1.0}
                               for i, s in enumerate(runs)], select, majority={"score": 50.0, "metrics": {}},
                           train_examples=100, dev_examples={"dev": 10})
             for t, runs in scores.items()}
    result = assemble(name, {"path": name, "model_type": "bert", "fingerprint": "sha256:" + "0" * 64},
                      get_protocol("cpu"), tasks, {}, command="bertforge glue")
    result["protocol"]["select"] = select
    return result


def numpy_bootstrap(base: list[list[float]], other: list[list[float]], resamples: int, seed: int) -> np.ndarray:
    """The percentile bootstrap of mean(task medians of other) − mean(task medians of base), written plainly."""
    rng = np.random.default_rng(seed)
    stats = np.empty(resamples)
    for i in range(resamples):
        pick = [np.median(rng.choice(runs, size=len(runs))) for runs in base + other]
        stats[i] = np.mean(pick[len(base):]) - np.mean(pick[:len(base)])
    return np.percentile(stats, [2.5, 97.5])


def test_the_interval_is_the_bootstrap_of_the_suites_statistic():
    trainer = [14.54, 12.13, 8.22, 15.46, 15.54], [54.15, 55.23, 58.12, 56.0, 53.1]
    base, other = suite("bf", {"cola": COLA, "rte": RTE}), suite("hf", {"cola": trainer[0], "rte": trainer[1]})
    d = difference(base, other, resamples=20_000)
    assert d["average"].value == pytest.approx((np.median(trainer[0]) + np.median(trainer[1])
                                                 - np.median(COLA) - np.median(RTE)) / 2)
    assert d["rte"].value == pytest.approx(np.median(trainer[1]) - np.median(RTE))
    low, high = numpy_bootstrap([COLA, RTE], list(trainer), resamples=20_000, seed=1)
    # two independent Monte-Carlo estimates of the same percentiles: they agree to their sampling error
    assert d["average"].low == pytest.approx(low, abs=0.15) and d["average"].high == pytest.approx(high, abs=0.15)
    low, high = numpy_bootstrap([RTE], [trainer[1]], resamples=20_000, seed=2)
    assert d["rte"].low == pytest.approx(low, abs=0.15) and d["rte"].high == pytest.approx(high, abs=0.15)


def test_a_suite_shifted_by_eight_points_differs_by_eight_with_an_interval_away_from_zero():
    # (three points would not do: CoLA's five runs spread over eight, and the interval then holds 0)
    shifted = {"cola": [s + 8 for s in COLA], "rte": [s + 8 for s in RTE]}
    d = difference(suite("a", {"cola": COLA, "rte": RTE}), suite("b", shifted))
    assert d["average"].value == pytest.approx(8.0) and d["cola"].value == pytest.approx(8.0)
    assert 0 < d["average"].low < 8.0 < d["average"].high
    same = difference(suite("a", {"cola": COLA, "rte": RTE}), suite("a2", {"cola": COLA, "rte": RTE}))
    assert same["average"].value == 0 and same["average"].low < 0 < same["average"].high


def test_no_interval_for_a_best_of_selection_or_a_single_seed():
    best = suite("best", {"rte": RTE}, select="best")
    d = difference(suite("a", {"rte": RTE}), best)
    assert d["rte"].value == pytest.approx(max(RTE) - np.median(RTE)) and d["rte"].low is None
    assert d["rte"].why == "selected by 'best', not the median over seeds" and str(d["rte"]) == "+1.1"
    one = difference(suite("a", {"rte": RTE}), suite("one", {"rte": [60.0]}))
    assert one["rte"].low is None and one["rte"].why == "fewer than 2 scored runs of rte"


def test_only_the_selected_lrs_runs_are_resampled():
    base = suite("a", {"rte": RTE})
    other = suite("b", {"rte": [s + 1 for s in RTE]})
    other["tasks"]["rte"]["runs"] += [{"seed": 42, "lr": 5e-5, "score": 0.0, "metrics": {"accuracy": 0.0}}]
    d = difference(base, other)
    assert d["rte"].value == pytest.approx(1.0) and d["rte"].low > -1.0  # the 0-point run of the other lr is not drawn

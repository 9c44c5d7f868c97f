"""GLUE's numbers: the official metrics against scikit-learn and scipy, the task scores and the benchmark average
against hand arithmetic, the majority-class floor against the label counts of the real files, and how the runs
of a task become its result."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sklearn import metrics as sk

from bertforge.evaluation.scores import (AVERAGED, glue_average, majority_baseline, official_metrics,
                                         summarize_runs, task_score)


@pytest.fixture()
def rng():
    return np.random.default_rng(0)


def test_official_metrics_equal_sklearn_and_scipy_in_points(rng):
    y, p = rng.integers(0, 2, 300), rng.integers(0, 2, 300)
    assert official_metrics("cola", p, y) == pytest.approx({"mcc": 100 * sk.matthews_corrcoef(y, p)})
    assert official_metrics("sst2", p, y) == pytest.approx({"accuracy": 100 * sk.accuracy_score(y, p)})
    for task in ("mrpc", "qqp"):  # F1 of class 1 (paraphrase / duplicate), then accuracy
        assert official_metrics(task, p, y) == pytest.approx(
            {"f1": 100 * sk.f1_score(y, p, pos_label=1), "accuracy": 100 * sk.accuracy_score(y, p)})
    gold, scores = rng.uniform(0, 5, 200), rng.normal(size=200)
    assert official_metrics("stsb", scores, gold) == pytest.approx(
        {"pearson": 100 * stats.pearsonr(scores, gold)[0], "spearman": 100 * stats.spearmanr(scores, gold)[0]})
    # MNLI: each split on its own, never pooled
    ym, pm = rng.integers(0, 3, 100), rng.integers(0, 3, 100)
    ymm, pmm = np.r_[np.zeros(50, int), np.ones(30, int)], np.r_[np.zeros(50, int), np.zeros(30, int)]
    assert official_metrics("mnli", pm, ym, mismatched=(pmm, ymm)) == pytest.approx(
        {"accuracy_matched": 100 * sk.accuracy_score(ym, pm), "accuracy_mismatched": 100 * 50 / 80})
    with pytest.raises(ValueError, match="mismatched"):
        official_metrics("mnli", pm, ym)


def test_task_scores_and_the_glue_average_by_hand():
    metrics = {"cola": {"mcc": 50.0}, "sst2": {"accuracy": 90.0}, "mrpc": {"f1": 88.0, "accuracy": 84.0},
               "stsb": {"pearson": 86.0, "spearman": 84.0}, "qqp": {"f1": 70.0, "accuracy": 88.0},
               "mnli": {"accuracy_matched": 80.0, "accuracy_mismatched": 81.0}, "qnli": {"accuracy": 87.0},
               "rte": {"accuracy": 66.0}, "wnli": {"accuracy": 56.3}}
    scores = {task: task_score(task, m) for task, m in metrics.items()}
    assert scores["mrpc"] == 86.0 and scores["stsb"] == 85.0 and scores["qqp"] == 79.0 and scores["mnli"] == 80.5
    average, over = glue_average(scores)
    # (50 + 90 + 86 + 85 + 79 + 80.5 + 87 + 66) / 8: two-metric tasks averaged first, WNLI left out
    assert average == pytest.approx(77.9375) and over == list(AVERAGED) and "wnli" not in over
    # only the tasks present count, and the list says which
    average, over = glue_average({"sst2": 90.0, "rte": 66.0, "wnli": 56.3})
    assert average == pytest.approx(78.0) and over == ["sst2", "rte"]
    assert glue_average({"wnli": 56.3}) == (None, [])
    # an undefined correlation (constant predictions) counts as no correlation
    assert task_score("stsb", {"pearson": None, "spearman": 40.0}) == 20.0


def test_undefined_correlation_is_null_not_nan():
    assert official_metrics("stsb", [1.0] * 5, [0.0, 1.0, 2.0, 3.0, 4.0]) == {"pearson": None, "spearman": None}


def test_majority_baseline_on_the_real_files(shared_data):
    """Counts from ../shared/data/README.md: WNLI train 0: 323, 1: 312, dev 0: 40 of 71; MRPC train 1: 2,474 of
    3,668, dev 1: 279 of 408; RTE train entailment 1,249 / 1,241, dev entailment 146 of 277."""
    from bertforge.tasks.registry import get_task
    glue = shared_data / "glue"

    def floor(task):
        spec = get_task(task)
        train, dev = spec.read(glue, "train")[0], spec.read(glue, "dev")[0]
        return majority_baseline(task, [e.label for e in train.examples], [e.label for e in dev.examples])

    assert floor("wnli") == pytest.approx({"accuracy": 100 * 40 / 71})
    precision = 279 / 408  # always "paraphrase": recall 1
    assert floor("mrpc") == pytest.approx({"f1": 100 * 2 * precision / (precision + 1), "accuracy": 100 * 279 / 408})
    assert floor("rte") == pytest.approx({"accuracy": 100 * 146 / 277})


def test_majority_ties_and_regression():
    assert majority_baseline("sst2", ["1", "0"], ["0", "0", "1"]) == pytest.approx({"accuracy": 100 * 2 / 3})
    assert majority_baseline("cola", ["1", "1", "0"], ["1", "0"]) == {"mcc": 0.0}
    assert majority_baseline("stsb", [1.0, 2.0], [3.0, 4.0]) == {"pearson": None, "spearman": None}


def run(seed, lr, f1, acc):
    return {"seed": seed, "lr": lr, "metrics": {"f1": f1, "accuracy": acc}, "score": (f1 + acc) / 2}


def test_median_over_seeds_keeps_one_runs_metrics():
    runs = [run(1, 2e-5, 80.0, 70.0), run(2, 2e-5, 90.0, 86.0), run(3, 2e-5, 84.0, 80.0)]
    result = summarize_runs("mrpc", runs, "median")
    assert result["score"] == 82.0 and result["metrics"] == {"f1": 84.0, "accuracy": 80.0}
    assert result["selected"] == {"lr": 2e-5, "seeds": [1, 2, 3]}
    assert result["spread"] == pytest.approx({"n": 3, "min": 75.0, "max": 88.0, "stdev": np.std([75, 88, 82], ddof=1)})
    # an even count: the mean of the two middle runs, metrics and score alike (the score stays their mean)
    even = summarize_runs("mrpc", runs + [run(4, 2e-5, 60.0, 60.0)], "median")
    assert even["score"] == pytest.approx((75.0 + 82.0) / 2)
    assert even["metrics"] == pytest.approx({"f1": 82.0, "accuracy": 75.0})


def test_median_picks_the_lr_with_the_best_median_and_best_picks_the_best_run():
    runs = [run(1, 5e-5, 99.0, 99.0), run(2, 5e-5, 50.0, 50.0), run(3, 5e-5, 52.0, 52.0),
            run(1, 2e-5, 80.0, 80.0), run(2, 2e-5, 81.0, 81.0), run(3, 2e-5, 79.0, 79.0)]
    median = summarize_runs("mrpc", runs, "median")
    assert median["selected"]["lr"] == 2e-5 and median["score"] == 80.0
    best = summarize_runs("mrpc", runs, "best")
    assert best["selected"] == {"lr": 5e-5, "seeds": [1]} and best["score"] == 99.0
    assert best["spread"]["n"] == 3 and best["spread"]["min"] == 50.0

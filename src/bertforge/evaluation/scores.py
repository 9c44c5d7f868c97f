"""GLUE's numbers: each task's official metrics, its task score, the benchmark average, the majority-class
floor, and how the fine-tuning runs of one task become its result.

Everything is in points (percent), as GLUE reports it. A task's score is the mean of its official metrics,
which is how the GLUE benchmark scores a task with two (MRPC and QQP: F1 and accuracy; STS-B: Pearson and
Spearman; MNLI: matched and mismatched accuracy); the GLUE average is the mean of the task scores. A
correlation is undefined for constant predictions (scipy gives NaN); such a metric is stored as null and
counts as 0 ("no correlation") in the score, so one degenerate run cannot turn the average into NaN.
"""
from __future__ import annotations

import math
import statistics
from collections import Counter
from typing import Any, Sequence

from bertforge.tasks.glue_tasks import GLUE

#: GLUE's tasks in the benchmark's order, how the benchmark writes their names, and their official metrics in
#: the leaderboard's order: all from the task rows (tasks/glue_tasks.py).
GLUE_TASKS = tuple(GLUE)
DISPLAY = {name: row.display for name, row in GLUE.items()}
METRICS: dict[str, tuple[str, ...]] = {name: row.metrics for name, row in GLUE.items()}
#: The tasks the average is taken over when present: all but WNLI (BERT, Cramming; see protocols.py).
AVERAGED = tuple(name for name, row in GLUE.items() if row.averaged)


def check_task(task: str) -> str:
    if task not in METRICS:
        raise ValueError(f"unknown GLUE task {task!r}; the tasks are {', '.join(GLUE_TASKS)}")
    return task


def official_metrics(task: str, predictions: Sequence, labels: Sequence,
                     mismatched: tuple[Sequence, Sequence] | None = None) -> dict[str, float | None]:
    """The task's official metrics in points from predictions and gold labels (label ids, or scores for
    STS-B); MNLI takes the mismatched split's (predictions, labels) as `mismatched`."""
    from bertforge.tasks.metrics import glue_metrics
    check_task(task)
    if task == "mnli":
        if mismatched is None:
            raise ValueError("MNLI is scored on dev_matched and dev_mismatched: pass the mismatched split too")
        values = {"accuracy_matched": glue_metrics("mnli", predictions, labels)["accuracy"],
                  "accuracy_mismatched": glue_metrics("mnli", *mismatched)["accuracy"]}
    else:
        values = glue_metrics(task, predictions, labels)
    return {name: _points(values[name]) for name in METRICS[task]}


def metrics_from_report(task: str, report: dict[str, Any]) -> dict[str, float | None]:
    """The official metrics in points from a `bertforge.tasks.finetune.finetune` report (its first eval set;
    MNLI's mismatched split is its second, `eval_dev_mismatched`)."""
    check_task(task)
    first = report["eval"]
    if task == "mnli":
        return {"accuracy_matched": _points(first["accuracy"]),
                "accuracy_mismatched": _points(report["eval_dev_mismatched"]["accuracy"])}
    return {name: _points(first[name]) for name in METRICS[task]}


def _points(fraction: float | None) -> float | None:
    if fraction is None or not math.isfinite(float(fraction)):
        return None
    return float(fraction) * 100.0


def task_score(task: str, metrics: dict[str, float | None]) -> float:
    """GLUE's score of one task: the mean of its official metrics (an undefined correlation counts as 0)."""
    values = [metrics.get(name) for name in METRICS[check_task(task)]]
    return sum(0.0 if v is None else float(v) for v in values) / len(values)


def glue_average(scores: dict[str, float]) -> tuple[float | None, list[str]]:
    """(The GLUE average, the tasks it is over): the mean task score over the tasks present, WNLI excluded."""
    over = [task for task in AVERAGED if task in scores]
    if not over:
        return None, []
    return sum(float(scores[t]) for t in over) / len(over), over


def seed_averages(runs: dict[str, Sequence[dict]]) -> list[float]:
    """The GLUE average of each fine-tuning seed: the i-th run (its "score") of every task in `runs`, for as many
    seeds as every task has; the spread of a suite's median average."""
    count = min((len(r) for r in runs.values()), default=0)
    return [glue_average({t: r[i]["score"] for t, r in runs.items()})[0] for i in range(count)]


def majority_baseline(task: str, train_labels: Sequence, dev_labels: Sequence) -> dict[str, float | None]:
    """The metrics of always answering the train set's most frequent label (ties: the smallest label), scored
    on dev; for MNLI `dev_labels` is (matched, mismatched). STS-B has no classes: a constant score has no
    correlation, so its floor is 0 by the rule above (stored as null)."""
    check_task(task)
    if GLUE[task].labels is None:
        return {name: None for name in METRICS[task]}
    counts = Counter(str(label) for label in train_labels)
    if not counts:
        raise ValueError(f"{task}: no train labels to take the majority class of")
    top = max(counts.values())
    majority = min(label for label, n in counts.items() if n == top)
    if task == "mnli":
        matched, mismatched = dev_labels
        return official_metrics(task, [majority] * len(matched), [str(x) for x in matched],
                                mismatched=([majority] * len(mismatched), [str(x) for x in mismatched]))
    return official_metrics(task, [majority] * len(dev_labels), [str(x) for x in dev_labels])


# ---- runs -> one result per task ------------------------------------------------------------------------------
def _order(run: dict[str, Any]) -> float:
    score = run["score"]
    return -math.inf if score is None or not math.isfinite(score) else float(score)


def _median_run(task: str, runs: list[dict[str, Any]]) -> tuple[float, dict[str, float | None]]:
    """(score, metrics) of the median run: the middle run by score, or the mean of the two middle runs (then the
    score is still the mean of the metrics, which a per-metric median would not keep)."""
    ranked = sorted(runs, key=_order)
    middle = ranked[(len(ranked) - 1) // 2: len(ranked) // 2 + 1]
    metrics: dict[str, float | None] = {}
    for name in METRICS[task]:
        values = [r["metrics"].get(name) for r in middle]
        metrics[name] = None if any(v is None for v in values) else sum(values) / len(values)
    return sum(_order(r) for r in middle) / len(middle), metrics


def summarize_runs(task: str, runs: Sequence[dict[str, Any]], select: str) -> dict[str, Any]:
    """One task's result from its runs (each {"seed", "lr", "score", "metrics", ...}).

    `best`: the run with the best score (the BERT paper's pick over its lr grid and restarts). `median`: per
    learning rate the median run over seeds, and the lr whose median is best. `spread` is over the seeds of the
    selected lr.
    """
    if not runs:
        raise ValueError(f"{task}: no finished runs to summarize")
    by_lr: dict[float, list[dict[str, Any]]] = {}
    for run in runs:
        by_lr.setdefault(float(run["lr"]), []).append(run)
    if select == "best":
        best = max(runs, key=_order)  # max keeps the first of equal scores: the order runs were planned in
        lr, score, metrics = float(best["lr"]), _order(best), dict(best["metrics"])
        seeds = [int(best["seed"])]
    elif select == "median":
        medians = {lr: _median_run(task, group) for lr, group in by_lr.items()}
        lr = max(medians, key=lambda k: medians[k][0])
        score, metrics = medians[lr]
        seeds = sorted(int(r["seed"]) for r in by_lr[lr])
    else:
        raise ValueError(f"select must be 'best' or 'median', got {select!r}")
    scores = [_order(r) for r in by_lr[lr]]
    spread = {"n": len(scores), "min": min(scores), "max": max(scores),
              "stdev": statistics.stdev(scores) if len(scores) > 1 else 0.0}
    return {"score": score if math.isfinite(score) else None, "metrics": metrics,
            "selected": {"lr": lr, "seeds": seeds}, "spread": spread}

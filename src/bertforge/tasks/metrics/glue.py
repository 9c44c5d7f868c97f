"""What GLUE reports for each task, as one dict per call."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from bertforge.tasks.glue_tasks import GLUE
from bertforge.tasks.metrics.classification import accuracy, f1_binary, matthews_corrcoef, pearson, spearman


def _key(task: str) -> str:
    key = task.lower().replace("-", "").replace("_", "")
    return {"mnlim": "mnlimatched", "mnlimm": "mnlimismatched"}.get(key, key)


def glue_metrics(task: str, predictions: Sequence | np.ndarray, labels: Sequence | np.ndarray) -> dict[str, float]:
    """GLUE's metrics for `task` on one split, by the metrics of its row (tasks/glue_tasks.py).

    mcc (CoLA); f1 (positive class 1) with accuracy and their mean `acc_and_f1` (MRPC, QQP); pearson and
    spearman with their mean `corr` (STS-B); accuracy otherwise (MNLI: call once per matched / mismatched split,
    or use `mnli_metrics`; `ax`, MNLI's diagnostic set, too).
    """
    key = _key(task)
    if key in ("mnlimatched", "mnlimismatched", "ax"):
        key = "mnli"
    if key not in GLUE:
        raise KeyError(f"unknown GLUE task {task!r}")
    official = GLUE[key].metrics
    if "mcc" in official:
        return {"mcc": matthews_corrcoef(predictions, labels)}
    if "f1" in official:
        acc, f1 = accuracy(predictions, labels), f1_binary(predictions, labels)
        return {"accuracy": acc, "f1": f1, "acc_and_f1": (acc + f1) / 2}
    if "pearson" in official:
        r, rho = pearson(predictions, labels), spearman(predictions, labels)
        return {"pearson": r, "spearman": rho, "corr": (r + rho) / 2}
    return {"accuracy": accuracy(predictions, labels)}


def mnli_metrics(
    matched_predictions: Sequence | np.ndarray,
    matched_labels: Sequence | np.ndarray,
    mismatched_predictions: Sequence | np.ndarray,
    mismatched_labels: Sequence | np.ndarray,
) -> dict[str, float]:
    """MNLI's two headline numbers: accuracy on dev_matched and on dev_mismatched (never pooled)."""
    return {
        "accuracy_matched": accuracy(matched_predictions, matched_labels),
        "accuracy_mismatched": accuracy(mismatched_predictions, mismatched_labels),
    }

"""What GLUE reports for each task, as one dict per call."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from bertforge.tasks.metrics.classification import accuracy, f1_binary, matthews_corrcoef, pearson, spearman


def _key(task: str) -> str:
    key = task.lower().replace("-", "").replace("_", "")
    return {"mnlim": "mnlimatched", "mnlimm": "mnlimismatched"}.get(key, key)


def glue_metrics(task: str, predictions: Sequence | np.ndarray, labels: Sequence | np.ndarray) -> dict[str, float]:
    """GLUE's metrics for `task` on one split.

    cola: mcc; mrpc/qqp: accuracy, f1 (positive class 1) and their mean `acc_and_f1`;
    stsb: pearson, spearman and their mean `corr`; sst2, mnli (call once per matched /
    mismatched split, or use `mnli_metrics`), qnli, rte, wnli: accuracy.
    """
    key = _key(task)
    if key == "cola":
        return {"mcc": matthews_corrcoef(predictions, labels)}
    if key in ("mrpc", "qqp"):
        acc, f1 = accuracy(predictions, labels), f1_binary(predictions, labels)
        return {"accuracy": acc, "f1": f1, "acc_and_f1": (acc + f1) / 2}
    if key == "stsb":
        r, rho = pearson(predictions, labels), spearman(predictions, labels)
        return {"pearson": r, "spearman": rho, "corr": (r + rho) / 2}
    if key in ("sst2", "mnli", "mnlimatched", "mnlimismatched", "qnli", "rte", "wnli", "ax"):
        return {"accuracy": accuracy(predictions, labels)}
    raise KeyError(f"unknown GLUE task {task!r}")


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

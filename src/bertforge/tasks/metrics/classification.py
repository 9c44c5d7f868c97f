"""GLUE / SWAG metrics: accuracy, binary F1, Matthews correlation, Pearson and Spearman.

Written on numpy alone (no sklearn/scipy at run time); the tests check each one equals
sklearn's / scipy's result. Values are fractions in [0, 1] (or [-1, 1]), as GLUE reports them.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np


def _pair(predictions: Sequence | np.ndarray, labels: Sequence | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    p, y = np.asarray(predictions), np.asarray(labels)
    if p.ndim != 1 or y.ndim != 1:
        raise ValueError(f"expected 1-d predictions and labels, got shapes {p.shape} and {y.shape}")
    if len(p) != len(y):
        raise ValueError(f"{len(p)} predictions for {len(y)} labels")
    if len(p) == 0:
        raise ValueError("no predictions to score")
    return p, y


def accuracy(predictions: Sequence | np.ndarray, labels: Sequence | np.ndarray) -> float:
    """Fraction of predictions equal to the label (ids or names, as long as both use the same)."""
    p, y = _pair(predictions, labels)
    return float(np.mean(p == y))


def f1_binary(predictions: Sequence | np.ndarray, labels: Sequence | np.ndarray, positive: int | str = 1) -> float:
    """F1 of the positive class (MRPC/QQP: 1 = paraphrase/duplicate); 0.0 when undefined, like sklearn."""
    p, y = _pair(predictions, labels)
    if p.dtype.kind in "USO" or y.dtype.kind in "USO":
        p, y, positive = p.astype(str), y.astype(str), str(positive)
    tp = int(np.sum((p == positive) & (y == positive)))
    fp = int(np.sum((p == positive) & (y != positive)))
    fn = int(np.sum((p != positive) & (y == positive)))
    return 0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn)


def matthews_corrcoef(predictions: Sequence | np.ndarray, labels: Sequence | np.ndarray) -> float:
    """Matthews correlation (CoLA), multi-class form from the confusion matrix; 0.0 when undefined.

    With C the confusion matrix, t/p its row/column sums, c its trace and s its total:
    MCC = (c*s - t.p) / sqrt((s^2 - p.p) * (s^2 - t.t)). Exact integer arithmetic until the end.
    """
    p, y = _pair(predictions, labels)
    classes = {v: i for i, v in enumerate(sorted(set(p.tolist()) | set(y.tolist()), key=str))}
    k = len(classes)
    conf = np.zeros((k, k), dtype=np.int64)
    np.add.at(conf, (np.array([classes[v] for v in y.tolist()]), np.array([classes[v] for v in p.tolist()])), 1)
    t = [int(v) for v in conf.sum(axis=1)]
    q = [int(v) for v in conf.sum(axis=0)]
    c, s = int(np.trace(conf)), int(conf.sum())
    cov_yp = c * s - sum(a * b for a, b in zip(t, q))
    cov_pp = s * s - sum(b * b for b in q)
    cov_yy = s * s - sum(a * a for a in t)
    if cov_pp == 0 or cov_yy == 0:
        return 0.0
    return float(cov_yp / np.sqrt(float(cov_pp) * float(cov_yy)))


def pearson(predictions: Sequence | np.ndarray, labels: Sequence | np.ndarray) -> float:
    """Pearson's r (STS-B); NaN when either side is constant, as scipy gives."""
    p, y = _pair(predictions, labels)
    p, y = p.astype(np.float64), y.astype(np.float64)
    dp, dy = p - p.mean(), y - y.mean()
    norm = np.sqrt(np.dot(dp, dp)) * np.sqrt(np.dot(dy, dy))
    if norm == 0:
        return float("nan")
    return float(np.clip(np.dot(dp, dy) / norm, -1.0, 1.0))


def rank_average(values: np.ndarray) -> np.ndarray:
    """1-based ranks, ties sharing the mean of the ranks they span (what Spearman needs)."""
    order = np.argsort(values, kind="mergesort")
    sorted_vals = values[order]
    ranks = np.empty(len(values), dtype=np.float64)
    starts = np.flatnonzero(np.r_[True, sorted_vals[1:] != sorted_vals[:-1]])
    ends = np.r_[starts[1:], len(values)]
    for a, b in zip(starts, ends):
        ranks[order[a:b]] = (a + 1 + b) / 2.0  # mean of ranks a+1 .. b
    return ranks


def spearman(predictions: Sequence | np.ndarray, labels: Sequence | np.ndarray) -> float:
    """Spearman's rho = Pearson's r of the tie-averaged ranks (STS-B's headline number in BERT)."""
    p, y = _pair(predictions, labels)
    return pearson(rank_average(p.astype(np.float64)), rank_average(y.astype(np.float64)))

"""GLUE / SWAG metrics: accuracy, binary F1, Matthews correlation, Pearson and Spearman.

Computed by scikit-learn and scipy, the implementations everyone's published numbers come from; this
module only checks the inputs, fixes the conventions GLUE uses (F1 of one positive class, 0.0 where a
score is undefined, NaN for a correlation with a constant side) and returns plain floats. Values are
fractions in [0, 1] (or [-1, 1]), as GLUE reports them. scikit-learn and scipy are imported when a score is
computed, not with the module: every `bertforge` command imports it, and they cost seconds at start-up.
"""
from __future__ import annotations

import warnings
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
    if p.dtype.kind in "USO" or y.dtype.kind in "USO":  # label names (or a mix): compare as text
        p, y = p.astype(str), y.astype(str)
    return p, y


def accuracy(predictions: Sequence | np.ndarray, labels: Sequence | np.ndarray) -> float:
    """Fraction of predictions equal to the label (ids or names, as long as both use the same)."""
    from sklearn import metrics
    p, y = _pair(predictions, labels)
    return float(metrics.accuracy_score(y, p))


def f1_binary(predictions: Sequence | np.ndarray, labels: Sequence | np.ndarray, positive: int | str = 1) -> float:
    """F1 of the positive class (MRPC/QQP: 1 = paraphrase/duplicate); 0.0 when undefined, like sklearn.

    Every other value counts as negative, so a multi-class prediction can still be scored for one class."""
    from sklearn import metrics
    p, y = _pair(predictions, labels)
    if p.dtype.kind == "U":
        positive = str(positive)
    return float(metrics.f1_score(y == positive, p == positive, pos_label=True, average="binary",
                                  zero_division=0))


def matthews_corrcoef(predictions: Sequence | np.ndarray, labels: Sequence | np.ndarray) -> float:
    """Matthews correlation (CoLA), the multi-class form; 0.0 when undefined (a constant side), like sklearn."""
    from sklearn import metrics
    p, y = _pair(predictions, labels)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "A single label was found", UserWarning)  # -> 0.0, documented
        return float(metrics.matthews_corrcoef(y, p))


def _correlation(test, p: np.ndarray, y: np.ndarray) -> float:
    from scipy import stats
    p, y = p.astype(np.float64), y.astype(np.float64)
    if not (np.isfinite(p).all() and np.isfinite(y).all()):
        raise ValueError("predictions and labels must be finite numbers to correlate")
    if len(p) < 2 or np.all(p == p[0]) or np.all(y == y[0]):
        return float("nan")  # undefined: a constant side has no variance (never a tiny rounding residue)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.ConstantInputWarning)
        return float(test(p, y).statistic)


def pearson(predictions: Sequence | np.ndarray, labels: Sequence | np.ndarray) -> float:
    """Pearson's r (STS-B); NaN when either side is constant."""
    from scipy import stats
    return _correlation(stats.pearsonr, *_pair(predictions, labels))


def rank_average(values: np.ndarray) -> np.ndarray:
    """1-based ranks, ties sharing the mean of the ranks they span (what Spearman needs)."""
    from scipy import stats
    return stats.rankdata(np.asarray(values), method="average").astype(np.float64)


def spearman(predictions: Sequence | np.ndarray, labels: Sequence | np.ndarray) -> float:
    """Spearman's rho, Pearson's r of the tie-averaged ranks (STS-B's headline number in BERT); NaN when
    either side is constant."""
    from scipy import stats
    return _correlation(stats.spearmanr, *_pair(predictions, labels))

"""Masked diffusion (MDLM, Sahoo et al. 2024) corruption: a mask rate t per sequence, every chosen token [MASK].

Under the linear schedule alpha_t = 1 - t, a sequence at time t has each token masked independently with
probability t, and the continuous-time NELBO is the cross-entropy of the masked tokens weighted by 1/t
(the paper's eq. 10 with alpha'_t / (1 - alpha_t) = -1/t). The t of a batch are low-discrepancy, as the
paper samples them: one uniform u per batch, t_i = (u + i/B) mod 1, mapped into [eps, 1) so that 1/t stays
finite; the batch then covers the unit interval evenly, which lowers the variance of the loss.

Randomness is `hash_uniform` of a batch key (the caller derives it from seed, rank, epoch and position, as
every other per-batch draw), so a resumed run draws the same t and the same masks.
"""
from __future__ import annotations

import numpy as np

from bertforge.data.hashing import combine, hash_uniform

__all__ = ["T_EPS", "diffusion_mask", "low_discrepancy_times"]

T_EPS = 1e-3  # the smallest t: MDLM's sampling_eps
_TIME, _TOKEN = 0, 1


def low_discrepancy_times(key: int, batch: int, eps: float = T_EPS) -> np.ndarray:
    """[B] mask rates: t_i = eps + (1 - eps) * ((u + i / B) mod 1) with one u per batch, drawn from `key`."""
    u = float(hash_uniform(np.uint64(key), _TIME))
    return eps + (1.0 - eps) * np.mod(u + np.arange(batch) / batch, 1.0)


def diffusion_mask(ids: np.ndarray, candidate: np.ndarray, t: np.ndarray, key: int,
                   mask_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Mask each `candidate` token of row b with probability t[b]; every masked token becomes `mask_id`
    (no 80/10/10). Returns (inputs, labels), labels the original id where masked and -100 elsewhere. A batch
    whose draws mask nothing (tiny t on short rows) masks its one token with the lowest draw: a step needs a
    prediction."""
    rows = combine(np.uint64(key), _TOKEN, np.arange(ids.shape[0]))
    draw = hash_uniform(rows[:, None], np.arange(ids.shape[1])[None, :])
    masked = candidate & (draw < t[:, None])
    if not masked.any() and candidate.any():
        masked.flat[np.argmin(np.where(candidate, draw, np.inf))] = True
    return np.where(masked, mask_id, ids), np.where(masked, ids, -100)

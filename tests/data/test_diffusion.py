"""MDLM corruption (data/diffusion.py) and the mask-rate schedule (data/masking.py)."""
from __future__ import annotations

import numpy as np
import pytest

from bertforge.data.diffusion import T_EPS, diffusion_mask, low_discrepancy_times
from bertforge.data.masking import parse_rate_schedule, rate_at

MASK = 103


@pytest.mark.parametrize("batch", [1, 4, 7, 32])
def test_the_times_of_a_batch_are_spaced_one_over_b(batch):
    """One uniform per batch, t_i = (u + i/B) mod 1: sorted, neighbours are (1 - eps)/B apart, and the
    wrap-around gap closes the circle; a batch of independent draws would fail the spacing."""
    t = np.sort(low_discrepancy_times(key=12345, batch=batch))
    assert t.min() >= T_EPS and t.max() < 1.0
    assert np.allclose(np.diff(t), (1.0 - T_EPS) / batch)
    u = (t - T_EPS) / (1 - T_EPS)
    assert u[0] < 1.0 / batch + 1e-12  # the smallest lies in the first 1/B of the interval


def test_the_times_depend_only_on_the_key():
    assert np.array_equal(low_discrepancy_times(7, 8), low_discrepancy_times(7, 8))
    assert not np.array_equal(low_discrepancy_times(7, 8), low_discrepancy_times(8, 8))


def test_each_row_is_masked_at_its_own_rate_and_only_with_mask():
    rng = np.random.default_rng(0)
    ids = rng.integers(1000, 2000, size=(4, 4000))
    candidate = np.ones_like(ids, dtype=bool)
    candidate[:, :2] = False  # specials / padding: never masked
    t = np.array([0.05, 0.3, 0.6, 0.95])
    inputs, labels = diffusion_mask(ids, candidate, t, key=3, mask_id=MASK)
    masked = labels != -100
    assert not masked[:, :2].any()
    assert np.all(inputs[masked] == MASK) and np.array_equal(labels[masked], ids[masked])  # no 80/10/10
    assert np.array_equal(inputs[~masked], ids[~masked])
    # binomial(3998, t): 5 standard deviations
    sd = np.sqrt(3998 * t * (1 - t))
    assert np.all(np.abs(masked.sum(1) - 3998 * t) < 5 * sd)


def test_a_batch_that_draws_no_mask_still_masks_one_token():
    ids = np.array([[101, 2000, 2001, 102]])
    candidate = np.array([[False, True, True, False]])
    inputs, labels = diffusion_mask(ids, candidate, np.array([1e-9]), key=1, mask_id=MASK)
    assert (labels != -100).sum() == 1 and (labels[candidate] != -100).sum() == 1


def test_the_schedule_gives_each_phase_its_rate():
    phases = parse_rate_schedule("0.3:0.3,0.15:0.4,0.05:0.3")
    assert [rate_at(phases, p) for p in (0.0, 0.29, 0.3, 0.69, 0.7, 0.99, 1.0)] == \
        [0.3, 0.3, 0.15, 0.15, 0.05, 0.05, 0.05]


@pytest.mark.parametrize("text", ["0.3:0.5,0.1:0.4", "abc", "1.5:1", "0.3:0.5,0.1:0.6"])
def test_a_bad_schedule_is_refused(text):
    with pytest.raises(ValueError, match="mask-rate schedule"):
        parse_rate_schedule(text)

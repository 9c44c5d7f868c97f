"""`mask_tokens` on synthetic batches: exact counts, specials, 80/10/10, keys, whole words."""
from __future__ import annotations

import numpy as np
import pytest

from bertforge.data.masking import MaskingConfig, VocabTables, mask_tokens

# A toy vocab: 0-4 special, 5-59 word starts, 60-99 "##" pieces.
TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(5, 60)] + [f"##p{i}" for i in range(60, 100)]
TABLES = VocabTables.from_tokens(TOKENS, [0, 1, 2, 3, 4], mask_id=4)


def batch(n_rows=512, width=128, seed=0, continuation_rate=0.0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(10, width + 1, n_rows)
    ids = rng.integers(5, 60, (n_rows, width))
    pieces = rng.random((n_rows, width)) < continuation_rate
    ids = np.where(pieces, rng.integers(60, 100, (n_rows, width)), ids)
    ids[:, 0] = 2
    ids[np.arange(n_rows), lengths - 1] = 3
    ids[np.arange(width)[None, :] >= lengths[:, None]] = 0
    keys = rng.integers(0, 2 ** 63, n_rows).astype(np.uint64)
    return ids, lengths, keys


def test_exact_count_and_specials():
    ids, lengths, keys = batch()
    config = MaskingConfig()
    inputs, labels = mask_tokens(ids, lengths, keys, config, 20, TABLES)
    chosen = labels != -100
    expected = np.minimum(20, np.maximum(1, np.rint(lengths * 0.15)))
    assert (chosen.sum(1) == expected).all()
    assert not chosen[TABLES.is_special[ids]].any()                  # never [CLS], [SEP] or padding
    assert (labels[chosen] == ids[chosen]).all()
    assert (inputs[~chosen] == ids[~chosen]).all()                   # nothing else changes


def test_80_10_10_split():
    ids, lengths, keys = batch(n_rows=2000)
    inputs, labels = mask_tokens(ids, lengths, keys, MaskingConfig(), 1000, TABLES)
    chosen = labels != -100
    masked = (inputs[chosen] == 4).mean()
    kept = (inputs[chosen] == ids[chosen]).mean()
    replaced = 1 - masked - kept
    assert abs(masked - 0.8) < 0.01 and abs(kept - 0.1) < 0.01 and abs(replaced - 0.1) < 0.01
    random_ids = inputs[chosen & (inputs != 4) & (inputs != ids)]
    assert not TABLES.is_special[random_ids].any()                   # random tokens are never special
    assert len(np.unique(random_ids)) > 80                           # ... and spread over the vocabulary


@pytest.mark.parametrize("rate", [0.15, 0.3])
def test_rate_is_configurable(rate):
    ids, lengths, keys = batch(n_rows=1000)
    _, labels = mask_tokens(ids, lengths, keys, MaskingConfig(rate=rate), 10_000, TABLES)
    assert abs((labels != -100).sum() / lengths.sum() - rate) < 0.005
    assert MaskingConfig(rate=rate).predictions_for(128) == round(rate * 128)


def test_masks_depend_only_on_the_key():
    ids, lengths, keys = batch(n_rows=64)
    config = MaskingConfig(whole_word=False)
    inputs, labels = mask_tokens(ids, lengths, keys, config, 20, TABLES)
    # Reordered, in a smaller batch and padded wider: every row gets the same mask.
    order = np.arange(63, -1, -1)[:40]
    wide = np.zeros((40, 160), ids.dtype)
    wide[:, :128] = ids[order]
    inputs2, labels2 = mask_tokens(wide, lengths[order], keys[order], config, 20, TABLES)
    assert (inputs2[:, :128] == inputs[order]).all() and (labels2[:, :128] == labels[order]).all()
    assert (labels2[:, 128:] == -100).all()
    _, labels3 = mask_tokens(ids, lengths, keys + np.uint64(1), config, 20, TABLES)
    assert ((labels3 != -100) != (labels != -100)).any()


def test_whole_word_masking_never_splits_a_word():
    ids, lengths, keys = batch(n_rows=500, continuation_rate=0.4)
    inputs, labels = mask_tokens(ids, lengths, keys, MaskingConfig(whole_word=True), 20, TABLES)
    chosen = labels != -100
    continues = TABLES.is_continuation[ids] & ~TABLES.is_special[ids]
    continues[:, 1:] &= ~TABLES.is_special[ids[:, :-1]]
    # A "##" piece is chosen exactly when the piece before it is.
    assert (chosen[:, 1:][continues[:, 1:]] == chosen[:, :-1][continues[:, 1:]]).all()
    budget = np.minimum(20, np.maximum(1, np.rint(lengths * 0.15)))
    counts = chosen.sum(1)
    assert (counts <= budget).all() and (counts >= budget - 4).mean() > 0.95
    assert abs(counts.sum() / budget.sum() - 1) < 0.03

"""`mask_tokens` on synthetic batches: exact counts, specials, 80/10/10, keys, whole words, SpanBERT spans."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from bertforge.data.masking import MaskingConfig, VocabTables, mask_tokens, select_spans

from needs import require_module

# A toy vocab: 0-4 special, 5-59 word starts, 60-99 "##" pieces.
TOKENS = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(5, 60)]
          + [f"##p{i}" for i in range(60, 100)])
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


# ---- span masking (SpanBERT) ------------------------------------------------------------------------------------
def span_groups(starts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, start position, positions) of every span, from `select_spans`' per-position start positions."""
    rows, cols = np.nonzero(starts >= 0)
    key = rows * (starts.shape[1] + 1) + starts[rows, cols]
    order = np.argsort(key, kind="stable")
    _, first, counts = np.unique(key[order], return_index=True, return_counts=True)
    return rows[order][first], starts[rows, cols][order][first], np.split(cols[order], np.cumsum(counts)[:-1])


def long_rows(n_rows=64, width=2000, seed=0, continuation_rate=0.0):
    """Rows of one segment filling `width`, so a row's last (budget-cut) span is a small share of its spans."""
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, 2 ** 63, n_rows).astype(np.uint64)
    shape = (n_rows, width)
    ids = np.where(rng.random(shape) < continuation_rate, rng.integers(60, 100, shape), rng.integers(5, 60, shape))
    ids[:, 0], ids[:, -1] = 2, 3
    return ids, np.full(n_rows, width), keys


def test_span_lengths_are_spanbert_truncated_geometric():
    scipy_stats = require_module("scipy.stats")
    config = MaskingConfig(spans=True)
    k = np.arange(1, 11)
    reference = scipy_stats.geom(0.2).pmf(k) / scipy_stats.geom(0.2).cdf(10)
    assert np.allclose(config.span_length_probabilities(), reference, atol=1e-12)
    assert abs((k * reference).sum() - 3.8) < 0.01                    # SpanBERT's stated mean length
    draws = config.span_lengths(np.random.default_rng(0).random(200_000))
    observed = np.bincount(draws, minlength=11)[1:]
    assert draws.min() == 1 and draws.max() == 10
    assert scipy_stats.chisquare(observed, reference * len(draws)).pvalue > 1e-3


@pytest.mark.parametrize("rate", [0.15, 0.3])
def test_span_masking_spends_the_budget_in_spans_of_the_clipped_mean_length(rate):
    scipy_stats = require_module("scipy.stats")
    ids, lengths, keys = long_rows()
    config = MaskingConfig(rate=rate, spans=True)
    starts = select_spans(ids, lengths, keys, config, 10 ** 6, TABLES)
    chosen = starts >= 0
    budget = np.maximum(1, np.rint(lengths * rate))
    assert (chosen.sum(1) == budget).all()                             # exactly the budget, every row
    assert abs(chosen.sum() / lengths.sum() - rate) < 0.002
    _, _, spans = span_groups(starts)
    sizes = np.array([len(s) for s in spans])
    k = np.arange(1, 11)
    expected = (k * scipy_stats.geom(0.2).pmf(k)).sum() / scipy_stats.geom(0.2).cdf(10)
    assert abs(sizes.mean() / expected - 1) < 0.03                    # only each row's last span is cut short
    assert sizes.max() <= 10


def test_spans_are_contiguous_and_never_touch_specials_padding_or_two_segments():
    ids, lengths, keys = batch(n_rows=500)
    middle = np.maximum(2, lengths // 2)
    ids[np.arange(500), middle] = 3                                    # [CLS] A [SEP] B [SEP]
    starts = select_spans(ids, lengths, keys, MaskingConfig(spans=True), 20, TABLES)
    chosen = starts >= 0
    assert not chosen[TABLES.is_special[ids]].any()                    # never [CLS], [SEP] or padding
    assert not chosen[np.arange(ids.shape[1])[None, :] >= lengths[:, None]].any()
    rows, first, spans = span_groups(starts)
    for row, start, positions in zip(rows, first, spans):
        assert positions[0] == start and (np.diff(positions) == 1).all()   # contiguous: never across a [SEP]
    inputs, labels = mask_tokens(ids, lengths, keys, MaskingConfig(spans=True), 20, TABLES)
    assert ((labels != -100) == chosen).all()


def test_span_80_10_10_is_decided_per_span():
    ids, lengths, keys = batch(n_rows=3000)
    config = MaskingConfig(spans=True)
    inputs, labels = mask_tokens(ids, lengths, keys, config, 1000, TABLES)
    rows, _, spans = span_groups(select_spans(ids, lengths, keys, config, 1000, TABLES))
    kinds = []
    for row, positions in zip(rows, spans):
        got, was = inputs[row, positions], ids[row, positions]
        if (got == 4).all():
            kinds.append("mask")
        elif (got == was).all():
            kinds.append("keep")
        else:
            assert not (got == 4).any()                                # never part [MASK], part something else
            kinds.append("random")
    kinds = np.array(kinds)
    assert len(kinds) > 5000
    for kind, share in (("mask", 0.8), ("random", 0.1), ("keep", 0.1)):
        assert abs((kinds == kind).mean() - share) < 0.015, kind
    assert (labels[labels != -100] == ids[labels != -100]).all()


def test_span_masking_with_whole_words():
    ids, lengths, keys = long_rows(n_rows=64, width=1000, continuation_rate=0.4)
    config = MaskingConfig(spans=True, whole_word=True)
    starts = select_spans(ids, lengths, keys, config, 10 ** 6, TABLES)
    chosen = starts >= 0
    continues = TABLES.is_continuation[ids] & ~TABLES.is_special[ids]
    continues[:, 1:] &= ~TABLES.is_special[ids[:, :-1]]
    # a "##" piece is masked exactly when the piece before it is, and in the same span
    assert (chosen[:, 1:][continues[:, 1:]] == chosen[:, :-1][continues[:, 1:]]).all()
    assert (starts[:, 1:][continues[:, 1:]] == starts[:, :-1][continues[:, 1:]]).all()
    budget = np.rint(lengths * 0.15)
    assert (chosen.sum(1) <= budget).all() and abs(chosen.sum() / budget.sum() - 1) < 0.01
    rows, _, spans = span_groups(starts)
    words = np.array([(~continues[r, p]).sum() for r, p in zip(rows, spans)])
    assert words.max() <= 10 and 3.4 < words.mean() < 3.9               # lengths count words


def test_span_masks_depend_only_on_the_key():
    ids, lengths, keys = batch(n_rows=64)
    config = MaskingConfig(spans=True, whole_word=True)
    inputs, labels = mask_tokens(ids, lengths, keys, config, 20, TABLES)
    order = np.arange(63, -1, -1)[:40]
    wide = np.zeros((40, 160), ids.dtype)
    wide[:, :128] = ids[order]
    inputs2, labels2 = mask_tokens(wide, lengths[order], keys[order], config, 20, TABLES)
    assert (inputs2[:, :128] == inputs[order]).all() and (labels2[:, :128] == labels[order]).all()
    _, labels3 = mask_tokens(ids, lengths, keys + np.uint64(1), config, 20, TABLES)
    assert ((labels3 != -100) != (labels != -100)).any()


def test_span_options_are_checked():
    with pytest.raises(ValueError, match="span_p"):
        MaskingConfig(spans=True, span_p=0.0)
    with pytest.raises(ValueError, match="max_span_length"):
        MaskingConfig(spans=True, max_span_length=0)
    assert MaskingConfig().spans is False                              # token masking stays the default


def masked_runs(batches) -> tuple[list[int], float]:
    """Lengths of the runs of consecutive masked positions, and the masked share of real tokens."""
    runs, chosen_total, tokens_total = [], 0, 0
    for batch in batches:
        chosen = (batch["labels"] != -100).numpy()
        chosen_total += chosen.sum()
        tokens_total += batch["attention_mask"].sum().item()
        for row in chosen:
            edges = np.diff(np.concatenate([[0], row.astype(np.int8), [0]]))
            runs += list(np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1))
    return runs, chosen_total / tokens_total


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["dynamic", "static"])
def test_span_masking_through_the_dataset_on_real_text(wiki_data, tokenizer, mode):
    """`PretrainingDataset` hands its MaskingConfig to the masker: real Wikipedia rows get whole-word spans."""
    import itertools

    from bertforge.data import PretrainingDataset

    def first_batches(**masking):
        config = MaskingConfig(whole_word=True, mode=mode, dupe_factor=2, **masking)
        ds = PretrainingDataset(wiki_data, tokenizer, objective="mlm", masking=config, batch_size=128, seed=3)
        return list(itertools.islice(ds, 3))

    spans, words = first_batches(spans=True), first_batches()
    special = torch.tensor(sorted(tokenizer.all_special_ids))
    for batch in spans:
        labels, real = batch["labels"], batch["attention_mask"].bool()
        originals = torch.where(labels != -100, labels, batch["input_ids"])
        assert not (labels != -100)[~real | torch.isin(originals, special)].any()
    span_runs, span_share = masked_runs(spans)
    word_runs, word_share = masked_runs(words)
    assert abs(span_share - 0.15) < 0.01 and abs(word_share - 0.15) < 0.01   # one rate, both ways
    assert np.mean(span_runs) > 2.5 * np.mean(word_runs)                    # runs of words, not single words
    assert all(torch.equal(a["labels"], b["labels"]) for a, b in zip(spans, first_batches(spans=True)))

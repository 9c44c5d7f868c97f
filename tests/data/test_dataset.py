"""`PretrainingDataset` on real Wikipedia: batch layout, statistics, determinism, ranks, resuming."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from bertforge.data import MaskingConfig, PretrainingDataset


def make(wiki_data, tokenizer, **kwargs):
    kwargs.setdefault("batch_size", 64)
    return PretrainingDataset(wiki_data, tokenizer, **kwargs)


def one_epoch(ds):
    return list(ds)


def originals(batch):
    labels, inputs = batch["labels"], batch["input_ids"]
    return torch.where(labels != -100, labels, inputs)


def same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def nsp_epoch(wiki_data, tokenizer):
    return one_epoch(make(wiki_data, tokenizer, objective="mlm+nsp", seed=1))


def test_batch_layout_for_pairs(nsp_epoch, tokenizer):
    cls, sep, pad = tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id
    widths = set()
    for batch in nsp_epoch:
        assert set(batch) == {"input_ids", "token_type_ids", "attention_mask", "labels", "next_sentence_label"}
        assert all(t.dtype == torch.long for t in batch.values())
        ids, types, attn = originals(batch), batch["token_type_ids"], batch["attention_mask"]
        lengths = attn.sum(1)
        assert lengths.max() == ids.shape[1] <= 128               # padded to the longest, not to 128
        widths.add(ids.shape[1])
        assert (ids[:, 0] == cls).all()
        for row, n in zip(range(len(ids)), lengths.tolist()):
            assert (attn[row, :n] == 1).all() and (attn[row, n:] == 0).all()
            assert (ids[row, n:] == pad).all() and (types[row, n:] == 0).all()
            seps = torch.nonzero(ids[row, :n] == sep).flatten().tolist()
            assert len(seps) == 2 and seps[1] == n - 1               # [CLS] A [SEP] B [SEP]
            assert (types[row, :seps[0] + 1] == 0).all() and (types[row, seps[0] + 1:n] == 1).all()
    assert len(widths) >= 1


def test_masking_statistics_on_real_data(nsp_epoch, tokenizer):
    labels = torch.cat([b["labels"].flatten() for b in nsp_epoch])
    inputs = torch.cat([b["input_ids"].flatten() for b in nsp_epoch])
    attn = torch.cat([b["attention_mask"].flatten() for b in nsp_epoch])
    chosen = labels != -100
    rate = chosen.sum().item() / attn.sum().item()
    assert abs(rate - 0.15) < 0.005, rate
    masked = (inputs[chosen] == tokenizer.mask_token_id).float().mean().item()
    kept = (inputs[chosen] == labels[chosen]).float().mean().item()
    assert abs(masked - 0.8) < 0.015 and abs(kept - 0.1) < 0.015 and abs(1 - masked - kept - 0.1) < 0.015
    special = torch.tensor(sorted(tokenizer.all_special_ids))
    assert not torch.isin(labels[chosen], special).any()           # special tokens are never predicted
    per_row = torch.cat([(b["labels"] != -100).sum(1) for b in nsp_epoch])
    assert per_row.max() <= 20                                     # max_predictions = round(0.15 * 128)


def test_nsp_is_balanced(nsp_epoch):
    labels = torch.cat([b["next_sentence_label"] for b in nsp_epoch]).float()
    assert abs(labels.mean().item() - 0.5) < 0.04


class SourceText:
    """The raw articles the corpus was prepared from, tokenized whole (one id sequence per article), and a way to
    find where a run of ids occurs in them: the oracle for what a pair's label claims about A and B."""

    K = 4  # ids hashed per lookup key

    def __init__(self, articles: list[list[str]], tokenizer) -> None:
        docs = tokenizer.encode_batch_ids(["\n".join(lines) for lines in articles])
        self.ids = np.concatenate([np.asarray(d, dtype=np.int64) for d in docs])
        self.doc = np.repeat(np.arange(len(docs)), [len(d) for d in docs])
        self.order, self.sorted_keys = self._index(self.ids)

    def _keys(self, ids: np.ndarray) -> np.ndarray:
        windows = np.lib.stride_tricks.sliding_window_view(ids.astype(np.uint64), self.K)
        return windows @ (np.uint64(1_000_003) ** np.arange(self.K, dtype=np.uint64))

    def _index(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        keys = self._keys(ids)
        order = np.argsort(keys, kind="stable")
        return order, keys[order]

    def find(self, run: np.ndarray) -> list[tuple[int, int]]:
        """(article, start) of every place `run` occurs inside one article."""
        key = self._keys(run[:self.K])[0]
        lo, hi = np.searchsorted(self.sorted_keys, [key, key + np.uint64(1)])
        found = []
        for start in self.order[lo:hi].tolist():
            end = start + len(run)
            if end <= len(self.ids) and self.doc[start] == self.doc[end - 1] \
                    and np.array_equal(self.ids[start:end], run):
                found.append((int(self.doc[start]), start))
        return found


def continues(source: SourceText, first: np.ndarray, second: np.ndarray, slack: int) -> bool:
    """Whether `second` occurs after `first` in the same article, at most `slack` ids after it ends (BERT's pair
    truncation may cut the end of the first segment and the start of the second)."""
    after = source.find(second)
    return any(d == e and 0 <= q - (p + len(first)) <= slack
               for d, p in source.find(first) for e, q in after)


def served_pairs(dataset, batches: int):
    """(A, B, label) of the examples `dataset` serves, A and B as their original (unmasked) ids."""
    sep = dataset.tokenizer.sep_token_id
    for batch in itertools.islice(iter(dataset), batches):
        ids = originals(batch).numpy()
        for row, n, label in zip(ids, batch["attention_mask"].sum(1).tolist(), batch["next_sentence_label"].tolist()):
            first_sep = int(np.flatnonzero(row[:n] == sep)[0])
            yield row[1:first_sep], row[first_sep + 1:n - 1], label


@pytest.fixture(scope="module")
def source_text(wiki_articles, tokenizer):
    return SourceText(wiki_articles, tokenizer)


@pytest.mark.parametrize("objective", ["mlm+nsp", "mlm+sop"])
def test_pair_labels_say_what_the_corpus_text_shows(wiki_data, tokenizer, source_text, objective):
    """transformers' convention (BertForPreTraining's next_sentence_label, AlbertForPreTraining's
    sentence_order_label): 0 = B follows A in the same document; NSP 1 = B is a random other text, SOP 1 = the
    two segments are swapped (A follows B). Checked by finding A and B in the articles the corpus was made of."""
    ds = make(wiki_data, tokenizer, objective=objective, seed=2, max_seq_length=128)
    slack = ds.max_seq_length
    checked, labels = 0, []
    for a, b, label in served_pairs(ds, batches=4):
        if min(len(a), len(b)) < SourceText.K:
            continue  # too short to look up unambiguously
        assert source_text.find(a) and source_text.find(b), "A and B are runs of the source text"
        in_order = continues(source_text, a, b, slack)
        if objective == "mlm+nsp":
            assert in_order == (label == 0), (label, tokenizer.decode(a.tolist()), tokenizer.decode(b.tolist()))
        else:  # (a segment may also occur elsewhere, e.g. a title repeated in its article: test only the claim)
            assert in_order if label == 0 else continues(source_text, b, a, slack), \
                (label, tokenizer.decode(a.tolist()), tokenizer.decode(b.tolist()))
        checked += 1
        labels.append(label)
    assert checked > 0.9 * 4 * 64 and 0.35 < np.mean(labels) < 0.65, (checked, np.mean(labels))


def test_full_sentences_cross_documents_only_with_a_sep(wiki_data, tokenizer):
    sep = tokenizer.sep_token_id
    for packing in ("full-sentences", "doc-sentences"):
        ds = make(wiki_data, tokenizer, objective="mlm", packing=packing)
        plan, keys = ds.epoch_plan(0)
        batch = ds.collate(plan, keys)
        ids, lengths = originals(batch), batch["attention_mask"].sum(1)
        assert "next_sentence_label" not in batch and (batch["token_type_ids"] == 0).all()
        n_seps = (ids == sep).sum(1)
        for row, (shard, a0, a1, *_rest) in enumerate(plan):
            starts = ds.corpus.shards[shard].document_token_starts()
            inside = starts[(starts > a0) & (starts < a1)]
            assert n_seps[row] == 1 + len(inside)
            if len(inside):  # the [SEP] sits exactly where the next document begins
                positions = torch.nonzero(ids[row] == sep).flatten()[:-1].numpy()
                assert (positions - np.arange(len(inside)) - 1 + a0 == inside).all()
            assert ids[row, lengths[row] - 1] == sep
        if packing == "doc-sentences":
            assert (n_seps == 1).all()
        else:
            assert (n_seps > 1).any()


def test_whole_word_masking_on_real_words(wiki_data, tokenizer):
    ds = make(wiki_data, tokenizer, objective="mlm+sop", masking=MaskingConfig(whole_word=True), batch_size=256)
    continuation = torch.tensor([t.startswith("##") for t in sorted(tokenizer.vocab, key=tokenizer.vocab.get)])
    special = torch.tensor(sorted(tokenizer.all_special_ids))
    chosen_total = tokens_total = split_words = 0
    for batch in itertools.islice(ds, 6):
        ids, chosen = originals(batch), batch["labels"] != -100
        cont = continuation[ids] & (batch["attention_mask"] == 1)
        cont[:, 0] = False
        cont[:, 1:] &= ~torch.isin(ids[:, :-1], special)  # a "##" piece cut loose by truncation is its own word
        split_words += (chosen[:, 1:] != chosen[:, :-1])[cont[:, 1:]].sum().item()
        chosen_total += chosen.sum().item()
        tokens_total += batch["attention_mask"].sum().item()
    assert split_words == 0
    assert cont.any() and abs(chosen_total / tokens_total - 0.15) < 0.01


def test_ltr_targets_are_the_next_token(wiki_data, tokenizer):
    ds = make(wiki_data, tokenizer, objective="ltr")
    batch = next(iter(ds))
    ids, labels, lengths = batch["input_ids"], batch["labels"], batch["attention_mask"].sum(1)
    assert "next_sentence_label" not in batch and not (ids == tokenizer.mask_token_id).any()
    for row, n in enumerate(lengths.tolist()):
        assert torch.equal(labels[row, :n - 1], ids[row, 1:n])
        assert (labels[row, n - 1:] == -100).all()


def test_same_seed_same_batches(wiki_data, tokenizer):
    for objective in ("mlm+nsp", "mlm"):
        a = list(itertools.islice(make(wiki_data, tokenizer, objective=objective, seed=5), 3))
        b = list(itertools.islice(make(wiki_data, tokenizer, objective=objective, seed=5), 3))
        c = list(itertools.islice(make(wiki_data, tokenizer, objective=objective, seed=6), 3))
        assert all(same(x, y) for x, y in zip(a, b))
        assert not same(a[0], c[0])


def test_epochs_reshuffle_deterministically(wiki_data, tokenizer):
    a, b = make(wiki_data, tokenizer, objective="mlm"), make(wiki_data, tokenizer, objective="mlm")
    assert (a.example_indices(1) == b.example_indices(1)).all()
    assert (a.example_indices(0) != a.example_indices(1)).any()
    assert sorted(a.example_indices(0)) == sorted(a.example_indices(1))


def test_dynamic_masking_changes_every_epoch(wiki_data, tokenizer):
    ds = make(wiki_data, tokenizer, objective="mlm", masking=MaskingConfig(mode="dynamic"))
    (plan0, keys0), (plan1, keys1) = ds.epoch_plan(0), ds.epoch_plan(1)
    assert (plan0 == plan1).all()                                  # same packed sequences ...
    b0, b1 = ds.collate(plan0[:64], keys0[:64]), ds.collate(plan1[:64], keys1[:64])
    assert torch.equal(originals(b0), originals(b1))
    assert ((b0["labels"] != -100) != (b1["labels"] != -100)).any(1).float().mean() > 0.9  # ... fresh masks


def test_static_masking_repeats_dupe_factor_copies(wiki_data, tokenizer):
    ds = make(wiki_data, tokenizer, objective="mlm+nsp", masking=MaskingConfig(mode="static", dupe_factor=3))
    single = make(wiki_data, tokenizer, objective="mlm+nsp", masking=MaskingConfig(mode="static", dupe_factor=1))
    plan, keys = ds.epoch_plan(0)
    assert len(plan) > 2.5 * len(single.epoch_plan(0)[0])        # three differently drawn copies per epoch

    def examples(epoch):
        indices = ds.example_indices(epoch)
        batch = ds.collate(plan[np.sort(indices)], keys[np.sort(indices)])
        return batch, [tuple(r) for r in torch.cat([batch["input_ids"], batch["labels"]], 1).tolist()]

    (_, e0), (_, e1) = examples(0), examples(1)
    assert e0 == e1                                                 # the same masked examples every epoch
    assert (ds.example_indices(0) != ds.example_indices(1)).any()  # ... served in a new order


def test_ranks_see_disjoint_slices(wiki_data, tokenizer):
    world = 3
    ranks = [make(wiki_data, tokenizer, objective="mlm+sop", rank=r, world_size=world, batch_size=50) for r in range(world)]
    indices = [set(ds.example_indices(2).tolist()) for ds in ranks]
    n = len(ranks[0].epoch_plan(2)[0])
    assert all(len(ix) == n // world for ix in indices)
    assert not (indices[0] & indices[1]) and not (indices[0] & indices[2]) and not (indices[1] & indices[2])
    assert len(ranks[0]) == len(ranks[1]) == len(ranks[2])       # lockstep: the same number of batches
    plan, keys = ranks[1].epoch_plan(0)
    first = ranks[1].example_indices(0)[:50]
    assert same(next(iter(ranks[1])), ranks[1].collate(plan[first], keys[first]))


@pytest.mark.parametrize("objective, masking", [("mlm+nsp", "static"), ("mlm", "dynamic")])
def test_resume_continues_with_the_next_example(wiki_data, tokenizer, objective, masking):
    config = MaskingConfig(mode=masking, dupe_factor=2)
    reference = make(wiki_data, tokenizer, objective=objective, masking=config, batch_size=128, seed=3)
    per_epoch = len(reference)
    stop = per_epoch - 2                                             # the run then crosses an epoch end
    stream = itertools.chain(iter(reference), iter(reference))
    expected = list(itertools.islice(stream, stop + 5))
    killed = make(wiki_data, tokenizer, objective=objective, masking=config, batch_size=128, seed=3)
    seen = list(itertools.islice(iter(killed), stop))
    assert all(same(a, b) for a, b in zip(seen, expected))
    state = killed.state_dict()
    assert state["epoch"] == 0 and state["index"] == stop * 128
    fresh = make(wiki_data, tokenizer, objective=objective, masking=config, batch_size=128, seed=3)
    fresh.load_state_dict(state)
    resumed = list(itertools.islice(itertools.chain(iter(fresh), iter(fresh)), 5))
    assert all(same(a, b) for a, b in zip(resumed, expected[stop:]))
    assert fresh.state_dict()["epoch"] == 1
    with pytest.raises(ValueError, match="seed"):
        make(wiki_data, tokenizer, objective=objective, seed=4).load_state_dict(state)


def test_two_phase_sequence_length(wiki_data, tokenizer):
    ds = make(wiki_data, tokenizer, objective="mlm+nsp", batch_size=32)
    first = next(iter(ds))
    assert first["input_ids"].shape[1] <= 128
    ds.set_max_seq_length(512)
    state = ds.state_dict()
    assert state["max_seq_length"] == 512 and state["epoch"] == 1 and state["index"] == 0
    batches = list(itertools.islice(iter(ds), 4))
    widths = [b["input_ids"].shape[1] for b in batches]
    assert max(widths) > 300 and max(widths) <= 512
    assert max((b["labels"] != -100).sum(1).max().item() for b in batches) > 20  # round(0.15 * 512) = 77
    again = make(wiki_data, tokenizer, objective="mlm+nsp", batch_size=32)
    again.load_state_dict(state)
    assert same(next(iter(again)), batches[0])


def test_heldout_split_and_lengths(wiki_data, tokenizer):
    ds = make(wiki_data, tokenizer, objective="mlm", split="heldout", batch_size=7)
    batches = one_epoch(ds)
    assert len(batches) == len(ds) > 0 and sum(len(b["input_ids"]) for b in batches) == ds.examples_per_epoch
    assert ds.state_dict()["epoch"] == 1
    dropped = make(wiki_data, tokenizer, objective="mlm", split="heldout", batch_size=7, drop_last=True)
    assert all(len(b["input_ids"]) == 7 for b in one_epoch(dropped))
    with pytest.raises(ValueError, match="objective"):
        make(wiki_data, tokenizer, objective="mlm+xyz")

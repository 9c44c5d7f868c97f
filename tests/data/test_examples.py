"""Example plans on real Wikipedia: pairs stay in their documents, packing respects document ends."""
from __future__ import annotations

import numpy as np
import pytest

from bertforge.data import CorpusSplit, build_plan


@pytest.fixture(scope="module")
def corpus(wiki_data):
    return CorpusSplit(wiki_data)


def doc_index(corpus, shard, positions):
    """Global document number of token positions of a shard (document numbers never repeat across shards)."""
    offset = sum(s.num_documents for s in corpus.shards[:shard])
    return offset + np.searchsorted(corpus.shards[shard].document_token_starts(), positions, side="right") - 1


def spans(corpus, plan):
    """Per row: documents of A's first/last token and B's first/last token."""
    out = []
    for shard, a0, a1, b0, b1, _ in plan:
        da = doc_index(corpus, shard, [a0, a1 - 1])
        db = doc_index(corpus, shard, [b0, b1 - 1]) if b0 >= 0 else (-1, -1)
        out.append((*da, *db))
    return np.asarray(out)


def test_nsp_pairs(corpus):
    plan = build_plan(corpus, "nsp", 128, seed=3)
    a_len, b_len = plan[:, 2] - plan[:, 1], plan[:, 4] - plan[:, 3]
    assert (a_len >= 1).all() and (b_len >= 1).all() and (a_len + b_len <= 125).all()
    docs = spans(corpus, plan)
    assert (docs[:, 0] == docs[:, 1]).all() and (docs[:, 2] == docs[:, 3]).all()  # no segment crosses a document
    positive, negative = plan[:, 5] == 0, plan[:, 5] == 1
    assert (docs[positive, 0] == docs[positive, 2]).all()           # the true continuation: same document
    assert (plan[positive, 2] <= plan[positive, 3]).all()           # ... and after A
    assert (docs[negative, 0] != docs[negative, 2]).all()           # random B: another document
    assert abs(negative.mean() - 0.5) < 0.04, negative.mean()       # 50/50 as in the paper
    # Targets are mostly the full length; short_seq_prob makes ~10% of documents aim shorter.
    assert np.median(a_len + b_len) > 100
    assert (plan == build_plan(corpus, "nsp", 128, seed=3)).all()
    assert len(plan) != len(build_plan(corpus, "nsp", 128, seed=4)) or (plan != build_plan(corpus, "nsp", 128, seed=4)).any()


def test_sop_pairs(corpus):
    plan = build_plan(corpus, "sop", 128, seed=3)
    docs = spans(corpus, plan)
    assert (docs[:, 0] == docs[:, 1]).all() and (docs[:, 0] == docs[:, 2]).all() and (docs[:, 2] == docs[:, 3]).all()
    in_order, swapped = plan[:, 5] == 0, plan[:, 5] == 1
    assert (plan[in_order, 2] <= plan[in_order, 3]).all()   # A then B
    assert (plan[swapped, 4] <= plan[swapped, 1]).all()     # B's text comes first in the document
    assert abs(swapped.mean() - 0.5) < 0.05
    assert ((plan[:, 2] - plan[:, 1]) + (plan[:, 4] - plan[:, 3]) <= 125).all()


def test_short_seq_prob_makes_shorter_pairs(corpus):
    lengths = {p: np.median((lambda x: (x[:, 2] - x[:, 1]) + (x[:, 4] - x[:, 3]))(
        build_plan(corpus, "nsp", 128, seed=0, short_seq_prob=p))) for p in (0.0, 1.0)}
    assert lengths[1.0] < 0.75 * lengths[0.0]


@pytest.mark.parametrize("kind", ["full-sentences", "doc-sentences"])
def test_packing_covers_every_token_once(corpus, kind):
    plan = build_plan(corpus, kind, 128)
    assert (plan[:, 3] == -1).all() and (plan[:, 5] == -1).all()
    for shard_id, shard in enumerate(corpus.shards):
        rows = plan[plan[:, 0] == shard_id]
        assert rows[0, 1] == 0 and rows[-1, 2] == len(shard.tokens)
        assert (rows[1:, 1] == rows[:-1, 2]).all()                       # contiguous, no gap, no overlap
        sentence_starts = np.asarray(shard.sentence_offsets)
        assert np.isin(rows[:, 1], sentence_starts).all()                # spans start at sentence starts
        doc_starts = shard.document_token_starts()
        crossings = np.searchsorted(doc_starts, rows[:, 2], "left") - np.searchsorted(doc_starts, rows[:, 1], "right")
        assert (rows[:, 2] - rows[:, 1] + crossings <= 126).all()        # tokens + extra [SEP]s fit
        if kind == "doc-sentences":
            assert (crossings == 0).all()
        else:
            assert crossings.sum() > 0
            # Greedy: a sequence ends early only when the next sentence (and its [SEP]) would not fit.
            lengths = (rows[:, 2] - rows[:, 1] + crossings)[:-1]
            nxt = np.searchsorted(sentence_starts, rows[:-1, 2])
            next_cost = sentence_starts[nxt + 1] - sentence_starts[nxt] + np.isin(rows[:-1, 2], doc_starts)
            assert (lengths + next_cost > 126).all()


def test_plans_follow_the_sequence_length(corpus):
    short, long = build_plan(corpus, "full-sentences", 128), build_plan(corpus, "full-sentences", 512)
    assert len(long) < len(short) / 3
    assert ((long[:, 2] - long[:, 1]) <= 510).all() and ((long[:, 2] - long[:, 1]) > 126).mean() > 0.9

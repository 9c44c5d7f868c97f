"""Retrieval and STS metrics against hand-computed cases and sentence-transformers' evaluators."""
from __future__ import annotations

import math
import random

import numpy as np
import pytest

from bertforge.tasks.embedding.data import RetrievalSet
from bertforge.tasks.embedding.evaluation import (chunked_search, evaluate_retrieval, exact_search, ranking_metrics,
                                                  write_vectors)
from needs import require_module


def test_ranking_metrics_by_hand():
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1, "d3": 1}, "q3": {"d9": 2, "d8": 1}}
    ranked = {"q1": ["d5", "d1"],                 # first hit at rank 2
              "q2": ["d3"] + [f"x{i}" for i in range(20)] + ["d2"],   # one hit at 1, the other at 22
              "q3": ["d8", "d9"]}                 # graded: the better document second
    got = ranking_metrics(ranked, qrels)
    ndcg_q1 = (1 / math.log2(3)) / 1
    ndcg_q2 = 1 / (1 + 1 / math.log2(3))
    ndcg_q3 = (1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3))
    assert got["ndcg@10"] == pytest.approx((ndcg_q1 + ndcg_q2 + ndcg_q3) / 3)
    assert got["mrr@10"] == pytest.approx((1 / 2 + 1 + 1) / 3)
    assert got["recall@1"] == pytest.approx((0 + 1 / 2 + 1 / 2) / 3)
    assert got["recall@10"] == pytest.approx((1 + 1 / 2 + 1) / 3)
    assert got["recall@100"] == pytest.approx(1.0)
    assert ranking_metrics({}, {"q": {"d": 1}})["ndcg@10"] == 0.0  # nothing ranked scores 0


@pytest.mark.parametrize("ranks", [(10,), (11,), (10, 11), (3, 11, 12), (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)])
def test_the_cut_off_is_ten_at_ranks_10_and_11_as_scikit_learn_scores_it(ranks):
    """Relevant documents (graded gains 3, 2, 1, ...) at the given 1-based ranks of a 30-document ranking:
    nDCG@10, MRR@10 and recall@10 against scikit-learn's ndcg_score(k=10) and by hand. A cut-off of 11 (or 9)
    scores rank 11 (or 10) differently."""
    metrics = require_module("sklearn.metrics")
    ranked = [f"d{i}" for i in range(1, 31)]
    relevant = {f"d{r}": max(1, 3 - i) for i, r in enumerate(ranks)}
    got = ranking_metrics({"q": ranked}, {"q": relevant})
    gains = [relevant.get(d, 0) for d in ranked]
    scores = [len(ranked) - i for i in range(len(ranked))]  # best first
    assert got["ndcg@10"] == pytest.approx(metrics.ndcg_score([gains], [scores], k=10))
    first = min(ranks)
    assert got["mrr@10"] == pytest.approx(1 / first if first <= 10 else 0.0)
    assert got["recall@10"] == pytest.approx(sum(r <= 10 for r in ranks) / len(ranks))
    if ranks == (11,):
        assert got["ndcg@10"] == 0.0 and got["mrr@10"] == 0.0
    if ranks == (10,):
        assert got["ndcg@10"] == pytest.approx(1 / math.log2(11))


def test_ranking_metrics_equal_sentence_transformers_information_retrieval_evaluator():
    """Random rankings of a random corpus with one to three relevant documents per query (binary relevance,
    which is what sentence-transformers scores)."""
    st_eval = require_module("sentence_transformers.sentence_transformer.evaluation")
    rng = random.Random(0)
    docs = [f"d{i}" for i in range(150)]
    qrels = {f"q{i}": {d: 1 for d in rng.sample(docs, rng.randint(1, 3))} for i in range(40)}
    scores = {q: {d: rng.random() for d in docs} for q in qrels}
    ranked = {q: sorted(docs, key=lambda d: -s[d]) for q, s in scores.items()}
    evaluator = st_eval.InformationRetrievalEvaluator(
        {q: q for q in qrels}, {d: d for d in docs}, {q: set(r) for q, r in qrels.items()}, mrr_at_k=[10],
        ndcg_at_k=[10], accuracy_at_k=[1], precision_recall_at_k=[1, 10, 100], map_at_k=[10])
    results = [[{"corpus_id": d, "score": scores[q][d]} for d in docs] for q in evaluator.queries_ids]
    expected = evaluator.compute_metrics(results)
    got = ranking_metrics(ranked, qrels)
    assert got["ndcg@10"] == pytest.approx(expected["ndcg@k"][10])
    assert got["mrr@10"] == pytest.approx(expected["mrr@k"][10])
    for k in (1, 10, 100):
        assert got[f"recall@{k}"] == pytest.approx(expected["recall@k"][k])


def test_exact_search_in_batches_is_the_full_cosine_ranking():
    rng = np.random.default_rng(0)
    queries, docs = rng.normal(size=(37, 8)), rng.normal(size=(120, 8)) * rng.uniform(0.5, 3, size=(120, 1))
    indices, values = exact_search(queries, docs, 10, batch_size=8)
    cos = (queries / np.linalg.norm(queries, axis=1, keepdims=True)) @ \
        (docs / np.linalg.norm(docs, axis=1, keepdims=True)).T
    np.testing.assert_array_equal(indices, np.argsort(-cos, axis=1)[:, :10])
    np.testing.assert_allclose(values, np.take_along_axis(cos, indices, 1), atol=1e-5)


@pytest.mark.parametrize("chunk", [1, 7, 50, 500])
def test_chunked_search_over_a_memory_map_ranks_as_the_in_memory_search(tmp_path, chunk):
    """Chunks smaller than k, not dividing the corpus, and bigger than it; k = 10 and k = the whole corpus."""
    rng = np.random.default_rng(1)
    queries, docs = rng.normal(size=(23, 8)), rng.normal(size=(103, 8)) * rng.uniform(0.5, 3, size=(103, 1))
    stored = write_vectors(lambda texts: docs[[int(t) for t in texts]], [str(i) for i in range(len(docs))],
                           tmp_path / "corpus.npy", chunk)
    assert isinstance(stored, np.memmap)
    for k in (10, 200):
        expected_idx, expected_val = exact_search(queries, docs, k, batch_size=8)
        indices, values = chunked_search(queries, stored, k, chunk=chunk, batch_size=8)
        np.testing.assert_array_equal(indices, expected_idx)
        np.testing.assert_allclose(values, expected_val, atol=1e-5)


def test_retrieval_with_vectors_on_disk_scores_as_in_memory_and_leaves_no_file(tmp_path):
    rng = np.random.default_rng(2)
    table = {f"t{i}": rng.normal(size=6) for i in range(60)}
    data = RetrievalSet({f"d{i}": f"t{i}" for i in range(45)}, {f"q{i}": f"t{45 + i}" for i in range(15)},
                        {f"q{i}": {f"d{(7 * i) % 45}": 1, f"d{(3 * i + 1) % 45}": 2} for i in range(15)})

    def encode(texts):
        return np.stack([table[t] for t in texts])
    in_memory = evaluate_retrieval(encode, data)
    on_disk = evaluate_retrieval(encode, data, vectors_dir=tmp_path / "vectors", corpus_chunk=4)
    for name in ("ndcg@10", "mrr@10", "recall@1", "recall@10", "recall@100"):
        assert on_disk[name] == in_memory[name], name
    assert list((tmp_path / "vectors").iterdir()) == []

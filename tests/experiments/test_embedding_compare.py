"""experiments/embedding_compare.py: the reported scores and the bootstrap intervals of their differences."""
from __future__ import annotations

import json

import numpy as np
import pytest

import embedding_compare  # noqa: E402

from needs import require_module  # noqa: E402


def sts_items(rng: np.random.Generator, gold: np.ndarray, noise: float) -> dict[str, list[float]]:
    return {"cosine": (gold + rng.normal(0, noise, len(gold))).tolist(), "gold": gold.tolist()}


def test_sts_difference_is_paired_spearman_difference_with_an_interval_around_it():
    stats = require_module("scipy.stats")
    rng = np.random.default_rng(0)
    gold = rng.uniform(0, 5, 150)
    sharp, blurred = sts_items(rng, gold, 0.5), sts_items(rng, gold, 3.0)
    d = embedding_compare.difference("sts", sharp, blurred, seed=0)
    expected = stats.spearmanr(sharp["cosine"], gold)[0] - stats.spearmanr(blurred["cosine"], gold)[0]
    assert d["difference"] == pytest.approx(expected)
    assert 0 < d["low"] < expected < d["high"]
    assert embedding_compare.averages("sts", sharp)["spearman"] == pytest.approx(stats.spearmanr(sharp["cosine"], gold)[0])
    # the other way round: the same resamples, every difference negated
    swapped = embedding_compare.difference("sts", blurred, sharp, seed=0)
    assert (swapped["low"], swapped["high"]) == pytest.approx((-d["high"], -d["low"]), rel=1e-6)


def test_retrieval_difference_is_the_mean_per_query_difference():
    require_module("scipy")
    rng = np.random.default_rng(1)
    a = {"ndcg@10": rng.uniform(0, 1, 200).tolist(), "mrr@10": rng.uniform(0, 1, 200).tolist()}
    b = {"ndcg@10": (np.asarray(a["ndcg@10"]) - 0.1 + rng.normal(0, 0.05, 200)).tolist(), "mrr@10": a["mrr@10"]}
    d = embedding_compare.difference("retrieval", a, b, seed=0)
    assert d["difference"] == pytest.approx(np.mean(np.asarray(a["ndcg@10"]) - np.asarray(b["ndcg@10"])))
    assert d["low"] < d["difference"] < d["high"] and d["low"] > 0.08 and d["high"] < 0.12
    assert embedding_compare.averages("retrieval", a) == pytest.approx({m: np.mean(v) for m, v in a.items()})


def test_epoch_curve_reads_each_trainers_own_dev_scores(tmp_path):
    bf, st = tmp_path / "bertforge", tmp_path / "sentence-transformers"
    bf.mkdir()
    st.mkdir()
    records = [{"step": 10, "split": "train", "loss": 1.0}, {"step": 359, "split": "eval", "spearman": 0.86},
               {"step": 718, "split": "eval", "spearman": 0.87}]
    (bf / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    history = [{"loss": 3.0, "epoch": 0.5, "step": 180}, {"eval_sts-dev_spearman_cosine": 0.85, "epoch": 1.0, "step": 359},
               {"eval_sts-dev_spearman_cosine": 0.88, "epoch": 2.0, "step": 718}]
    (st / "log_history.json").write_text(json.dumps(history), encoding="utf-8")
    assert embedding_compare.epoch_curve(bf, "bertforge") == [{"epoch": 1.0, "step": 359, "spearman": 0.86},
                                                              {"epoch": 2.0, "step": 718, "spearman": 0.87}]
    assert embedding_compare.epoch_curve(st, "sentence-transformers") == [
        {"epoch": 1.0, "step": 359, "spearman": 0.85}, {"epoch": 2.0, "step": 718, "spearman": 0.88}]

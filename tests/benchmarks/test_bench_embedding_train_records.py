"""bench_embedding_train --records writes the published table's records (the same ids, descriptions and units as
docs/results/bench-embedding-train.json): each side's median CPU ms per part and per step, sentence-transformers'
over bertforge's, and the bound the matrix products set on the step ratio (token-row ratio / their share).

The two trainers' timed steps are stubbed: importing sentence-transformers alone takes longer than this test may.
What is tested is everything around them: the medians, the ratios, the padding count (run for real on a small
pairs file with MiniLM's tokenizer) and the bound made of it. The profiler's share is tested on its own."""
from __future__ import annotations

import json
import statistics

import pytest

from published_records import assert_published

import bench_embedding_train  # noqa: E402

# each side's parts (CPU seconds) in the order its steps are taken: one warm-up step, then three timed ones
STEPS = {"bertforge": [(0.9, 9.0, 9.0, 0.9), (0.002, 1.40, 2.20, 0.070), (0.003, 1.50, 2.10, 0.072),
                       (0.002, 1.45, 2.30, 0.071)],
         "sentence-transformers": [(0.9, 9.0, 9.0, 0.9), (0.006, 1.80, 2.70, 0.070), (0.007, 1.85, 2.60, 0.071),
                                   (0.006, 1.83, 2.66, 0.072)]}
SHARE = 0.74  # the stubbed profiler's share of the matrix products


def fake_side(name: str):
    def make(folder, lr, max_length):
        taken = iter(STEPS[name])

        def step(anchors, positives):
            assert len(anchors) == len(positives) == 16
            return {**dict(zip(bench_embedding_train.PARTS, next(taken))), "tokens": 10}
        return step
    return make


@pytest.mark.slow
def test_records_are_the_published_ones(minilm_dir, tmp_path, monkeypatch):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"anchor": f"question {i} about " + "words " * (i % 7),
                                         "positive": f"paragraph {i}: " + "text " * (3 + 5 * (i % 4))}) + "\n"
                             for i in range(48)), encoding="utf-8")
    monkeypatch.setattr(bench_embedding_train, "start_process", lambda threads: None)  # the test's torch threads
    for name, side in (("bertforge", "bertforge_side"), ("sentence-transformers", "sentence_transformers_side")):
        monkeypatch.setattr(bench_embedding_train, side, fake_side(name))
    profiled = []
    monkeypatch.setattr(bench_embedding_train, "matrix_product_share",
                        lambda step, batches, count: profiled.append(count) or SHARE)
    records = tmp_path / "records"
    assert bench_embedding_train.main(["--pairs", str(pairs), "--model", str(minilm_dir), "--steps", "3",
                                       "--warmup", "1", "--batch-size", "16", "--max-seq-length", "16",
                                       "--count-batches", "2", "--records", str(records)]) == 0
    assert profiled == [1]
    written = assert_published(records, "bench-embedding-train/")
    from bertforge.results_store import read_store
    assert read_store(records).tables == {name: spec for name, spec in read_store().tables.items()
                                          if name.startswith("bench-embedding-train")}
    for rid, record in written.items():  # the medians are over the 3 timed steps; the bound is one computation
        assert (record.threads, record.seeds) == (1, 1 if rid.endswith("/bound") else 3) and str(pairs) in record.data
        assert record.command.startswith("python benchmarks/bench_embedding_train.py --pairs ")
        assert "--records" not in record.command
    timed = {name: steps[1:] for name, steps in STEPS.items()}
    for i, part in enumerate(bench_embedding_train.PARTS):
        base = f"bench-embedding-train/mnrl-step/{part}"
        for name, steps in timed.items():
            assert written[f"{base}/{name}"].value == pytest.approx(1000 * statistics.median(s[i] for s in steps))
        assert written[f"{base}/st-bertforge"].value == pytest.approx(
            written[f"{base}/sentence-transformers"].value / written[f"{base}/bertforge"].value, rel=1e-9)
    step = {name: written[f"bench-embedding-train/mnrl-step/step/{name}"].value for name in timed}
    for name, steps in timed.items():  # the median of the steps' sums, not the sum of the parts' medians
        assert step[name] == pytest.approx(1000 * statistics.median(sum(s) for s in steps))
    assert written["bench-embedding-train/mnrl-step/step/st-bertforge"].value == pytest.approx(
        step["sentence-transformers"] / step["bertforge"], rel=1e-9)
    counted = bench_embedding_train.padded_tokens(pairs, str(minilm_dir), 16, 16, 2)
    assert counted["sentence-transformers"] > counted["bertforge"]  # the texts' lengths differ: padding
    assert written["bench-embedding-train/mnrl-step/bound"].value == pytest.approx(
        counted["sentence-transformers"] / counted["bertforge"] / SHARE, rel=1e-9)


@pytest.mark.slow  # torch.profiler's start-up
def test_the_matrix_products_share_is_their_part_of_the_profiled_operators():
    import torch

    from bertforge.tasks.embedding.data import PairExample
    from bertforge.tasks.embedding.train import PairBatches
    batches = PairBatches([PairExample(f"a{i}", f"p{i}") for i in range(8)], 2, seed=0)
    weight = torch.randn(64, 64, requires_grad=True)
    calls = []

    def products(anchors, positives):
        calls.append(len(anchors))
        (torch.randn(32, 64) @ weight).sum().backward()

    def elementwise(anchors, positives):
        (torch.randn(32, 64) * 2).exp().sum()

    share = bench_embedding_train.matrix_product_share(products, batches, 2)
    assert calls == [2, 2] and 0 < share < 1
    assert bench_embedding_train.matrix_product_share(elementwise, batches, 1) == 0

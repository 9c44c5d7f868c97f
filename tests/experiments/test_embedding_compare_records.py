"""embedding_compare --records writes the published records (the same ids, descriptions and units as
docs/results/embedding-compare.json): per task's run, sentence-transformers' CPU time and wall-clock over
bertforge's, its id naming how long the two trained (16 steps, one epoch, 100 CoSENT steps, two epochs, a seed).

The trainings and the scoring are stubbed (even one step of each trainer, and scoring three models, takes minutes
on a CPU); the stubbed timer answers each trainer's (wall, CPU) seconds. What is tested is what the script makes of
them: the ratios, the ids and descriptions the settings give, and the epoch read from the training pairs."""
from __future__ import annotations

import json

import pytest

from published_records import assert_published

import embedding_compare  # noqa: E402

# (task, bertforge's --max-steps or --epochs) -> each trainer's (wall, CPU) seconds
TIMES = {("retrieval", "16"): {"bertforge": (52.0, 41.0), "sentence-transformers": (57.7, 50.0)},
         ("retrieval", "3"): {"bertforge": (1650.0, 1640.0), "sentence-transformers": (1990.0, 1976.0)},
         ("sts", "100"): {"bertforge": (30.0, 20.0), "sentence-transformers": (33.3, 35.6)},
         ("sts", "2.0"): {"bertforge": (300.0, 290.0), "sentence-transformers": (570.0, 542.3)}}
METRICS = {"retrieval": ("ndcg@10", "mrr@10", "recall@1", "recall@10", "recall@100"),
           "sts": ("spearman", "pearson", "spearman_st_scipy")}


def fake_timer(calls: list):
    def timed_together(commands, logs):
        bertforge = commands["bertforge"]
        task = "retrieval" if "mnrl" in bertforge else "sts"
        length = bertforge[bertforge.index("--max-steps" if "--max-steps" in bertforge else "--epochs") + 1]
        calls.append((task, length, bertforge[bertforge.index("--seed") + 1]))
        return TIMES[(task, length)]
    return timed_together


def fake_scores(task, models, args):
    return {"eval": {name: {m: 0.5 for m in METRICS[task]} for name in models},
            "differences": {"bertforge - sentence-transformers": {"difference": 0.0, "low": -0.01, "high": 0.01}}}


@pytest.fixture
def pairs(tmp_path):
    """A retrieval folder with 50 training pairs (3 batches of 16: one epoch) and an STS-B folder."""
    data, sts = tmp_path / "squad-retrieval", tmp_path / "STS-B"
    data.mkdir()
    sts.mkdir()
    (data / "train.jsonl").write_text("".join(json.dumps({"anchor": f"question {i}", "positive": f"paragraph {i}"})
                                              + "\n" for i in range(50)), encoding="utf-8")
    (sts / "train.tsv").write_text("sentence1\tsentence2\tscore\n" + "".join(
        f"sentence {i}\tanother sentence {i}\t{i % 5}.0\n" for i in range(40)), encoding="utf-8")
    return data, sts


def test_records_are_the_published_ones(pairs, tmp_path, monkeypatch):
    data, sts = pairs
    calls: list[tuple] = []
    monkeypatch.setattr(embedding_compare, "timed_together", fake_timer(calls))
    monkeypatch.setattr(embedding_compare, "evaluate_all", fake_scores)
    monkeypatch.setattr(embedding_compare, "plot", lambda results, path: None)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    records = tmp_path / "records"
    common = ["--data", str(data), "--sts", str(sts), "--model", str(tmp_path / "untuned"), "--batch-size", "16",
              "--lr", "5e-5"]
    assert embedding_compare.main([*common, "--out", str(tmp_path / "steps"), "--steps", "16", "--sts-steps", "100",
                                   "--records", str(records)]) == 0
    sts_b = ["--tasks", "sts", "--sts-epochs", "2", "--epoch-eval", "--weight-decay", "0", "--batch-sampler", "random",
             "--pin", "0,1"]
    assert embedding_compare.main([*common, "--out", str(tmp_path / "epoch"), "--tasks", "retrieval", "--steps", "3",
                                   "--pin", "0,1", "--records", str(records)]) == 0
    assert embedding_compare.main([*common, "--out", str(tmp_path / "stsb"), *sts_b, "--records", str(records)]) == 0
    seed1 = tmp_path / "seed1"  # only its CPU-time ratio is published
    assert embedding_compare.main([*common, "--out", str(tmp_path / "stsb1"), *sts_b, "--seed", "1",
                                   "--records", str(seed1)]) == 0
    assert calls == [("retrieval", "16", "0"), ("sts", "100", "0"), ("retrieval", "3", "0"), ("sts", "2.0", "0"),
                     ("sts", "2.0", "1")]
    from bertforge.results_store import read_store, write_records
    again = read_store(seed1).records  # the seed-1 run measures both ratios; the docs cite its CPU-time one
    assert set(again) == {"embedding-compare/sts-2ep-seed1/cpu-ratio", "embedding-compare/sts-2ep-seed1/wall-ratio"}
    write_records("embedding-compare", [again["embedding-compare/sts-2ep-seed1/cpu-ratio"]], records)
    written = assert_published(records, "embedding-compare/")
    for record in written.values():
        assert (record.seeds, record.threads) == (1, 1) and record.command.startswith("OMP_NUM_THREADS=1 python ")
        assert "--records" not in record.command
    for key, (task, length) in {"retrieval-16": ("retrieval", "16"), "retrieval-epoch": ("retrieval", "3"),
                                "sts-100": ("sts", "100"), "sts-2ep": ("sts", "2.0")}.items():
        times = TIMES[(task, length)]
        for i, kind in enumerate(("wall", "cpu")):
            assert written[f"embedding-compare/{key}/{kind}-ratio"].value == pytest.approx(
                times["sentence-transformers"][i] / times["bertforge"][i], rel=1e-9)
    assert written["embedding-compare/sts-2ep-seed1/cpu-ratio"].value == pytest.approx(542.3 / 290.0, rel=1e-9)
    epoch = written["embedding-compare/retrieval-epoch/cpu-ratio"]
    assert epoch.data.endswith("one epoch (3 steps of 16)") and "1,976.0 against bertforge 1,640.0 CPU-s" in epoch.note
    assert written["embedding-compare/sts-2ep/cpu-ratio"].data.endswith(
        "(CoSENT), 2 epochs (4 steps of 16), STS-B dev after each epoch")  # 40 pairs: 2 batches of 16 an epoch

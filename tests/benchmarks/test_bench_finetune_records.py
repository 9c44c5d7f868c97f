"""bench_finetune --records writes the published table's records (the same ids, descriptions and units as
docs/results/bench-finetune.json) and the same table spec: each side's median train examples/s and examples per
CPU-second, and the speed-ups, each the two sides' medians divided.

The two sides' training runs are stubbed: the published run fine-tunes all-MiniLM-L6-v2 on 1,000 SST-2 sentences
for each of 4 seeds (minutes), and even one seed of the smallest run evaluates the whole dev set on both sides. What
is tested is everything around them: the real SST-2 subset the script draws, and the records' ids, descriptions,
units, medians and ratios, the table, and the data they name."""
from __future__ import annotations

import json
import statistics

from pathlib import Path

import pytest

from published_records import assert_published

import bench_finetune  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]

# seed -> (train seconds, train CPU seconds) of the stubbed runs, per side
SECONDS = {"bertforge": {42: (14.0, 15.0), 43: (13.5, 15.5), 44: (14.5, 14.8), 45: (13.0, 16.0)},
           "transformers": {42: (40.0, 40.5), 43: (39.0, 39.2), 44: (41.0, 41.5), 45: (38.0, 38.9)}}


def stub_run(side: str):
    def run(spec, data, args, seed, *tmp) -> dict:
        assert len(data.train) == 1000
        train, cpu = SECONDS[side][seed]
        return {"metrics": {"accuracy": 0.5}, "train_seconds": train, "eval_seconds": 1.0, "train_cpu_seconds": cpu,
                "encode_seconds": 0.1, "steps": 32, "wall_seconds": train + 2}
    return run


def test_records_are_the_published_ones(shared_data, minilm_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(bench_finetune, "run_bertforge", stub_run("bertforge"))
    monkeypatch.setattr(bench_finetune, "run_hf", stub_run("transformers"))
    monkeypatch.setattr(bench_finetune, "machine_info", dict)  # its library versions import transformers (seconds)
    bench_finetune.main(["--task", "sst2", "--data", str(shared_data), "--max-train-samples", "1000", "--epochs", "1",
                         "--seeds", "42,43,44,45", "--threads", "1", "--records", str(tmp_path)])
    written = assert_published(tmp_path, "bench-finetune/")
    for record in written.values():
        assert (record.seeds, record.threads) == (4, 1)
        assert record.data == "1,000 seeded SST-2 train sentences of ../shared/data/glue/SST-2"
        assert "--records" not in record.command and str(tmp_path) not in record.command
    rate = {side: statistics.median(1000 / train for train, _ in by_seed.values()) for side, by_seed in SECONDS.items()}
    per_cpu = {side: statistics.median(1000 / cpu for _, cpu in by_seed.values()) for side, by_seed in SECONDS.items()}
    for side in SECONDS:
        base = f"bench-finetune/sst2/{side}"
        assert written[f"{base}/train-examples-s-median"].value == pytest.approx(rate[side], rel=1e-12)
        assert written[f"{base}/examples-per-cpu-second"].value == pytest.approx(per_cpu[side], rel=1e-12)
        assert written[f"{base}/vs-transformers"].value == pytest.approx(rate[side] / rate["transformers"], rel=1e-12)
    assert written["bench-finetune/sst2/bertforge/vs-transformers-2"].value == pytest.approx(
        per_cpu["bertforge"] / per_cpu["transformers"], rel=1e-12)
    published = json.loads((REPO_ROOT / "docs" / "results" / "bench-finetune.json").read_text())["tables"]
    assert json.loads((tmp_path / "bench-finetune.json").read_text())["tables"] == published


def test_another_model_and_all_examples_are_named(tmp_path):
    from types import SimpleNamespace

    from bertforge.tasks.registry import get_task
    spec = get_task("mrpc")
    args = SimpleNamespace(model=tmp_path / "My-Model", max_train_samples=None, data=tmp_path)
    (tmp_path / "glue" / "MRPC").mkdir(parents=True)
    (tmp_path / "glue" / "MRPC" / "train.tsv").write_text("")
    data = SimpleNamespace(train=[SimpleNamespace(text="a", text_pair="b")] * 3)
    assert bench_finetune._record_base(spec, args) == "bench-finetune/mrpc-my-model"
    assert bench_finetune.describe_data(spec, data, args) == f"the 3 MRPC train sentence pairs of {tmp_path}/glue/MRPC"


# results-finetuning: one seed, the published MRPC run and SST-2's 8,000; (train s, train CPU-s, padding share)
ONE_SEED = {"mrpc": {"bertforge": (1105.0, 597.0, 0.021), "transformers": (1303.0, 911.0, 0.34)},
            "sst2": {"bertforge": (365.0, 250.0, 0.05), "transformers": (1064.0, 700.0, 0.6)}}


def stub_one_seed(task: str, side: str, n_train: int):
    def run(spec, data, args, seed, *tmp) -> dict:
        assert (len(data.train), seed) == (n_train, 42)
        train, cpu, padding = ONE_SEED[task][side]
        metrics = {"accuracy": 0.75 if side == "bertforge" else 0.74, "f1": 0.83}
        if task == "sst2":
            metrics = {"accuracy": 0.84}
        return {"metrics": metrics, "train_seconds": train, "eval_seconds": 1.0, "train_cpu_seconds": cpu,
                "encode_seconds": 0.1, "steps": 345 if task == "mrpc" else 750, "wall_seconds": train + 2,
                "padding_share": padding}
    return run


def test_results_finetuning_records_are_the_published_ones(shared_data, minilm_dir, tmp_path, monkeypatch):
    """--records-group results-finetuning: the MRPC run and the SST-2 8,000 run together write the published table's
    records (MRPC on the CPU clock with the padding shares, SST-2 on the wall clock) and its spec; bench-finetune's
    records are not touched."""
    monkeypatch.setattr(bench_finetune, "machine_info", dict)
    for task, n_train, extra in (("mrpc", 3668, []), ("sst2", 8000, ["--max-train-samples", "8000"])):
        monkeypatch.setattr(bench_finetune, "run_bertforge", stub_one_seed(task, "bertforge", n_train))
        monkeypatch.setattr(bench_finetune, "run_hf", stub_one_seed(task, "transformers", n_train))
        bench_finetune.main(["--task", task, "--data", str(shared_data), "--epochs", "3", "--seeds", "42", *extra,
                             "--records", str(tmp_path), "--records-group", "results-finetuning"])
    written = assert_published(tmp_path, "results-finetuning/finetune-vs-transformers/",
                               "results-finetuning/vs-transformers/")
    assert not (tmp_path / "bench-finetune.json").exists()
    base = "results-finetuning/finetune-vs-transformers"
    per_cpu = {side: 3668 * 3 / cpu for side, (_, cpu, _) in ONE_SEED["mrpc"].items()}
    per_s = {side: 8000 * 3 / train for side, (train, _, _) in ONE_SEED["sst2"].items()}
    for side, part in (("bertforge", "mrpc"), ("transformers", "mrpc-2")):
        assert written[f"{base}/{part}/train-examples-per-s"].value == pytest.approx(per_cpu[side], rel=1e-12)
        assert written[f"{base}/{part}/train-cpu-s"].value == ONE_SEED["mrpc"][side][1]
        assert written[f"{base}/{part}/train-s"].value == ONE_SEED["mrpc"][side][0]
        assert written[f"results-finetuning/vs-transformers/mrpc-padding-{side}"].value == pytest.approx(
            100 * ONE_SEED["mrpc"][side][2])
    for side, part in (("bertforge", "sst-2-8k"), ("transformers", "sst-2-8k-2")):
        assert written[f"{base}/{part}/train-examples-per-s"].value == pytest.approx(per_s[side], rel=1e-12)
    assert written[f"{base}/mrpc/dev-accuracy"].value == pytest.approx(75.0)
    assert written[f"{base}/mrpc-2/dev-f1"].value == pytest.approx(83.0)
    assert written["results-finetuning/vs-transformers/mrpc-cpu-ratio"].value == pytest.approx(
        per_cpu["bertforge"] / per_cpu["transformers"], rel=1e-12)
    assert written["results-finetuning/vs-transformers/sst2-wall-ratio"].value == pytest.approx(
        per_s["bertforge"] / per_s["transformers"], rel=1e-12)
    assert written[f"{base}/sst-2-8k/steps"].value == 750
    assert all(r.data == "the 3,668 MRPC train sentence pairs of ../shared/data/glue/MRPC"
               for rid, r in written.items() if "/mrpc" in rid)
    published = json.loads((REPO_ROOT / "docs" / "results" / "results-finetuning.json").read_text())["tables"]
    tables = json.loads((tmp_path / "results-finetuning.json").read_text())["tables"]
    assert tables == {"results-finetune-vs-transformers": published["results-finetune-vs-transformers"]}


def test_results_finetuning_takes_only_its_tasks(tmp_path):
    with pytest.raises(SystemExit):
        bench_finetune.main(["--task", "cola", "--records", str(tmp_path), "--records-group", "results-finetuning"])


def test_padding_share_counts_each_batch_padded_to_its_longest():
    # batches [0, 1] (lengths 2 and 4: 2 pads of 8) and [2] (5: none): 2 of 13 tokens
    assert bench_finetune.padding_share([2, 4, 5], [[0, 1], [2]]) == pytest.approx(2 / 13)
    assert bench_finetune.padding_share([3, 3], [[0, 1]]) == 0

"""bench_model --records writes the published table's records (the same ids, descriptions and units as
docs/results/bench-model.json) and its table: per workload both sides' real tokens per second, the speed-up (the
two medians divided, so also the two throughputs divided) and bertforge's useful utilisation.

The timed turns are stubbed: even `mini` at batch 2 and one repeat takes half a minute of CPU (the 2048^3 GEMM
peak is timed with every turn). What is tested is everything around the timing: the batches read from the real
data, both models built from one state dict and checked equal, the records, their ratios and the table."""
from __future__ import annotations

import re
import statistics

import pytest

from published_records import assert_published

import bench_model  # noqa: E402

WORKLOADS = ("train-pairs", "train-sst2", "infer-pairs", "infer-sst2")  # the order run_config times them in


def stub_interleave(calls: list[dict]):
    """`interleave` returning made-up seconds (different for every workload and repeat) without running anything."""
    def interleave(candidates, repeats, warmup=1, log=None):
        assert set(candidates) == {"ours", "hf", "gemm"}
        k = len(calls) + 1
        times = {"ours": [0.002 * k + 0.0001 * r for r in range(repeats)],
                 "hf": [0.005 * k + 0.0003 * (repeats - r) for r in range(repeats)],
                 "gemm": [0.40 + 0.02 * r for r in range(repeats)]}
        calls.append(times)
        return times
    return interleave


def batch_free(table: dict) -> dict:
    """A table spec with the training rows' batch size and padding left out."""
    return {**table, "rows": [[re.sub(r" \(\d+(?: x \d+)?, \d+ % padding\)", "", cell) for cell in row]
                              for row in table["rows"]]}


@pytest.mark.slow
def test_records_are_the_published_ones(shared_data, minilm_dir, tmp_path, monkeypatch):
    from bertforge.results_store import read_store
    calls: list[dict] = []
    monkeypatch.setattr(bench_model, "interleave", stub_interleave(calls))
    bench_model.main(["--configs", "mini", "--threads", "1", "--repeats", "3", "--batch-size", "2",
                      "--shared-data", str(shared_data), "--vocab", str(minilm_dir), "--records", str(tmp_path)])
    assert len(calls) == len(WORKLOADS)
    written = assert_published(tmp_path, "bench-model/")
    for record in written.values():
        assert (record.threads, record.seeds) == (1, 3)
        assert record.data.startswith("pre-training pairs (2 x 1 batches, ")
        assert record.data.endswith(" of ../shared/data/glue/SST-2/train.tsv")
        assert record.command.startswith("python benchmarks/bench_model.py --configs mini --threads 1")
        assert "--records" not in record.command and str(tmp_path) not in record.command
    for workload, times in zip(WORKLOADS, calls):
        base = f"bench-model/mini/{workload}"
        ours, hf = written[f"{base}/bertforge-tok-s"].value, written[f"{base}/transformers-tok-s"].value
        speed_up = written[f"{base}/vs-transformers"].value
        assert speed_up == pytest.approx(ours / hf, rel=1e-9)
        assert speed_up == pytest.approx(statistics.median(times["hf"]) / statistics.median(times["ours"]), rel=1e-9)
        # the utilisation is a percentage of the GEMM peak: back to useful FLOP per real token, which for a
        # forward pass is about 2 per weight of the encoder's layers (the attention grid and the pooler add a
        # little), and for a training step about three times that and more
        peak = bench_model.peak_flops(statistics.median(times["gemm"]))
        per_token = written[f"{base}/useful-util-ours"].value / 100 * peak / ours
        forward = 2 * 4 * 12 * 256 ** 2  # mini: 4 layers, H 256, intermediate 4H
        assert (1.0 < per_token / forward < 1.3) if workload.startswith("infer") else per_token / forward > 3
    # the table: the published one, its training rows naming this run's batches and their padding (as the data says)
    tables = read_store(tmp_path).tables
    assert set(tables) == {"bench-model-mini"}
    assert batch_free(tables["bench-model-mini"]) == batch_free(read_store().tables["bench-model-mini"])
    data = written["bench-model/mini/train-pairs/bertforge-tok-s"].data
    padding = re.findall(r"\(2 x 1 batches, (\d+) % padding\)", data)
    assert [row[1] for row in tables["bench-model-mini"]["rows"]] == [
        f"train: pre-training pairs (2, {padding[0]} % padding)", f"train: SST-2 sentences (2, {padding[1]} % padding)",
        "inference: pre-training pairs", "inference: SST-2 sentences"]

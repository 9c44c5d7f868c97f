"""bench_precision --records writes the published table's records (the same ids, descriptions and units as
docs/results/bench-precision.json), each bf16 speed-up the fp32 median s/step over the bf16 one.

The timed `bertforge pretrain` runs are stubbed: the script fixes `mini` at batch 32, and a bf16 run of even the
fewest steps it can time (15) takes minutes on a CPU without native bf16. What is tested is everything after the
timing: the records' ids, descriptions, units, medians and ratios, and the corpus the prepared folder names."""
from __future__ import annotations

import json
import statistics

import pytest

import bench_precision  # noqa: E402

# (recipe, precision) -> s/step of the rounds, as the stubbed runs return them in turn
TIMES = {("bert", "fp32"): [0.70, 0.69, 0.72], ("bert", "bf16"): [0.48, 0.50, 0.47],
         ("fast", "fp32"): [0.86, 0.87, 0.90], ("fast", "bf16"): [0.60, 0.59, 0.61]}


def test_records_are_the_published_ones(tmp_path, monkeypatch):
    from bertforge.results_store import read_store
    prepared = tmp_path / "prepared"
    prepared.mkdir()
    (prepared / "manifest.json").write_text(json.dumps({"inputs": [{"path": "wiki.txt", "kind": "text"}]}))
    calls: list[tuple] = []

    def stub(data, recipe, precision, steps, threads, out):
        calls.append((data, recipe, precision, steps, threads))
        return TIMES[(recipe, precision)][sum(c[1:3] == (recipe, precision) for c in calls) - 1]

    monkeypatch.setattr(bench_precision, "seconds_per_step", stub)
    bench_precision.main(["--data", str(prepared), "--steps", "15", "--rounds", "3", "--threads", "1",
                          "--records", str(tmp_path / "records")])
    assert len(calls) == 12 and {c[3:] for c in calls} == {(15, 1)}
    written = read_store(tmp_path / "records").records
    published = {rid: r for rid, r in read_store().records.items() if rid.startswith("bench-precision/")}
    assert set(written) == set(published)
    for rid, record in written.items():
        assert (record.what, record.unit, record.digits) == (published[rid].what, published[rid].unit,
                                                             published[rid].digits)
        assert (record.threads, record.seeds, record.data) == (1, 3, f"wiki.txt prepared into {prepared}")
    for recipe in ("bert", "fast"):
        base = f"bench-precision/mini/{recipe}"
        fp32, bf16 = written[f"{base}/fp32-s-step"].value, written[f"{base}/bf16-s-step"].value
        assert (fp32, bf16) == (statistics.median(TIMES[(recipe, "fp32")]), statistics.median(TIMES[(recipe, "bf16")]))
        assert written[f"{base}/bf16-speed-up"].value == pytest.approx(fp32 / bf16, rel=1e-9)


def test_the_data_of_a_folder_without_a_manifest(tmp_path):
    assert bench_precision.corpus_data(str(tmp_path)) == f"the corpus prepared into {tmp_path}"

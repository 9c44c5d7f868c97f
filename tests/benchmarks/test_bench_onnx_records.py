"""bench_onnx --records writes the published table's records (the same ids, descriptions and units as
docs/results/bench-onnx.json): each side's median call in CPU ms and the paired speed ratios.

The paired ratios are the median of the per-call ratios, not the two medians divided, so the test holds each to
its own spread (the per-call ratios' quartiles) rather than to a division."""
from __future__ import annotations

import pytest

from needs import require_module

import bench_onnx  # noqa: E402

require_module("onnxruntime")
require_module("onnx")
require_module("transformers")


@pytest.mark.slow
def test_records_are_the_published_ones(shared_data, minilm_dir, tmp_path, capsys):
    from bertforge.results_store import read_store
    argv = ["--threads", "1", "--repeats", "1", "--sentences", "32", "--batches1", "2", "--batches32", "1",
            "--records", str(tmp_path)]
    assert bench_onnx.main(argv) == 0
    written = read_store(tmp_path).records
    published = {rid: r for rid, r in read_store().records.items() if rid.startswith("bench-onnx/")}
    assert set(written) == set(published)
    for rid, record in written.items():
        assert (record.what, record.unit) == (published[rid].what, published[rid].unit)
        assert (record.digits, record.seeds) == (published[rid].digits, 1)
        if record.unit == "x":
            assert record.spread[0] <= record.value <= record.spread[1]
        else:
            assert record.value > 0 and record.spread is None
    assert "pooled: latency, batch 1 (ms, median call)" in capsys.readouterr().out  # the printout is unchanged

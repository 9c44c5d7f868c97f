"""bench_tokenizer --records writes the published table's records: the same ids and descriptions as
docs/results/bench-tokenizer.json, each ratio the two tokenizers' lines/s divided."""
from __future__ import annotations

import pytest

from needs import require_module

import bench_tokenizer  # noqa: E402

require_module("transformers")


def test_records_are_the_published_ones(shared_data, tmp_path):
    from bertforge.results_store import read_store
    argv = ["--shared-data", str(shared_data), "--lines", "200", "--repeats", "5", "--records", str(tmp_path)]
    assert bench_tokenizer.main(argv) == 0
    written = read_store(tmp_path).records
    published = {rid: r for rid, r in read_store().records.items() if rid.startswith("bench-tokenizer/")}
    assert set(written) == set(published)
    for rid, record in written.items():
        assert record.what == published[rid].what and record.unit == published[rid].unit
        if rid.endswith("/ratio"):
            base = rid.removesuffix("/ratio")
            ours, hf = written[f"{base}/bertforge-lines-s"].value, written[f"{base}/hf-fast-lines-s"].value
            assert record.value == pytest.approx(ours / hf, rel=1e-9)
            assert record.spread[0] <= record.value <= record.spread[1]

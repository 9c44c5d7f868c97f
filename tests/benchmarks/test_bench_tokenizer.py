"""bench_tokenizer --records writes the published table's records: the same ids and descriptions as
docs/results/bench-tokenizer.json, each ratio the two tokenizers' lines/s divided."""
from __future__ import annotations

import pytest

from needs import require_module
from published_records import assert_published

import bench_tokenizer  # noqa: E402

require_module("transformers")


def test_records_are_the_published_ones(shared_data, tmp_path):
    argv = ["--shared-data", str(shared_data), "--lines", "200", "--repeats", "5", "--records", str(tmp_path)]
    assert bench_tokenizer.main(argv) == 0
    written = assert_published(tmp_path, "bench-tokenizer/")
    for rid, record in written.items():
        if rid.endswith("/ratio"):
            base = rid.removesuffix("/ratio")
            ours, hf = written[f"{base}/bertforge-lines-s"].value, written[f"{base}/hf-fast-lines-s"].value
            assert record.value == pytest.approx(ours / hf, rel=1e-9)
            assert record.spread[0] <= record.value <= record.spread[1]

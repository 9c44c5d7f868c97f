"""bench_inference --records writes the published table's records (the same ids, descriptions and units as
docs/results/bench-inference.json), each "vs transformers" its baseline's median seconds over the candidate's."""
from __future__ import annotations

import pytest

from published_records import assert_published

from needs import require_module

import bench_inference  # noqa: E402

require_module("transformers")


@pytest.mark.slow
def test_records_are_the_published_ones(shared_data, minilm_dir, tmp_path):
    bench_inference.main(["--data", str(shared_data), "--n", "8", "--batch-size", "4", "--repeats", "1",
                          "--features", "--records", str(tmp_path)])
    written = assert_published(tmp_path, "bench-inference/")
    for record in written.values():
        assert record.threads == 1 and record.data == "the first 8 SST-2 dev sentences of ../shared/data/glue/SST-2"
    base = "bench-inference/sst2-dev"
    for rid in written:
        if rid.endswith("/vs-transformers"):
            candidate = rid.removesuffix("/vs-transformers")
            baseline = f"{base}/transformers-features" if "features" in candidate else f"{base}/transformers"
            assert written[rid].value == pytest.approx(
                written[f"{baseline}/median-s"].value / written[f"{candidate}/median-s"].value, rel=1e-9)
            assert written[f"{candidate}/examples-s"].value == pytest.approx(8 / written[f"{candidate}/median-s"].value)

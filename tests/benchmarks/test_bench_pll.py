"""bench_pll --records writes the published table's records for its thread count (the same ids, descriptions
and units as docs/results/bench-pll.json), each speed-up the two medians divided."""
from __future__ import annotations

import pytest

from needs import require_module

import bench_pll  # noqa: E402

require_module("transformers")


@pytest.mark.slow
def test_records_are_the_published_ones(shared_data, tmp_path):
    from bertforge.results_store import read_store
    corpus = shared_data / "corpus/wikipedia-en-2018/wiki_en.txt.xz"
    bench_pll.main(["--corpus", str(corpus), "--sentences", "2", "--repeats", "1", "--threads", "1", "--bf16",
                    "--records", str(tmp_path)])
    written = read_store(tmp_path).records
    published = {rid: r for rid, r in read_store().records.items()
                 if rid.startswith(("bench-pll/minilm/1t/", "bench-pll/bf16/"))}
    assert set(written) == set(published)
    for rid, record in written.items():
        assert (record.what, record.unit) == (published[rid].what, published[rid].unit)
    base = "bench-pll/minilm/1t"
    assert written[f"{base}/vs-transformers-loop"].value == pytest.approx(
        written[f"{base}/transformers-loop"].value / written[f"{base}/batched-fp32"].value)

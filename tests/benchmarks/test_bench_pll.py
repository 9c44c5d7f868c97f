"""bench_pll --records writes the published table's records for its thread count (the same ids, descriptions
and units as docs/results/bench-pll.json), each speed-up the two medians divided."""
from __future__ import annotations

import pytest

from needs import require_module
from published_records import assert_published

import bench_pll  # noqa: E402

require_module("transformers")


@pytest.mark.slow
def test_records_are_the_published_ones(shared_data, tmp_path):
    corpus = shared_data / "corpus/wikipedia-en-2018/wiki_en.txt.xz"
    import torch
    try:
        bench_pll.main(["--corpus", str(corpus), "--sentences", "2", "--repeats", "1", "--threads", "1", "--bf16",
                        "--records", str(tmp_path)])
    finally:  # the script turns gradients off for its whole process
        torch.set_grad_enabled(True)
    written = assert_published(tmp_path, "bench-pll/minilm/1t/", "bench-pll/bf16/")
    base = "bench-pll/minilm/1t"
    assert written[f"{base}/vs-transformers-loop"].value == pytest.approx(
        written[f"{base}/transformers-loop"].value / written[f"{base}/batched-fp32"].value)

"""bench_allocator --records writes the published tables' records (the same ids, descriptions and units as
docs/results/bench-allocator.json): per dropout both kinds' median step, the speed-up (the two medians
divided) and the paired speed-up (the median of the turns' own ratios); with --memory, each kind of process's
peak resident set and median step."""
from __future__ import annotations

import pytest

from published_records import assert_published

import bench_allocator  # noqa: E402


@pytest.mark.slow
def test_records_are_the_published_ones(shared_data, minilm_dir, tmp_path):  # the children read both
    bench_allocator.main(["--repeats", "1", "--steps", "1", "--batch-size", "2", "--threads", "1",
                          "--records", str(tmp_path)])
    written = assert_published(tmp_path, "bench-allocator/mini/")
    for record in written.values():
        assert record.data == "2 pre-training pairs of ../shared/data/corpus/wikipedia-en-2018/wiki_en.txt.xz"
    for dropout in ("0-1", "0"):
        base = f"bench-allocator/mini/{dropout}"
        glibc, ours = written[f"{base}/step-glibc-as-it-comes"].value, written[f"{base}/step-bertforge"].value
        assert written[f"{base}/speed-up"].value == pytest.approx(glibc / ours, rel=1e-9)
        assert written[f"{base}/paired"].value == pytest.approx(glibc / ours, rel=1e-9)  # one turn: one ratio


@pytest.mark.slow
def test_memory_records_are_the_published_ones(shared_data, minilm_dir, tmp_path):
    bench_allocator.main(["--memory", "ltr", "--repeats", "1", "--steps", "1", "--threads", "1", "--corpus-mb", "0.3",
                          "--records", str(tmp_path)])
    written = assert_published(tmp_path, "bench-allocator/memory-ltr/")
    for record in written.values():
        assert record.seeds == 1  # one process of each kind

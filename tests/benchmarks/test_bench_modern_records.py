"""bench_modern --records writes the published table's records (the same ids, descriptions and units as
docs/results/bench-modern.json): per variant its median step, its time vs BERT's (the two medians divided),
its useful GFLOP and its useful utilisation."""
from __future__ import annotations

import pytest

from published_records import assert_published

import bench_modern  # noqa: E402


@pytest.mark.slow
def test_records_are_the_published_ones(shared_data, minilm_dir, tmp_path):
    bench_modern.main(["--config", "mini", "--batch-size", "2", "--batches", "1", "--repeats", "1", "--threads", "1",
                       "--dropout", "0", "--shared-data", str(shared_data), "--records", str(tmp_path)])
    written = assert_published(tmp_path, "bench-modern/")
    for record in written.values():
        assert (record.threads, record.seeds) == (1, 1) and record.data.startswith("2 sentence pairs of ")
    bert = written["bench-modern/mini/bert/step-s-median"].value
    for rid, record in written.items():
        if rid.endswith("/time-vs-bert"):
            step = written[rid.removesuffix("time-vs-bert") + "step-s-median"].value
            assert record.value == pytest.approx(step / bert, rel=1e-9)
        if rid.endswith("/useful-utilisation"):
            assert 0 < record.value < 100


def test_another_dropout_goes_under_ids_of_its_own():
    import argparse
    from bertforge.results_store import Record
    args = argparse.Namespace(config="mini", dropout=0.1, repeats=5, threads=1,
                              shared_data=bench_modern.default_shared_data())
    records = bench_modern.make_records({"BERT": (1.0, 1.0, 90.0, 70.0)}, 64, args)
    assert all(isinstance(r, Record) and r.id.startswith("bench-modern/mini-dropout-0-1/bert/") for r in records)
    assert records[0].data == "64 sentence pairs of ../shared/data/corpus/wikipedia-en-2018/wiki_en.txt.xz"

"""bench_step_parts --records writes the published tables' records (the same ids, descriptions and units as
docs/results/bench-step.json) and both tables: per op PyTorch's and bertforge's milliseconds and the speed-up (the
two medians divided); per kind of batches each variant's seconds per turn and its speed-up over "before".

The timed turns are stubbed: the ops have the published shapes whatever the settings (the vocabulary decoder alone
is a fifth of a second a call), so even the smallest run takes twenty seconds of CPU. What is tested is everything
around the timing: both kinds of batches read from the real data, a model per variant, the records, their ratios
and the tables."""
from __future__ import annotations

import re
import statistics

import pytest

from published_records import assert_published

import bench_step_parts  # noqa: E402

OPS = ("dropout-attention", "dropout-hidden", "attention", "decoder")  # the order time_ops times them in
VARIANTS = ("before", "dropout", "groups", "tiled", "rows")             # bench_step_parts.VARIANTS' id slugs


def stub_interleave(calls: list[dict]):
    """`interleave` returning made-up seconds (different for every call, candidate and repeat), running nothing."""
    def interleave(candidates, repeats, warmup=1, log=None):
        k = len(calls) + 1
        times = {name: [0.01 * k * (i + 2) + 0.001 * ((r * (i + 1)) % repeats) for r in range(repeats)]
                 for i, name in enumerate(candidates)}
        calls.append(times)
        return times
    return interleave


def fill_free(table: dict) -> dict:
    """A table spec with the kinds of batches' share of real tokens left out."""
    def cell(text: str) -> str:
        return re.sub(r" \(\d+ % real tokens\)", "", re.sub(r", \d+ % real tokens\)", ")", text))
    return {**table, "rows": [[cell(text) for text in row] for row in table["rows"]]}


@pytest.mark.slow
def test_records_are_the_published_ones(shared_data, minilm_dir, train_data, tmp_path, monkeypatch):
    from bertforge.results_store import read_store
    calls: list[dict] = []
    monkeypatch.setattr(bench_step_parts, "interleave", stub_interleave(calls))
    bench_step_parts.main(["--data", str(train_data), "--batch-size", "2", "--batches", "1", "--repeats", "3",
                           "--threads", "1", "--shared-data", str(shared_data), "--vocab", str(minilm_dir),
                           "--records", str(tmp_path)])
    assert [len(times) for times in calls] == [2] * len(OPS) + [len(VARIANTS)] * 2
    written = assert_published(tmp_path, "bench-step/")
    for record in written.values():
        assert (record.threads, record.seeds) == (1, 3)
        assert record.command.startswith("python benchmarks/bench_step_parts.py --data ")
        assert "--records" not in record.command and str(tmp_path) not in record.command
    for slug, times in zip(OPS, calls):
        base = f"bench-step/ops/{slug}"
        pytorch, ours = (statistics.median(seconds) * 1e3 for seconds in times.values())  # (reference, bertforge)
        assert (written[f"{base}/pytorch-ms"].value, written[f"{base}/bertforge-ms"].value) == (pytorch, ours)
        assert written[f"{base}/speed-up"].value == pytest.approx(pytorch / ours, rel=1e-9)
    for kind, times in zip(("pretrain", "pairs"), calls[len(OPS):]):
        before = written[f"bench-step/cumulative/{kind}-before/s-per-turn"].value
        assert written[f"bench-step/cumulative/{kind}-before/vs-before"].value == 1.0
        for slug, seconds in zip(VARIANTS, times.values()):
            base = f"bench-step/cumulative/{kind}-{slug}"
            assert written[f"{base}/s-per-turn"].value == statistics.median(seconds)
            assert written[f"{base}/vs-before"].value == pytest.approx(before / statistics.median(seconds), rel=1e-9)
    assert {written[f"bench-step/ops/{slug}/speed-up"].data for slug in OPS} == {"random tensors of the shapes named"}
    fills = {}
    prepared = f"{train_data.parent / 'wiki.txt'} prepared into {train_data}"  # the fixture's text and folder
    wiki = "../shared/data/corpus/wikipedia-en-2018/wiki_en.txt.xz"
    for kind, batches, source in (("pretrain", "pre-training batches (segment pairs, ", prepared),
                                  ("pairs", "bench_model's sentence pairs (", wiki)):
        data = {written[f"bench-step/cumulative/{kind}-{slug}/{column}"].data for slug in VARIANTS
                for column in ("s-per-turn", "vs-before")}
        assert len(data) == 1
        pattern = re.escape(batches) + r"2 x 1 batches, (\d+) % real tokens\) of " + re.escape(source)
        found = re.fullmatch(pattern, data.pop())
        assert found, pattern
        fills[kind] = found.group(1)
    # the tables: the published ones, the kinds of batches with this run's share of real tokens (as the data says)
    tables, published = read_store(tmp_path).tables, read_store().tables
    assert set(tables) == {"bench-step-ops", "bench-step-cumulative"}
    assert tables["bench-step-ops"] == published["bench-step-ops"]
    assert fill_free(tables["bench-step-cumulative"]) == fill_free(published["bench-step-cumulative"])
    assert [row[0] for row in tables["bench-step-cumulative"]["rows"] if row[0]] == [
        f"pre-training batches (segment pairs, {fills['pretrain']} % real tokens)",
        f"bench_model's sentence pairs ({fills['pairs']} % real tokens)"]

"""bench_pretrain --records writes the published tables' records (the same ids, descriptions and units as
docs/results/bench-pretrain.json and docs/results/bench-ttq.json) and the same table specs.

The published runs are minutes to hours of training (`mini` at batch 32 in fp32 and bf16; a 20-minute race per
loop), so the timed parts are stubbed in the first two tests: `measure_config` (a config's interleaved repeats)
and `time_to_quality` (the race) return planted numbers, and what is tested is everything after them: the
records' ids, descriptions, units, ratios and shares, the tables and the data they name. The third test runs the
real throughput measurement at its smallest, to hold the stub to the shape the real one returns."""
from __future__ import annotations

import json
from types import SimpleNamespace

from pathlib import Path

import pytest

from published_records import assert_published

import bench_pretrain  # noqa: E402
import common  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]

# (loop, precision) -> (tokens/s, useful FLOP/s) a stubbed config reports; the GEMM peak in FLOP/s
RATES = {("bertforge", "fp32"): (5000.0, 121e9), ("transformers", "fp32"): (1000.0, 25e9),
         ("bertforge", "bf16"): (7500.0, 180e9), ("transformers", "bf16"): (1250.0, 33e9)}
PEAK = 182e9
WIKI = "../shared/data/corpus/wikipedia-en-2018/wiki_en.txt.xz"


@pytest.fixture(autouse=True)
def no_versions_line(monkeypatch):
    """The stubbed runs skip the printed machine line, whose library versions import transformers (seconds)."""
    monkeypatch.setattr(bench_pretrain, "machine_info", dict)


def published_tables(group: str) -> dict:
    return json.loads((REPO_ROOT / "docs" / "results" / f"{group}.json").read_text(encoding="utf-8"))["tables"]


def test_throughput_records_are_the_published_ones(minilm_dir, tmp_path, monkeypatch):
    calls = []

    def measure(label, args, data_dir, tokenizer):
        calls.append(label)
        _, batch_size, steps, repeats = bench_pretrain.config_settings(label, args)
        phases = dict(zip(("data (build + mask)", "forward", "backward", "clip + optimizer"), (1.0, 2.0, 4.0, 1.0)))
        loops = {key: {"tokens_s": tok, "flop_s": flop, "phases": phases}
                 for key, (tok, flop) in RATES.items() if key[1] in args.precisions}
        return {"label": label, "batch_size": batch_size, "steps": steps, "repeats": repeats, "peak": PEAK,
                "loops": loops}

    monkeypatch.setattr(bench_pretrain, "measure_config", measure)
    monkeypatch.setattr(bench_pretrain, "prepare_slice", lambda vocab, megabytes, workdir: workdir)
    bench_pretrain.main(["--vocab", str(minilm_dir), "--configs", "mini", "--precision", "fp32,bf16", "--threads", "1",
                         "--records", str(tmp_path)])
    assert calls == ["mini"]
    written = assert_published(tmp_path, "bench-pretrain/")
    for record in written.values():
        assert (record.seeds, record.threads) == (5, 1)  # mini's 5 repeats; torch's threads
        assert record.data == f"a 4 MB slice of {WIKI} prepared by bertforge prepare"
        assert record.command.removeprefix("OMP_NUM_THREADS=1 ").startswith(
            "python benchmarks/bench_pretrain.py --vocab \"$MINILM\" --configs mini")  # the prefix: when the env sets it
    for (name, precision), (tokens, flops) in RATES.items():
        base = f"bench-pretrain/mini/{name}-{precision}"
        assert written[f"{base}/tokens-s"].value == tokens
        assert written[f"{base}/useful-gflop-s"].value == pytest.approx(flops / 1e9, rel=1e-12)
        assert written[f"{base}/of-gemm-peak"].value == pytest.approx(100 * flops / PEAK, rel=1e-12)
        assert written[f"{base}/vs-transformers-same-precision"].value == pytest.approx(
            tokens / RATES[("transformers", precision)][0], rel=1e-12)
        assert written[f"{base}/vs-its-own-fp32"].value == pytest.approx(tokens / RATES[(name, "fp32")][0], rel=1e-12)
    assert json.loads((tmp_path / "bench-pretrain.json").read_text())["tables"] == published_tables("bench-pretrain")


def race(args, data_dir, tokenizer) -> list[dict]:
    """A stubbed 20-minute race in ten rounds: each loop's curve falls from 10 by its own step per round."""
    per_round = {"transformers": 0.25, "bertforge, same recipe": 0.30, "bertforge, lr 0.001": 0.35}
    results = []
    for name, kind, recipe in bench_pretrain.parse_ttq_loops(args.ttq_loops):
        rounds = args.ttq_rounds
        curve = [(args.ttq * r / rounds + 0.5 * (r > 0), 10.0 - per_round[name] * r) for r in range(rounds + 1)]
        steps = {"transformers": 88, "bertforge, same recipe": 351}.get(name, 360)
        results.append({"name": name, "kind": kind, "recipe": recipe, "spent": curve[-1][0], "steps": steps,
                        "tokens": 3100 * steps, "curve": curve})
    return results


def test_time_to_quality_records_are_the_published_ones(minilm_dir, tmp_path, monkeypatch):
    prepared = tmp_path / "wiki"
    prepared.mkdir()
    source = common.default_shared_data() / "corpus" / "wikipedia-en-2018" / "wiki_en.txt.xz"  # need not exist
    (prepared / "manifest.json").write_text(json.dumps({"inputs": [{"path": str(source)}],
                                                        "counts": {"tokens": 12_380_000}}))
    monkeypatch.setattr(bench_pretrain, "time_to_quality", race)
    bench_pretrain.main(["--vocab", str(minilm_dir), "--data", str(prepared), "--configs", "", "--ttq", "1200",
                         "--ttq-rounds", "10", "--threads", "1", "--records", str(tmp_path / "records")])
    assert not (tmp_path / "records" / "bench-pretrain.json").exists()  # no throughput config was run
    written = assert_published(tmp_path / "records", "bench-ttq/")
    for record in written.values():
        assert record.data == f"{WIKI} (12.38 M tokens) prepared into {prepared}; 8 held-out batches of 32"
        assert (record.seeds, record.threads) == (1, 1)
    settings = SimpleNamespace(ttq=1200.0, ttq_rounds=10, ttq_loops=bench_pretrain.TTQ_DEFAULT_LOOPS)
    curves = {r["name"]: r["curve"] for r in race(settings, None, None)}
    target = curves["transformers"][-1][1]  # 7.5: transformers' loss at 20 minutes
    for part, name in (("transformers", "transformers"), ("bertforge", "bertforge, same recipe"),
                       ("bertforge-lr1e-3", "bertforge, lr 0.001")):
        base = f"bench-ttq/mini-20m/{part}"
        losses = [written[f"{base}/held-out-mlm-loss-at-2-10-20-min{suffix}"].value for suffix in ("", "-2", "-3")]
        assert losses == [curves[name][r][1] for r in (1, 5, 10)]  # after 2, 10 and 20 of the 20 minutes
        if part != "transformers":
            reached = written[f"{base}/reached-transformers-20-minute-loss-at"].value
            assert reached == pytest.approx(bench_pretrain.first_time_below(curves[name], target), rel=1e-12)
            assert written[f"{base}/reached-transformers-20-minute-loss-at-2"].value == pytest.approx(reached / 1200)
    assert written["bench-ttq/mini-20m/bertforge/steps-of-32"].value == 351
    assert written["bench-ttq/mini-20m/bertforge/tokens"].value == 3100 * 351
    assert json.loads((tmp_path / "records" / "bench-ttq.json").read_text())["tables"] == published_tables("bench-ttq")


@pytest.mark.slow
def test_a_real_throughput_run_writes_its_records(minilm_dir, train_data, tmp_path, monkeypatch):
    """The smallest real run (batch 2, sequence length 32, one step, one repeat, fp32): the published records with
    its settings in the ids and descriptions, and ratios that are its own tokens/s divided."""
    monkeypatch.setattr(bench_pretrain, "peak_gemm", lambda: common.gemm_seconds(256, 256, 256, tries=1))
    bench_pretrain.main(["--vocab", str(minilm_dir), "--data", str(train_data), "--configs", "mini", "--batch-size", "2",
                         "--seq-len", "32", "--steps", "1", "--repeats", "1", "--threads", "1",
                         "--records", str(tmp_path)])
    from bertforge.results_store import read_store
    written = read_store(tmp_path).records
    published = {rid.replace("/mini/", "/mini-b2-seq32/"): r for rid, r in read_store().records.items()
                 if rid.startswith("bench-pretrain/mini/") and "-fp32/" in rid}
    assert set(written) == set(published)
    for rid, record in written.items():
        assert record.what == published[rid].what.replace("mini batch 32,", "mini batch 2, seq 32,")
        assert record.value > 0 and record.seeds == 1
    base = "bench-pretrain/mini-b2-seq32"
    ours, theirs = (written[f"{base}/{name}-fp32/tokens-s"].value for name in ("bertforge", "transformers"))
    assert written[f"{base}/bertforge-fp32/vs-transformers-same-precision"].value == pytest.approx(ours / theirs)
    assert written[f"{base}/bertforge-fp32/vs-its-own-fp32"].value == 1.0

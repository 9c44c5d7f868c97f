"""bf16 autocast against fp32 for `bertforge pretrain` itself, per recipe: is bf16 worth being the default here?

Each measurement is a whole `bertforge pretrain` run (data, masking, the engine, the optimizer) of --steps
steps on a prepared corpus, `--model mini`, batch 32, sequence length 128, read from its metrics.jsonl: the
seconds per step after the first logged steps (start-up excluded). The runs alternate, fp32 and bf16 of
each recipe in turn, for --rounds rounds; the table gives medians and the bf16 speed-up. Also printed: whether
the CPU has native bf16 arithmetic (AVX-512 BF16 or AMX), without which autocast emulates it.

    python benchmarks/bench_precision.py --data PREPARED_DIR [--recipes bert,fast] [--steps 40] [--rounds 3]
        [--threads 2] [--records DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from common import machine_info, markdown_table

REPO = Path(__file__).resolve().parents[1]


def seconds_per_step(data: str, recipe: str, precision: str, steps: int, threads: int, out: Path) -> float:
    run = out / f"{recipe}-{precision}"
    cmd = [sys.executable, "-m", "bertforge", "pretrain", "--data", data, "--output", str(run), "--overwrite",
           "--recipe", recipe, "--model", "mini", "--batch-size", "32", "--max-steps", str(steps),
           "--precision", precision, "--save-every", "0", "--eval-batches", "0", "--log-every", "5",
           "--no-progress"]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": str(threads)}
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    from bertforge.training.metrics_log import read_metrics_log
    rows = read_metrics_log(run)
    times = {row["step"]: row["time"] for row in rows if row.get("split") == "train"}
    first = sorted(times)[1]  # the first logged steps pay for start-up
    return (times[steps] - times[first]) / (steps - first)


def native_bf16() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, help="a folder written by `bertforge prepare`")
    parser.add_argument("--recipes", default="bert,fast")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--records", default=None, metavar="DIR",
                        help="also write the table as results-store records (group bench-precision) into DIR")
    args = parser.parse_args(argv)
    recipes = args.recipes.split(",")
    samples: dict[tuple[str, str], list[float]] = {(r, p): [] for r in recipes for p in ("fp32", "bf16")}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            for key in samples:
                samples[key].append(seconds_per_step(args.data, *key, args.steps, args.threads, Path(tmp)))
                print(f"round {round_ + 1} {key[0]} {key[1]}: {samples[key][-1]:.3f} s/step", flush=True)
    rows = []
    for recipe in recipes:
        fp32, bf16 = (statistics.median(samples[(recipe, p)]) for p in ("fp32", "bf16"))
        paired = statistics.median(a / b for a, b in zip(samples[(recipe, "fp32")], samples[(recipe, "bf16")]))
        rows.append([recipe, f"{fp32:.3f}", f"{bf16:.3f}", f"**{fp32 / bf16:.2f}x**", f"{paired:.2f}x"])
    print()
    print(markdown_table(["recipe (mini)", "fp32 s/step", "bf16 s/step", "bf16 speed-up", "paired"], rows))
    print(f"\nnative bf16 arithmetic: {native_bf16()}; {args.threads} thread(s), {args.steps} steps per run, "
          f"medians of {args.rounds}")
    print("\n".join(f"{k}: {v}" for k, v in machine_info().items()))
    if args.records:
        from bertforge.results_store import write_records
        write_records("bench-precision", make_records(samples, recipes, args), args.records)


# the published table's name of a recipe; another recipe is named by its name alone
RECIPE_LABELS = {"bert": "bert (post-LN, MLM + NSP, dropout 0.1)",
                 "fast": "fast (ModernBERT layout, MLM 30 %, no dropout)"}


def corpus_data(prepared: str) -> str:
    """`data` of the records: the prepared folder and the inputs its manifest names."""
    try:
        inputs = [entry["path"] for entry in json.loads((Path(prepared) / "manifest.json").read_text())["inputs"]]
    except (OSError, ValueError, KeyError, TypeError):
        inputs = []
    return f"{', '.join(inputs)} prepared into {prepared}" if inputs else f"the corpus prepared into {prepared}"


def make_records(samples: dict[tuple[str, str], list[float]], recipes: list[str], args) -> list:
    """The table's records per recipe: the median s/step of fp32 and of bf16, and bf16's speed-up (the two
    medians divided)."""
    import dataclasses
    from bertforge.results_store import Record
    data = corpus_data(args.data)
    records = []
    for recipe in recipes:
        fp32, bf16 = (statistics.median(samples[(recipe, p)]) for p in ("fp32", "bf16"))
        what = f"bench_precision, whole pretrain runs, mini batch 32: {RECIPE_LABELS.get(recipe, recipe)}"
        for slug, column, value, unit, digits in (("fp32-s-step", "fp32 s/step", fp32, "s", 3),
                                                  ("bf16-s-step", "bf16 s/step", bf16, "s", 3),
                                                  ("bf16-speed-up", "bf16 speed-up", fp32 / bf16, "x", 2)):
            record = Record.measured(f"bench-precision/mini/{recipe}/{slug}", value, unit, f"{what}, {column}", data,
                                     seeds=args.rounds, digits=digits)
            records.append(dataclasses.replace(record, threads=args.threads))  # the runs' OMP_NUM_THREADS
    return records


if __name__ == "__main__":
    main()

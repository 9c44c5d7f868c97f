"""bf16 autocast against fp32 on CPU: does the result suffer? Same data, same seed, same steps, one flag apart.

    python experiments/precision_quality.py --out runs/precision [--steps 300] [--train-samples 2000] [--records DIR]

1. Pre-training: a `mini` BERT (MLM + NSP) for `--steps` steps on a slice of ../shared/data's Wikipedia with
   the real uncased vocabulary, once per precision; the held-out MLM loss and MLM accuracy at the end, and the
   seconds of its training loop (the run's training_summary.json).
2. Fine-tuning: all-MiniLM-L6-v2 on `--train-samples` SST-2 train sentences (2 epochs, batch 16, lr 1e-4),
   scored on the full SST-2 dev set, once per precision; the seconds of the whole command.
Both through the `bertforge` command line. Prints a Markdown table with the seconds, the metric and the ratio;
`--records DIR` also writes them as results-store records (group precision-quality) with the table that shows them.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

REPO = Path(__file__).resolve().parents[1]
from bertforge.measuring import default_shared_data, machine_info, markdown_table, minilm_folder  # noqa: E402

GROUP = "precision-quality"
PRECISIONS = ("fp32", "bf16")
CORPUS = "../shared/data/corpus/wikipedia-en-2018/wiki_en.txt.xz"  # the corpus prepare_slice cuts (as a record names it)
PRETRAIN_LABEL = "pre-training, mini, MLM + NSP (training loop)"  # its seconds are the training loop's


def bertforge(*args: str) -> float:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "bertforge", *args, "--no-progress", "--device", "cpu"],
                          capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": str(THREADS)})
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    return time.perf_counter() - start


THREADS = 2


def finetune_label(train_samples: int) -> str:
    return f"fine-tuning all-MiniLM-L6-v2, SST-2 ({train_samples:,} train)"


def pretrain(args: argparse.Namespace, data: Path, vocab: str, precision: str) -> dict[str, Any]:
    """Pre-train (or, with --skip-pretrain, read a finished run): the training loop's seconds and the final
    held-out MLM loss and accuracy, from the run's training_summary.json."""
    from bertforge.training.run_output import read_training_summary
    out = args.out / f"pretrain-{precision}"
    if not (args.skip_pretrain and read_training_summary(out) is not None):
        bertforge("pretrain", "--data", str(data), "--vocab", vocab, "--model", "mini", "--output", str(out),
                  "--overwrite", "--batch-size", "32", "--max-steps", str(args.steps), "--lr", "5e-4",
                  "--warmup-steps", str(args.steps // 10), "--eval-batches", "20", "--save-every", "0",
                  "--precision", precision)
    summary = read_training_summary(out)
    return {"seconds": summary.elapsed_seconds, "mlm_loss": summary.final_eval["mlm_loss"],
            "mlm_acc": summary.final_eval["mlm_acc"]}


def finetune(args: argparse.Namespace, shared: Path, vocab: str, precision: str) -> dict[str, Any]:
    """Fine-tune on SST-2: the command's wall seconds and the dev accuracy (%) of its metrics.json."""
    from bertforge.tasks.finetune_report import read_finetune_report
    out = args.out / f"finetune-{precision}"
    seconds = bertforge(
        "finetune", "--task", "sst2", "--model", vocab, "--data", str(shared / "glue" / "SST-2"),
        "--output", str(out), "--overwrite", "--epochs", "2", "--batch-size", "16", "--max-seq-length", "64",
        "--max-train-samples", str(args.train_samples), "--lr", "1e-4", "--precision", precision)
    return {"seconds": seconds, "accuracy": 100 * read_finetune_report(out).eval["accuracy"]}


def speed_vs_fp32(measured: dict[str, dict[str, dict[str, Any]]], stage: str, precision: str) -> float:
    """fp32's seconds over this precision's: how many times as fast as fp32 the run is."""
    return measured[stage]["fp32"]["seconds"] / measured[stage][precision]["seconds"]


def stage_rows(measured: dict[str, dict[str, dict[str, Any]]], train_samples: int) -> list[tuple[str, str, str]]:
    """(stage, label, precision) for each run, in the table's order."""
    labels = {"pretrain": PRETRAIN_LABEL, "finetune": finetune_label(train_samples)}
    return [(stage, labels[stage], precision) for stage in measured for precision in measured[stage]]


def table(measured: dict[str, dict[str, dict[str, Any]]], train_samples: int) -> dict[str, Any]:
    """The results table (docs/BENCHMARKS.md): each run's seconds, result and speed against fp32 (bf16's bold)."""
    rows = []
    for stage, label, precision in stage_rows(measured, train_samples):
        base = f"{GROUP}/runs/{stage}-{precision}"
        result = (f"held-out MLM loss {{{base}/result|bare}}, MLM acc {{{base}/result-2|bare}}" if stage == "pretrain"
                  else f"dev accuracy {{{base}/result|bare}}")
        speed = f"{{{base}/speed-vs-fp32}}"
        rows.append([label, precision, f"{{{base}/seconds|bare}}", result,
                     speed if precision == "fp32" else f"**{speed}**"])
    return {"header": ["run", "precision", "seconds", "result", "speed vs fp32"], "align": ["---"] * 5, "rows": rows}


def make_records(measured: dict[str, dict[str, dict[str, Any]]], args: argparse.Namespace, command: str) -> list:
    """Per run its seconds, its result (pre-training: held-out MLM loss, then MLM accuracy; fine-tuning: dev
    accuracy) and its speed against the same run in fp32, as results-store records."""
    import dataclasses

    from bertforge.results_store import Record
    data = (f"a {args.megabytes:g} MB slice of {CORPUS}; {args.train_samples:,} SST-2 train sentences, "
            "the SST-2 dev set")
    records = []
    for stage, label, precision in stage_rows(measured, args.train_samples):
        run, base = measured[stage][precision], f"{GROUP}/runs/{stage}-{precision}"
        what = f"precision_quality, the same run in fp32 and bf16: {label} {precision}"
        values = [("seconds", run["seconds"], "s", "seconds", 0)]
        if stage == "pretrain":
            values += [("result", run["mlm_loss"], "", "held-out MLM loss", 4),
                       ("result-2", run["mlm_acc"], "", "held-out MLM accuracy", 3)]
        else:
            values.append(("result", run["accuracy"], "", "SST-2 dev accuracy (%)", 2))
        values.append(("speed-vs-fp32", speed_vs_fp32(measured, stage, precision), "x", "speed vs fp32", 2))
        for name, value, unit, column, digits in values:
            record = Record.measured(f"{base}/{name}", value, unit, f"{what}, {column}", data, command=command,
                                     digits=digits)
            records.append(dataclasses.replace(record, threads=args.threads))  # the bertforge commands' threads
    return records


def main(argv: Sequence[str] | None = None) -> int:
    global THREADS
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--train-samples", type=int, default=2000)
    parser.add_argument("--megabytes", type=float, default=4.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--skip-pretrain", action="store_true", help="reuse finished pre-training runs in --out")
    parser.add_argument("--records", default=None, metavar="DIR",
                        help="also write the table as results-store records (group precision-quality) into DIR")
    args = parser.parse_args(argv)
    THREADS = args.threads
    args.out.mkdir(parents=True, exist_ok=True)
    shared, vocab = default_shared_data(), str(minilm_folder())
    from bertforge.measuring import prepare_slice
    data = args.out / "prepared"
    if not (data / "manifest.json").exists():
        data = prepare_slice(vocab, args.megabytes, args.out)
    measured = {"pretrain": {p: pretrain(args, data, vocab, p) for p in PRECISIONS},
                "finetune": {p: finetune(args, shared, vocab, p) for p in PRECISIONS}}
    rows = []
    for stage, label, precision in stage_rows(measured, args.train_samples):
        run = measured[stage][precision]
        result = (f"held-out MLM loss {run['mlm_loss']:.4f}, MLM acc {run['mlm_acc']:.4f}" if stage == "pretrain"
                  else f"dev accuracy {run['accuracy']:.2f}")
        rows.append([label, precision, f"{run['seconds']:.0f}", result,
                     f"{speed_vs_fp32(measured, stage, precision):.2f}x"])
    print(markdown_table(["run", "precision", "seconds", "result", "speed vs fp32"], rows))
    print()
    print(", ".join(f"{k}: {v}" for k, v in machine_info().items()))
    if args.records:
        from bertforge.measuring import portable_command
        from bertforge.results_store import write_records
        command = portable_command("experiments/precision_quality.py", list(sys.argv[1:] if argv is None else argv))
        write_records(GROUP, make_records(measured, args, command), args.records,
                      tables={f"{GROUP}-runs": table(measured, args.train_samples)})
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""bf16 autocast against fp32 on CPU: does the result suffer? Same data, same seed, same steps, one flag apart.

    python experiments/precision_quality.py --out runs/precision [--steps 300] [--train-samples 2000]

1. Pre-training: a `mini` BERT (MLM + NSP) for `--steps` steps on a slice of ../shared/data's Wikipedia with
   the real uncased vocabulary, once per precision; the held-out MLM loss and NSP accuracy at the end.
2. Fine-tuning: all-MiniLM-L6-v2 on `--train-samples` SST-2 train sentences (2 epochs, batch 16, lr 1e-4),
   scored on the full SST-2 dev set, once per precision.
Both through the `bertforge` command line. Prints a Markdown table with wall time, the metric and the ratio.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
from bertforge.measuring import default_shared_data, machine_info, markdown_table, minilm_folder  # noqa: E402


def bertforge(*args: str) -> float:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "bertforge", *args, "--no-progress", "--device", "cpu"],
                          capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": str(THREADS)})
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    return time.perf_counter() - start


THREADS = 2


def main() -> int:
    global THREADS
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--train-samples", type=int, default=2000)
    parser.add_argument("--megabytes", type=float, default=4.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--skip-pretrain", action="store_true", help="reuse finished pre-training runs in --out")
    args = parser.parse_args()
    THREADS = args.threads
    args.out.mkdir(parents=True, exist_ok=True)
    shared, vocab = default_shared_data(), str(minilm_folder())
    from bertforge.measuring import prepare_slice
    from bertforge.tasks.finetune_report import read_finetune_report
    from bertforge.training.run_output import read_training_summary
    data = args.out / "prepared"
    if not (data / "manifest.json").exists():
        data = prepare_slice(vocab, args.megabytes, args.out)
    rows = []
    seconds = {}
    for precision in ("fp32", "bf16"):
        out = args.out / f"pretrain-{precision}"
        if args.skip_pretrain and (summary := read_training_summary(out)) is not None:
            seconds[("pretrain", precision)] = summary.elapsed_seconds
            final = summary.final_eval
            rows.append(["pre-training, mini, MLM + NSP (training loop s)", precision,
                         f"{seconds[('pretrain', precision)]:.0f}",
                         f"held-out MLM loss {final['mlm_loss']:.4f}, MLM acc {final['mlm_acc']:.4f}"])
            continue
        seconds[("pretrain", precision)] = bertforge(
            "pretrain", "--data", str(data), "--vocab", vocab, "--model", "mini", "--output", str(out), "--overwrite",
            "--batch-size", "32", "--max-steps", str(args.steps), "--lr", "5e-4", "--warmup-steps",
            str(args.steps // 10), "--eval-batches", "20", "--save-every", "0", "--precision", precision)
        final = read_training_summary(out).final_eval
        rows.append(["pre-training, mini, MLM + NSP", precision, f"{seconds[('pretrain', precision)]:.0f}",
                     f"held-out MLM loss {final['mlm_loss']:.4f}, MLM acc {final['mlm_acc']:.4f}"])
    for precision in ("fp32", "bf16"):
        out = args.out / f"finetune-{precision}"
        seconds[("finetune", precision)] = bertforge(
            "finetune", "--task", "sst2", "--model", vocab, "--data", str(shared / "glue" / "SST-2"),
            "--output", str(out), "--overwrite", "--epochs", "2", "--batch-size", "16", "--max-seq-length", "64",
            "--max-train-samples", str(args.train_samples), "--lr", "1e-4", "--precision", precision)
        metrics = read_finetune_report(out).eval
        rows.append([f"fine-tuning all-MiniLM-L6-v2 on SST-2 ({args.train_samples} train)", precision,
                     f"{seconds[('finetune', precision)]:.0f}", f"dev accuracy {100 * metrics['accuracy']:.2f}"])
    for i, (what, precision, *_rest) in enumerate(rows):
        stage = "pretrain" if what.startswith("pre") else "finetune"
        rows[i].append(f"{seconds[(stage, 'fp32')] / seconds[(stage, precision)]:.2f}x")
    print(markdown_table(["run", "precision", "wall s", "result", "speed vs fp32"], rows))
    print()
    print(", ".join(f"{k}: {v}" for k, v in machine_info().items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

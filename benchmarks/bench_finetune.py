"""Fine-tuning side by side: bertforge's fine-tuning code against a plain `transformers` loop, same recipe.

Both sides start from the same checkpoint (all-MiniLM-L6-v2 by default), read the same examples (the same
seeded train subset when `--max-train-samples` is given), and follow one recipe: batch 32, AdamW
(beta 0.9/0.999, eps 1e-6, weight decay 0.01 except biases and LayerNorm, fused kernel -- what the
Trainer picks by default on torch >= 2.8), lr 2e-5, linear warmup over 10% of the steps then linear decay to
0, gradient clipping at 1.0, max_seq_length 128, dynamic padding, evaluation on dev after every epoch.

* bertforge: `bertforge.tasks.finetune.train_run` -- exactly what `bertforge finetune` runs (bertforge's
  tokenizer, model, length-bucketed shuffled batches, padding removed inside the model).
* transformers: `BertForSequenceClassification.from_pretrained` (default attention, i.e. sdpa) + the HF
  fast tokenizer + `DataCollatorWithPadding` + a `DataLoader(shuffle=True)` + `torch.optim.AdamW` +
  `get_linear_schedule_with_warmup`, the loop a typical user writes; evaluation in `model.eval()` under
  `torch.no_grad()`.

The sides alternate in one process (seed 1: bertforge then HF, seed 2: HF then bertforge, ...), so load drift
hits both alike. Reported per side: the dev metrics after the last epoch, training examples/s (examples x
epochs / seconds spent in the training loop, the per-epoch evaluations excluded) and the wall time; the
speed-up is the ratio of the median throughputs, "paired" the median of the per-seed ratios. Each side's
training loop is also timed in process CPU seconds: with one thread (the default) that is the work itself, and
a spell of load from other jobs during one side's turn (which stretches its wall time but not its CPU time)
cannot tilt that ratio.

    python benchmarks/bench_finetune.py --task mrpc [--max-train-samples N] [--epochs 3] [--seeds 42,43,44]
                                        [--data ../shared/data] [--model DIR] [--out results.json]
"""
from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from common import (default_shared_data, machine_info, markdown_table, minilm_folder, same_optimizer,  # noqa: E402
                    start_process)

import bertforge.tasks.finetune as ft  # noqa: E402
from bertforge.tasks.registry import get_task  # noqa: E402

GLUE_TASKS = ("sst2", "cola", "mrpc", "stsb", "qnli", "rte", "wnli")


def log(msg: str) -> None:
    print(msg, flush=True)


# ---- bertforge -----------------------------------------------------------------------------------------------------
class _EvalTimer:
    """Wraps `ft.evaluate_examples` so the per-epoch evaluations can be taken out of the training time."""

    def __init__(self) -> None:
        self.seconds = self.cpu_seconds = 0.0
        self._inner = ft.evaluate_examples

    def __call__(self, *args, **kwargs):
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            return self._inner(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - t0
            self.cpu_seconds += time.process_time() - c0


def run_bertforge(spec, data: ft.TaskData, args, seed: int, tmp: Path) -> dict:
    from bertforge.tokenization import load_tokenizer

    settings = ft.FinetuneSettings(task=spec.name, model=str(args.model), output=str(tmp), epochs=args.epochs,
                                   batch_size=args.batch_size, learning_rates=(args.lr,),
                                   max_seq_length=args.max_seq_length, seed=seed, progress=False, keep="last",
                                   device="cpu")
    wall0 = time.perf_counter()
    tokenizer = load_tokenizer(settings.model)
    t0 = time.perf_counter()
    features = ft.encode(spec, tokenizer, data.train, settings, data.labels, training=True)
    encode_seconds = time.perf_counter() - t0
    timer = _EvalTimer()
    ft.evaluate_examples = timer
    c0 = time.process_time()
    from bertforge.training.engine import Session
    try:
        with Session("cpu") as session:
            result = ft.train_run(spec, tokenizer, data, features, settings, args.lr, seed, tmp / f"bf_{seed}",
                                  session)
    finally:
        ft.evaluate_examples = timer._inner
    cpu = time.process_time() - c0
    train_seconds = result.seconds - timer.seconds
    return {"metrics": _clean(result.metrics), "train_seconds": train_seconds, "eval_seconds": timer.seconds,
            "train_cpu_seconds": cpu - timer.cpu_seconds,
            "encode_seconds": encode_seconds, "steps": result.steps, "wall_seconds": time.perf_counter() - wall0}


# ---- transformers ----------------------------------------------------------------------------------------------------
def run_hf(spec, data: ft.TaskData, args, seed: int) -> dict:
    from torch.utils.data import DataLoader
    from transformers import (AutoTokenizer, BertForSequenceClassification, DataCollatorWithPadding,
                              get_linear_schedule_with_warmup)

    regression = spec.head == "regression"
    label2id = {name: i for i, name in enumerate(data.labels or [])}
    wall0 = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(args.model)

    def tokenize(examples, with_labels=True):
        texts = [ex.text for ex in examples]
        pairs = [ex.text_pair for ex in examples]
        enc = tokenizer(texts, pairs if pairs[0] is not None else None, truncation=True,
                        max_length=args.max_seq_length)
        rows = []
        for i, ex in enumerate(examples):
            row = {k: enc[k][i] for k in ("input_ids", "token_type_ids", "attention_mask")}
            if with_labels:
                row["labels"] = float(ex.label) if regression else label2id[str(ex.label)]
            rows.append(row)
        return rows

    t0 = time.perf_counter()
    train_rows = tokenize(data.train)
    encode_seconds = time.perf_counter() - t0
    dev_examples = data.evals["eval"]
    dev_rows = tokenize(dev_examples, with_labels=False)
    collator = DataCollatorWithPadding(tokenizer)

    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)
    if regression:
        model = BertForSequenceClassification.from_pretrained(args.model, num_labels=1, problem_type="regression")
    else:
        model = BertForSequenceClassification.from_pretrained(args.model, num_labels=len(label2id))
    model.train()
    optimizer = same_optimizer(model, args.lr)  # the very AdamW (groups, eps, fused) bertforge's side builds
    loader = DataLoader(train_rows, batch_size=args.batch_size, shuffle=True, collate_fn=collator,
                        generator=torch.Generator().manual_seed(seed))
    total = max(1, math.ceil(len(loader) * args.epochs))
    scheduler = get_linear_schedule_with_warmup(optimizer, int(0.1 * total), total)

    def evaluate() -> dict:
        model.eval()
        preds = []
        with torch.no_grad():
            for batch in DataLoader(dev_rows, batch_size=64, shuffle=False, collate_fn=collator):
                logits = model(**batch).logits
                preds.extend(logits[:, 0].tolist() if regression else logits.argmax(-1).tolist())
        model.train()
        refs = [float(ex.label) for ex in dev_examples] if regression else [label2id[str(ex.label)]
                                                                             for ex in dev_examples]
        return spec.metric(preds, refs)

    step, epoch, train_seconds, eval_seconds, train_cpu = 0, 0, 0.0, 0.0, 0.0
    metrics: dict = {}
    while step < total:
        t0, c0 = time.perf_counter(), time.process_time()
        for batch in loader:
            loss = model(**batch).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            if step >= total:
                break
        train_seconds += time.perf_counter() - t0
        train_cpu += time.process_time() - c0
        epoch += 1
        t0 = time.perf_counter()
        metrics = evaluate()
        eval_seconds += time.perf_counter() - t0
    return {"metrics": _clean(metrics), "train_seconds": train_seconds, "eval_seconds": eval_seconds,
            "train_cpu_seconds": train_cpu, "encode_seconds": encode_seconds, "steps": step,
            "wall_seconds": time.perf_counter() - wall0}


# ---- main ------------------------------------------------------------------------------------------------------------
def _clean(metrics: dict) -> dict:
    return {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float, np.floating, np.integer))
            and k not in ("n_examples", "eval_seconds", "examples_per_second")}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default="mrpc", choices=GLUE_TASKS)
    p.add_argument("--model", type=Path, default=None, help="checkpoint folder (default: all-MiniLM-L6-v2)")
    p.add_argument("--data", type=Path, default=default_shared_data(), help="shared data root or the task folder")
    p.add_argument("--max-train-samples", type=int, default=None,
                   help="seeded random subset of the train set (seed --subset-seed), the same for every run")
    p.add_argument("--subset-seed", type=int, default=42)
    p.add_argument("--epochs", type=float, default=3.0)
    p.add_argument("--seeds", default="42", help="comma-separated training seeds")
    p.add_argument("--lr", type=float, default=2e-5)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-seq-length", type=int, default=128)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, default=None, help="write all results as JSON here")
    args = p.parse_args(argv)
    start_process(args.threads)
    args.model = args.model or minilm_folder()
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    spec = get_task(args.task)
    data = ft.load_task_data(spec, str(args.data))
    data.train = ft.subset(data.train, args.max_train_samples, args.subset_seed)
    n_train, n_dev = len(data.train), len(data.evals["eval"])
    info = machine_info()
    log(" | ".join(f"{k}: {v}" for k, v in info.items()))
    log(f"{spec.name}: {n_train} train examples, {n_dev} dev examples, {args.epochs:g} epochs, seeds {seeds}")

    runs: list[dict] = []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for i, seed in enumerate(seeds):
            order = ["bertforge", "transformers"] if i % 2 == 0 else ["transformers", "bertforge"]
            for side in order:
                if side == "bertforge":
                    r = run_bertforge(spec, data, args, seed, Path(tmp))
                else:
                    r = run_hf(spec, data, args, seed)
                r.update(side=side, seed=seed, train_examples_per_second=n_train * args.epochs / r["train_seconds"],
                         train_examples_per_cpu_second=n_train * args.epochs / r["train_cpu_seconds"])
                runs.append(r)
                log(f"  seed {seed} {side:12s}: " + ", ".join(f"{k} {v:.4f}" for k, v in r["metrics"].items())
                    + f" | train {r['train_seconds']:.1f}s ({r['train_examples_per_second']:.1f} ex/s; "
                      f"{r['train_cpu_seconds']:.1f} CPU-s, {r['train_examples_per_cpu_second']:.1f} ex/CPU-s), "
                      f"eval {r['eval_seconds']:.1f}s, wall {r['wall_seconds']:.1f}s")
                if args.out:  # keep partial results if the run is cut short
                    _write(args, spec, info, n_train, n_dev, seeds, runs, time.perf_counter() - start)
    report = _write(args, spec, info, n_train, n_dev, seeds, runs, time.perf_counter() - start)
    print("\n" + report["table"])
    log(f"\nspeed-up (median bertforge ex/s / median HF ex/s): {report['speedup']:.2f}x, "
        f"paired {report['paired_speedup']:.2f}x; per CPU-second {report['cpu_speedup']:.2f}x; "
        f"total {report['total_seconds']:.0f} s")
    return 0


def _write(args, spec, info, n_train, n_dev, seeds, runs, total_seconds) -> dict:
    sides = ["bertforge", "transformers"]
    by = {s: [r for r in runs if r["side"] == s] for s in sides}
    keys = list(runs[0]["metrics"]) if runs else []
    summary = {}
    for s in sides:
        rs = by[s]
        if not rs:
            continue
        summary[s] = {"metrics_median": {k: statistics.median(r["metrics"][k] for r in rs) for k in keys},
                      "train_examples_per_second_median": statistics.median(r["train_examples_per_second"] for r in rs),
                      "train_examples_per_cpu_second_median":
                          statistics.median(r["train_examples_per_cpu_second"] for r in rs),
                      "train_seconds_median": statistics.median(r["train_seconds"] for r in rs), "n_runs": len(rs)}
    paired = [b["train_examples_per_second"] / h["train_examples_per_second"]
              for b in by["bertforge"] for h in by["transformers"] if b["seed"] == h["seed"]]
    speedup = (summary["bertforge"]["train_examples_per_second_median"]
               / summary["transformers"]["train_examples_per_second_median"]) if len(summary) == 2 else float("nan")
    cpu_speedup = (summary["bertforge"]["train_examples_per_cpu_second_median"]
                   / summary["transformers"]["train_examples_per_cpu_second_median"]) if len(summary) == 2 \
        else float("nan")
    rows = []
    for s in sides:
        if s in summary:
            m = summary[s]
            rows.append([s, len(by[s])] + [f"{100 * m['metrics_median'][k]:.2f}" for k in keys]
                        + [f"{m['train_examples_per_second_median']:.1f}",
                           f"{m['train_examples_per_cpu_second_median']:.1f}", f"{m['train_seconds_median']:.0f}"])
    table = markdown_table(["side", "seeds"] + [f"dev {k} (median)" for k in keys]
                           + ["train ex/s (median)", "train ex/CPU-s (median)", "train s (median)"], rows)
    report = {"task": spec.name, "n_train": n_train, "n_dev": n_dev, "epochs": args.epochs, "seeds": seeds,
              "lr": args.lr, "batch_size": args.batch_size, "max_seq_length": args.max_seq_length,
              "max_train_samples": args.max_train_samples, "subset_seed": args.subset_seed,
              "machine": info, "runs": runs, "summary": summary, "speedup": speedup, "cpu_speedup": cpu_speedup,
              "paired_speedup": statistics.median(paired) if paired else float("nan"),
              "total_seconds": total_seconds, "table": table}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return report


if __name__ == "__main__":
    raise SystemExit(main())

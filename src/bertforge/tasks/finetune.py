"""Fine-tuning: the paper's recipe (AdamW, 10% warmup, linear decay, weight decay 0.01) for every task head.

`finetune(settings)` reads the task's data, runs one training run per (learning rate, restart), keeps the
run that scores best on the eval set, reports the median and spread of all runs (BERT's small-data tasks
vary a lot between seeds), and writes a predictor folder: model + tokenizer + `task.json` + `metrics.json`
+ `curves.png`. `evaluate_examples` scores any model on any split with the task's official metric; the
predictor and `bertforge evaluate` reuse it.
"""
from __future__ import annotations

import json
import logging
import math
import random
import shutil
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from bertforge.atomic import atomic_write_text
from bertforge.tasks.evaluation import default_seq_length, encode, evaluate_examples, main_value, model_inputs
from bertforge.tasks.features import Feature, iterate_batches
from bertforge.tasks.registry import TaskSpec, get_task
from bertforge.tasks.task_data import TaskData, load_task_data, subset

logger = logging.getLogger(__name__)

LR_GRID = (5e-5, 4e-5, 3e-5, 2e-5)  # the paper's fine-tuning grid (Appendix A.3)
TASK_FILE = "task.json"


@dataclass
class FinetuneSettings:
    """Everything one fine-tuning job needs; also what `task.json` keeps for prediction later."""

    task: str
    model: str
    output: str
    data: str | None = None
    train_file: str | None = None
    eval_file: str | None = None
    epochs: float = 3.0
    batch_size: int = 32
    eval_batch_size: int = 64
    learning_rates: Sequence[float] = (2e-5,)
    restarts: int = 1
    max_seq_length: int | None = None  # None: 384 for SQuAD, 128 otherwise
    max_train_samples: int | None = None
    max_eval_samples: int | None = None
    seed: int = 42
    skip_bad_rows: bool = False
    warmup_fraction: float = 0.1
    weight_decay: float = 0.01
    doc_stride: int = 128
    max_query_length: int = 64
    max_answer_length: int = 30
    n_best: int = 20
    progress: bool = True

    def seq_length(self, spec: TaskSpec) -> int:
        return default_seq_length(spec, self.max_seq_length)


# ---- model -----------------------------------------------------------------------------------------------------
def build_model(spec: TaskSpec, model_dir: str | Path, labels: Sequence[str] | None):
    """The task's head class on top of the checkpoint's encoder; label names go into the config."""
    from bertforge.model.auto import model_class_for
    cls = model_class_for(model_dir, spec.head)
    overrides: dict[str, Any] = {}
    if spec.head == "regression":
        overrides = {"id2label": {0: "score"}, "problem_type": "regression"}
    elif spec.head in ("sequence_classification", "token_classification"):
        overrides = {"id2label": dict(enumerate(labels or [])),
                     "problem_type": "single_label_classification" if spec.head == "sequence_classification"
                     else None}
    return cls.from_pretrained(model_dir, **overrides)


# ---- training --------------------------------------------------------------------------------------------------
@dataclass
class RunResult:
    name: str
    lr: float
    seed: int
    metrics: dict[str, Any]
    value: float
    seconds: float
    steps: int
    curves: Path | None = None


def train_run(spec: TaskSpec, tokenizer, data: TaskData, train_features: list[Feature], settings: FinetuneSettings,
              lr: float, seed: int, run_dir: Path) -> tuple[RunResult, Any]:
    """One fine-tuning run from the pre-trained weights; evaluates after every epoch. Returns (result, model)."""
    from bertforge.training.metrics_log import MetricsLog
    from bertforge.training.optim import build_optimizer, linear_warmup_decay
    from bertforge.training.progress import progress

    torch.manual_seed(seed)
    random.seed(seed)
    model = build_model(spec, settings.model, data.labels)
    model.train()
    optimizer = build_optimizer(model, lr, weight_decay=settings.weight_decay)
    per_epoch = math.ceil(len(train_features) / settings.batch_size)
    total = max(1, math.ceil(per_epoch * settings.epochs))
    scheduler = linear_warmup_decay(optimizer, int(settings.warmup_fraction * total), total)
    if run_dir.exists():
        shutil.rmtree(run_dir)
    log = MetricsLog(run_dir / "metrics.jsonl", run_dir / "curves.png")
    name = run_dir.name
    first_eval = next(iter(data.evals))
    step, epoch, start = 0, 0, time.perf_counter()
    metrics: dict[str, Any] = {}
    bar = progress(total, bar=settings.progress, desc=f"{spec.name} {name}", leave=False)
    while step < total:
        running, count = 0.0, 0
        for _, batch in iterate_batches(train_features, settings.batch_size, shuffle=True, seed=seed + epoch,
                                        pad_id=tokenizer.pad_token_id):
            loss = model(**model_inputs(batch, with_labels=True)).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            running += loss.item()
            count += 1
            bar.update(1)
            bar.set_postfix(loss=f"{loss.item():.4f}")
            if step % 10 == 0 or step == total:
                log.log(step, "train", loss=running / count, lr=scheduler.get_last_lr()[0])
                running, count = 0.0, 0
            if step >= total:
                break
        epoch += 1
        metrics, _ = evaluate_examples(model, tokenizer, spec, data.evals[first_eval], settings, data.labels)
        log.log(step, "eval", **{k: v for k, v in metrics.items() if isinstance(v, (int, float))
                                 and k not in ("n_examples", "eval_seconds", "examples_per_second", "total")})
        model.train()
    bar.close()
    log.plot(title=f"{spec.name} {name}")
    model.eval()
    result = RunResult(name, lr, seed, metrics, main_value(spec, metrics), round(time.perf_counter() - start, 2),
                       step, log.png_path if log.png_path.exists() else None)
    return result, model


def finetune(settings: FinetuneSettings, say=print) -> dict[str, Any]:
    """Run every (lr, restart), keep the best on the eval set, save it as a predictor; returns metrics.json."""
    from bertforge.tokenization import load_tokenizer

    spec = get_task(settings.task)
    out = Path(settings.output)
    out.mkdir(parents=True, exist_ok=True)
    data = load_task_data(spec, settings.data, settings.train_file, settings.eval_file,
                          skip_bad_rows=settings.skip_bad_rows)
    if data.note:
        say(f"NOTE: {data.note}")
    data.train = subset(data.train, settings.max_train_samples, settings.seed)
    data.evals = {k: subset(v, settings.max_eval_samples, None) for k, v in data.evals.items()}
    if not data.train:
        raise ValueError("no training examples")
    tokenizer = load_tokenizer(settings.model)
    train_features = encode(spec, tokenizer, data.train, settings, data.labels, training=True)
    say(f"{spec.name}: {len(data.train)} train examples ({len(train_features)} features), "
        + ", ".join(f"{len(v)} {k} examples" for k, v in data.evals.items()))

    runs: list[RunResult] = []
    best_model = None
    for lr in settings.learning_rates:
        for r in range(settings.restarts):
            seed = settings.seed + r
            name = f"lr{lr:g}_seed{seed}"
            result, model = train_run(spec, tokenizer, data, train_features, settings, lr, seed, out / "runs" / name)
            say(f"  run {name}: {spec.main_metric if spec.name != 'squad2' else 'best_f1'} = {result.value:.4f} "
                f"({result.steps} steps, {result.seconds:.1f}s)")
            if not runs or result.value > max(x.value for x in runs):
                best_model = model
            runs.append(result)
            del model
    best = max(runs, key=lambda x: x.value)

    # final metrics of the kept model on every eval set
    extra_metrics = {}
    for name, examples in list(data.evals.items())[1:]:
        extra_metrics[name], _ = evaluate_examples(best_model, tokenizer, spec, examples, settings, data.labels)
    save_predictor(out, best_model, tokenizer, spec, settings, data, best)
    values = [x.value for x in runs]
    report: dict[str, Any] = {
        "task": spec.name, "main_metric": spec.main_metric if spec.name != "squad2" else "best_f1",
        "note": data.note or None, "files": data.files,
        "n_train_examples": len(data.train), "n_train_features": len(train_features),
        "eval": best.metrics, **extra_metrics,
        "best_run": {"name": best.name, "lr": best.lr, "seed": best.seed, "value": best.value},
        "runs": [{"name": x.name, "lr": x.lr, "seed": x.seed, "value": x.value, "steps": x.steps,
                  "seconds": x.seconds} for x in runs],
        "summary": {"median": statistics.median(values), "min": min(values), "max": max(values),
                    "stdev": statistics.stdev(values) if len(values) > 1 else 0.0, "n_runs": len(values)},
        "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(settings).items()},
    }
    atomic_write_text(out / "metrics.json", json.dumps(report, indent=2, default=_json_default) + "\n")
    if best.curves is not None:
        shutil.copyfile(best.curves, out / "curves.png")
    say(f"best {best.name}: {report['main_metric']} = {best.value:.4f}; over {len(values)} runs median "
        f"{report['summary']['median']:.4f} (min {min(values):.4f}, max {max(values):.4f})")
    say(f"saved predictor to {out}")
    return report


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def save_predictor(out: Path, model, tokenizer, spec: TaskSpec, settings: FinetuneSettings, data: TaskData,
                   best: RunResult) -> None:
    """Model (HF layout) + tokenizer + `task.json`: everything `Predictor.load` needs."""
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    task = {
        "task": spec.name, "head": spec.head, "labels": data.labels,
        "max_seq_length": settings.seq_length(spec), "doc_stride": settings.doc_stride,
        "max_query_length": settings.max_query_length, "max_answer_length": settings.max_answer_length,
        "n_best": settings.n_best, "note": data.note or None,
    }
    if spec.name == "squad2" and "best_f1_thresh" in best.metrics:
        task["null_threshold"] = best.metrics["best_f1_thresh"]
    atomic_write_text(out / TASK_FILE, json.dumps(task, indent=2) + "\n")

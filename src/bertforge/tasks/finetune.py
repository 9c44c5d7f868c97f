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
from bertforge.tasks.features import (Feature, encode_classification, encode_multiple_choice, encode_ner,
                                      encode_squad, iterate_batches)
from bertforge.tasks.metrics import align_predictions_to_words, squad_v1_evaluate, squad_v2_evaluate
from bertforge.tasks.readers import split_squad_by_article
from bertforge.tasks.registry import TaskSpec, get_task
from bertforge.tasks.squad_postprocess import postprocess_squad

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
        if self.max_seq_length:
            return self.max_seq_length
        return 384 if spec.head == "question_answering" else 128


@dataclass
class TaskData:
    train: list[Any]
    evals: dict[str, list[Any]]  # name -> examples; the first is the one runs are chosen on
    labels: list[str] | None
    note: str = ""
    files: dict[str, str] = field(default_factory=dict)


# ---- data ------------------------------------------------------------------------------------------------------
def _subset(items: list[Any], n: int | None, seed: int | None) -> list[Any]:
    """The first n (eval, so numbers are comparable) or a seeded random n in file order (train)."""
    if n is None or n >= len(items):
        return items
    if seed is None:
        return items[:n]
    keep = sorted(random.Random(seed).sample(range(len(items)), n))
    return [items[i] for i in keep]


def load_task_data(spec: TaskSpec, data: str | None = None, train_file: str | None = None,
                   eval_file: str | None = None, *, skip_bad_rows: bool = False, need_train: bool = True,
                   eval_split: str = "dev") -> TaskData:
    """Find and read the train and eval examples of a task.

    `train_file`/`eval_file` win; otherwise `data` is a folder holding the task's standard files. For
    SQuAD a single JSON file as `data` (only the v1.1 dev set exists offline) is split by article: 0-37
    train, 38-47 eval, and `note` says so, because such numbers are not official dev results.
    """
    opts = {"skip_bad_rows": skip_bad_rows}
    qa = spec.head == "question_answering"
    if qa and data and Path(data).is_file() and not train_file and not eval_file:
        result = spec.reader(data, **opts)
        n = result.n_articles
        cut = round(n * 38 / 48)
        train, dev = split_squad_by_article(result.examples, range(0, cut), range(cut, n))
        note = (f"SQuAD article split of {Path(data).name}: trained on articles 0-{cut - 1}, evaluated on "
                f"articles {cut}-{n - 1} (not the official train/dev protocol)")
        return TaskData(train, {"eval": dev}, None, note, {"train": str(data), "eval": str(data)})
    files: dict[str, str] = {}
    train_paths: list[Path] = []
    if train_file:
        train_paths = [Path(train_file)]
    elif need_train:
        if not data:
            raise ValueError("give --data (the task's folder) or --train FILE")
        train_paths = spec.files(data, "train")
    if eval_file:
        eval_paths = [Path(eval_file)]
    else:
        if not data:
            raise ValueError("give --data (the task's folder) or --eval FILE")
        eval_paths = spec.files(data, eval_split)
    train: list[Any] = []
    labels = list(spec.labels) if spec.labels is not None else None
    if train_paths:
        result = spec.reader(train_paths[0], **opts)
        train = list(result.examples)
        files["train"] = str(train_paths[0])
        if labels is None and spec.head == "sequence_classification":
            labels = list(result.labels or [])
    evals: dict[str, list[Any]] = {}
    for i, path in enumerate(eval_paths):
        eval_opts = dict(opts)
        if spec.name == "classification" and labels:
            eval_opts["label_list"] = labels
        result = spec.reader(path, **eval_opts)
        if labels is None and spec.head == "sequence_classification":
            labels = list(result.labels or [])
        name = "eval" if i == 0 else f"eval_{Path(path).name.split('.')[0]}"
        evals[name] = list(result.examples)
        files[name] = str(path)
    return TaskData(train, evals, labels, "", files)


def encode(spec: TaskSpec, tokenizer, examples: Sequence[Any], settings: FinetuneSettings,
           labels: Sequence[str] | None, training: bool) -> list[Feature]:
    """The head kind's features for `examples`."""
    length = settings.seq_length(spec)
    label2id = {name: i for i, name in enumerate(labels)} if labels else None
    if spec.head in ("sequence_classification", "regression"):
        return encode_classification(tokenizer, examples, length, label2id, regression=spec.head == "regression")
    if spec.head == "token_classification":
        return encode_ner(tokenizer, examples, length, label2id)
    if spec.head == "question_answering":
        return encode_squad(tokenizer, examples, length, settings.doc_stride, settings.max_query_length,
                            training=training)
    if spec.head == "multiple_choice":
        return encode_multiple_choice(tokenizer, examples, length)
    raise ValueError(f"unknown head kind {spec.head!r}")


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


def _model_inputs(batch: dict[str, torch.Tensor], with_labels: bool) -> dict[str, torch.Tensor]:
    keys = ("input_ids", "token_type_ids", "attention_mask") + (
        ("labels", "start_positions", "end_positions") if with_labels else ())
    return {k: v for k, v in batch.items() if k in keys}


@torch.no_grad()
def run_model(model, features: Sequence[Feature], batch_size: int = 64, pad_id: int = 0) -> list[Any]:
    """Raw outputs per feature in the original order: logits (numpy, unpadded) or (start, end) for QA."""
    model.eval()
    outputs: list[Any] = [None] * len(features)
    for idx, batch in iterate_batches(features, batch_size, shuffle=False, pad_id=pad_id):
        out = model(**_model_inputs(batch, with_labels=False))
        lengths = batch["attention_mask"].sum(-1).tolist()
        if hasattr(out, "start_logits"):
            s, e = out.start_logits.float().numpy(), out.end_logits.float().numpy()
            for row, i in enumerate(idx):
                outputs[i] = (s[row, :lengths[row]], e[row, :lengths[row]])
        else:
            logits = out.logits.float().numpy()
            for row, i in enumerate(idx):
                outputs[i] = logits[row, :lengths[row]] if logits.ndim == 3 else logits[row]
    return outputs


# ---- scoring ---------------------------------------------------------------------------------------------------
def decode_outputs(spec: TaskSpec, examples: Sequence[Any], features: Sequence[Feature], outputs: Sequence[Any],
                   labels: Sequence[str] | None, settings: FinetuneSettings) -> Any:
    """Task-level predictions: label ids / floats, word tag lists, or {qid: QuestionPrediction}."""
    if spec.head == "regression":
        return [float(o.reshape(-1)[0]) for o in outputs]
    if spec.head in ("sequence_classification", "multiple_choice"):
        return [int(np.argmax(o)) for o in outputs]
    if spec.head == "token_classification":
        return [align_predictions_to_words(np.argmax(o, -1), f["word_ids"], labels, f["num_words"])
                for o, f in zip(outputs, features)]
    return postprocess_squad(examples, features, [o[0] for o in outputs], [o[1] for o in outputs],
                             settings.n_best, settings.max_answer_length)


def score(spec: TaskSpec, examples: Sequence[Any], predictions: Any, labels: Sequence[str] | None) -> dict[str, Any]:
    """The task's official metric on decoded predictions."""
    if spec.head == "question_answering":
        if spec.name == "squad2":
            texts = {q: p.answer() for q, p in predictions.items()}
            diffs = {q: p.null_diff for q, p in predictions.items()}
            return squad_v2_evaluate(texts, list(examples), na_probs=diffs, na_prob_thresh=0.0)
        return squad_v1_evaluate({q: p.answer() for q, p in predictions.items()}, list(examples))
    if spec.head == "token_classification":
        return spec.metric(predictions, [list(ex.tags) for ex in examples])
    if spec.head == "regression":
        return spec.metric(predictions, [float(ex.label) for ex in examples])
    if spec.head == "multiple_choice":
        return spec.metric(predictions, [int(ex.label) for ex in examples])
    label2id = {name: i for i, name in enumerate(labels or [])}
    return spec.metric(predictions, [label2id[str(ex.label)] for ex in examples])


def evaluate_examples(model, tokenizer, spec: TaskSpec, examples: Sequence[Any], settings: FinetuneSettings,
                      labels: Sequence[str] | None) -> tuple[dict[str, Any], Any]:
    """(metrics, predictions) of `model` on labelled `examples`, plus throughput in the metrics."""
    start = time.perf_counter()
    features = encode(spec, tokenizer, examples, settings, labels, training=False)
    outputs = run_model(model, features, settings.eval_batch_size, tokenizer.pad_token_id)
    predictions = decode_outputs(spec, examples, features, outputs, labels, settings)
    metrics = score(spec, examples, predictions, labels)
    seconds = time.perf_counter() - start
    metrics["n_examples"] = len(examples)
    metrics["eval_seconds"] = round(seconds, 3)
    metrics["examples_per_second"] = round(len(examples) / max(seconds, 1e-9), 2)
    return metrics, predictions


def main_value(spec: TaskSpec, metrics: dict[str, Any]) -> float:
    """The number runs are compared on (best-threshold F1 for SQuAD v2)."""
    if spec.name == "squad2" and "best_f1" in metrics:
        return float(metrics["best_f1"])
    return float(metrics[spec.main_metric])


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
            loss = model(**_model_inputs(batch, with_labels=True)).loss
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
    data.train = _subset(data.train, settings.max_train_samples, settings.seed)
    data.evals = {k: _subset(v, settings.max_eval_samples, None) for k, v in data.evals.items()}
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

"""Task distillation for serving (Hinton et al., 2015): a fine-tuned teacher labels (many) unlabeled texts with
soft targets, a smaller student learns to mimic them on the fine-tuning stage with a distillation loss, and the
result is a predictor folder; `distill_report.json` compares teacher and student (dev metric, parameters,
measured examples/s). The student usually comes from `bertforge.pretraining.distill.init_student`.
"""
from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from bertforge.atomic import atomic_write_text
from bertforge.checkpoint import resolve_folder
from bertforge.data.shards import load_tokenizer
from bertforge.outputs import is_finished
from bertforge.pretraining.distill import StepOutput
from bertforge.settings import (MAX_BATCH, MAX_EPOCHS, MAX_SAMPLES, MAX_SEED, flat_keywords, flatten, part, setting,
                                settings_record)
from bertforge.tasks.evaluation import encode, evaluate_examples, run_model
from bertforge.tasks.finetune import FinetuneSettings, FinetuneStage, train_run
from bertforge.tasks.predictor import Predictor
from bertforge.tasks.readers import TextExample, read_classification
from bertforge.tasks.readers.generic import TEXT_ALIASES
from bertforge.tasks.readers.rows import sniff_delimiter
from bertforge.tasks.registry import HEADS, get_task
from bertforge.tasks.task_data import DataOptions, TaskData, load_task_data, subset
from bertforge.textio import open_text
from bertforge.training.engine import FaultHooks, Session
from bertforge.training.options import TrainOptions, task_distill_defaults
from bertforge.tasks.finetune_report import read_finetune_report
from bertforge.training.run import claimed_run

REPORT_FILE = "distill_report.json"


@flat_keywords
@dataclass
class TaskDistillSettings:
    """A task distillation run: teacher predictor, student checkpoint, the texts the teacher labels, and the
    engine's settings for the student's training (`train`; also given by their own names, `lr=...`)."""

    teacher: str = setting(help="a `bertforge finetune` output folder", metavar="PREDICTOR")
    student: str = setting(help="student checkpoint (e.g. `distill init`)", metavar="DIR")
    unlabeled: Sequence[str] = setting(help=".txt (one text per line, TAB before a pair) or .tsv/.csv/.jsonl with a "
                                       "text column (labels ignored)", metavar="FILE", nargs="+")
    output: str = setting(help="folder for the student predictor and distill_report.json", metavar="DIR")
    train: TrainOptions = part(
        TrainOptions, task_distill_defaults, title="training",
        # the run's steps follow from --epochs and its warmup from --warmup; its seed is --seed (or the teacher's)
        hide=("max_steps", "time_budget", "warmup_steps", "seed"),
        help={"eval_every": "evaluate every N steps (0: after every epoch)",
              "save_every": "checkpoint every N steps, so that a killed run resumes there (0: no checkpoints; a "
                            "killed run starts again)"})
    task: str | None = setting(None, "the task (default: the teacher's)")
    data: str | None = setting(None, "the task's folder (train set and dev set)", metavar="DIR")
    train_file: str | None = setting(None, "labelled train file (overrides --data)", flag="--train", metavar="FILE")
    eval_file: str | None = setting(None, "dev file (overrides --data)", flag="--eval", metavar="FILE")
    temperature: float = setting(2.0, "softmax temperature of the soft targets", positive=True, maximum=100.0)
    alpha_hard: float = setting(0.0, "weight of gold-label cross-entropy on the train set", minimum=0.0, maximum=1_000.0)
    include_train: bool = setting(True, "leave the train set out of the transfer set", flag="--no-train-texts")
    epochs: float = setting(2.0, "passes over the transfer set", positive=True, maximum=MAX_EPOCHS)
    batch_size: int = setting(32, "examples per micro-batch and process", positive=True, maximum=MAX_BATCH)
    eval_batch_size: int = setting(64, "examples per batch when the teacher labels and when timing", positive=True,
                                   maximum=MAX_BATCH)
    warmup_fraction: float = setting(0.1, "fraction of the steps for linear lr warmup", flag="--warmup",
                                     kind="probability")
    max_unlabeled: int | None = setting(None, "a seeded sample of this many texts", positive=True, maximum=MAX_SAMPLES)
    max_train_samples: int | None = setting(None, "train-set examples in the transfer set (default: the teacher's)",
                                            positive=True, maximum=MAX_SAMPLES)
    max_eval_samples: int | None = setting(None, "evaluate on the first N dev examples", positive=True, maximum=MAX_SAMPLES)
    seed: int | None = setting(None, "random seed (default: the teacher's)", minimum=0, maximum=MAX_SEED)
    timing_rounds: int = setting(3, "interleaved throughput rounds per model", positive=True, maximum=1_000)
    overwrite: bool = setting(False, "start again in an OUTPUT that holds another run (its contents are deleted)")


def read_texts(paths: Sequence[str | Path]) -> list[Any]:
    """Unlabeled TextExamples from .txt files (one per line; `text<TAB>pair`) or table files (labels dropped; a
    `.txt` whose header names the columns, `text;label_name`, is one)."""
    examples: list[Any] = []
    for p in paths:
        path = Path(p)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such unlabeled-text file")
        name = path.name.removesuffix(".gz")
        if name.endswith(".txt") and sniff_delimiter(path, TEXT_ALIASES) is None:  # not a `text;label` table
            with open_text(path) as handle:
                rows = [(i, line.rstrip("\n").split("\t", 1)) for i, line in enumerate(handle, 1) if line.strip()]
            found = [TextExample(f"{path.name}-{i}", parts[0], parts[1] if len(parts) > 1 else None, None, i)
                     for i, parts in rows]
        else:
            try:
                result = read_classification(path, skip_bad_rows=True)
            except ValueError as err:
                raise ValueError(f"{path}: cannot read texts from it ({err}); use a .txt file with one text per "
                                 "line, or a .tsv/.csv/.jsonl file with a 'text' or 'sentence' column") from None
            found = [TextExample(ex.guid, ex.text, ex.text_pair, None, ex.line) for ex in result.examples]
        if not found:
            raise ValueError(f"{path}: holds no texts")
        examples.extend(found)
    return examples


def task_distillation_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, hard_labels: torch.Tensor,
                           temperature: float, alpha_hard: float, regression: bool) -> dict[str, torch.Tensor]:
    """Soft term: KL(teacher_T || student_T) x T^2 (regression: MSE to the teacher's score). Hard term, on rows
    with a gold label (>= 0, or finite for regression), weighted by `alpha_hard`."""
    s, t = student_logits.float(), teacher_logits.float()
    if regression:
        soft = F.mse_loss(s.reshape(-1), t.reshape(-1))
        gold = torch.isfinite(hard_labels)
        hard = F.mse_loss(s.reshape(-1)[gold], hard_labels[gold].float()) if bool(gold.any()) else s.sum() * 0
    else:
        T = float(temperature)
        soft = F.kl_div(F.log_softmax(s / T, -1), F.log_softmax(t / T, -1), log_target=True,
                        reduction="batchmean") * T * T
        gold = hard_labels >= 0
        hard = F.cross_entropy(s[gold], hard_labels[gold].long()) if bool(gold.any()) else s.sum() * 0
    loss = soft + alpha_hard * hard if alpha_hard else soft
    return {"loss": loss, "loss_soft": soft, "loss_hard": hard}


def _teacher_finetune_settings(folder: Path) -> dict[str, Any]:
    """The settings `bertforge finetune` recorded in the teacher's metrics.json (train subset size, seed), by
    their own names."""
    try:
        return flatten(read_finetune_report(folder).settings)
    except (OSError, ValueError):
        return {}


def measure_throughput(predictors: dict[str, Any], inputs: list[Any], rounds: int = 3,
                       batch_size: int = 64) -> dict[str, list[float]]:
    """Examples/s of each predictor on the same inputs, interleaved round by round so that load changes on
    a shared machine hit all of them alike; one warm-up call each first."""
    for p in predictors.values():
        p.predict(inputs[:batch_size], batch_size=batch_size)
    rates: dict[str, list[float]] = {name: [] for name in predictors}
    for _ in range(max(1, rounds)):
        for name, p in predictors.items():
            p.predict(inputs, batch_size=batch_size)
            rates[name].append(p.timing["examples_per_second"])
    return rates


@dataclass
class TransferSet:
    """What the student learns from: unlabeled texts, then (optionally) the train texts, all without labels."""

    examples: list[Any]
    hard: torch.Tensor          # gold label per example; -1 (NaN for regression) where there is none
    n_unlabeled: int
    dev: list[Any]
    note: str | None


def build_transfer_set(settings: TaskDistillSettings, spec, labels: Sequence[str] | None, seed: int,
                       max_train: int | None) -> TransferSet:
    """Unlabeled texts minus any train/dev text (never train on dev), a seeded sample of them, plus the
    labelled train subset (by default the teacher's own: same size and seed as its fine-tuning)."""
    regression = HEADS[spec.head].regression
    train, dev, note = [], [], None
    if settings.data or settings.train_file or settings.eval_file:
        need_train = settings.include_train or settings.alpha_hard > 0
        data = load_task_data(spec, settings.data, settings.train_file, settings.eval_file, need_train=need_train)
        train = subset(data.train, max_train, seed) if need_train else []
        dev = subset(next(iter(data.evals.values())), settings.max_eval_samples, None)
        note = data.note or None
    seen = {(ex.text, ex.text_pair) for ex in list(train) + list(dev)}
    unlabeled = []
    for ex in read_texts(settings.unlabeled):
        if (ex.text, ex.text_pair) not in seen:
            seen.add((ex.text, ex.text_pair))
            unlabeled.append(ex)
    unlabeled = subset(unlabeled, settings.max_unlabeled, seed)
    used_train = list(train) if settings.include_train else []
    if not unlabeled and not used_train:
        raise ValueError(f"no texts to distill on: {', '.join(map(str, settings.unlabeled))} held only texts of the "
                         "train/dev sets")
    label2id = {name: i for i, name in enumerate(labels or [])}
    gold = [float(ex.label) if regression else label2id[str(ex.label)] for ex in used_train]
    missing = float("nan") if regression else -1
    hard = torch.tensor([missing] * len(unlabeled) + gold, dtype=torch.float if regression else torch.long)
    examples = [TextExample(ex.guid, ex.text, ex.text_pair, None, ex.line) for ex in unlabeled + used_train]
    return TransferSet(examples, hard, len(unlabeled), dev, note)


def task_distill_stage(soft: torch.Tensor, hard: torch.Tensor, temperature: float, alpha_hard: float):
    """A fine-tuning stage whose loss is the distillation loss against the teacher's soft targets."""
    class TaskDistillStage(FinetuneStage):
        name = "distill-task"

        def run_record(self) -> dict[str, Any]:
            return {**super().run_record(), "temperature": temperature, "alpha_hard": alpha_hard,
                    "transfer_set": len(soft)}

        def loss(self, net, batch: dict[str, Any]) -> StepOutput:
            idx = batch["idx"]
            logits = net(input_ids=batch["input_ids"].to(self.device),
                         attention_mask=batch["attention_mask"].to(self.device),
                         token_type_ids=batch["token_type_ids"].to(self.device)).logits
            losses = task_distillation_loss(logits, soft[idx].to(self.device), hard[idx].to(self.device),
                                            temperature, alpha_hard, HEADS[self.spec.head].regression)
            return StepOutput(losses["loss"], losses)

        def add_metrics(self, sums: dict[str, float], out: StepOutput, batch: dict[str, Any]) -> None:
            for k, v in out.parts.items():
                sums[k] = sums.get(k, 0.0) + float(v.detach())
            sums["micro_batches"] = sums.get("micro_batches", 0.0) + 1

        def summarize(self, sums: dict[str, float]) -> dict[str, float]:
            n = sums.get("micro_batches", 0.0)
            return {k: sums[k] / n for k in ("loss_soft", "loss_hard") if k in sums} if n else {}

    return TaskDistillStage


def compare(rows: dict[str, Any], spec, dev: list[Any], labels: Sequence[str] | None,
            rounds: int, batch_size: int) -> dict[str, Any]:
    """Dev metric, size and measured examples/s of each predictor (same inputs, interleaved timing)."""
    report: dict[str, Any] = {}
    for name, p in rows.items():
        config = p.model.config
        row: dict[str, Any] = {"path": str(p.path), "model_type": config.model_type,
                               "parameters": p.model.num_parameters(), "layers": config.num_hidden_layers,
                               "hidden_size": config.hidden_size}
        if dev:
            metrics, _ = evaluate_examples(p.model, p.tokenizer, spec, dev, p.settings, labels)
            row[spec.main_metric] = metrics[spec.main_metric]
            row["dev"] = {k: v for k, v in metrics.items() if k not in ("eval_seconds", "examples_per_second")}
        report[name] = row
    if dev:
        inputs = [ex.text if ex.text_pair is None else (ex.text, ex.text_pair) for ex in dev]
        for name, values in measure_throughput(rows, inputs, rounds, batch_size).items():
            report[name]["examples_per_second"] = round(statistics.median(values), 2)
            report[name]["examples_per_second_rounds"] = values
    return report


def distill_task(settings: TaskDistillSettings, say: Callable[[str], None] | None = None,
                 hooks: FaultHooks | None = None) -> dict[str, Any]:
    """Teacher soft targets on the transfer set -> student training -> predictor folder + distill_report.json.
    `say` receives the progress lines (the command passes print; none: quiet)."""
    say = say or (lambda msg: None)
    teacher_dir = resolve_folder(settings.teacher)
    teacher = Predictor.load(teacher_dir)
    spec, labels = teacher.spec, teacher.labels  # the teacher's label order is what its logits mean
    if settings.task and get_task(settings.task).name != spec.name:
        raise ValueError(f"{teacher_dir} was fine-tuned on {spec.name}, not {settings.task}")
    if not HEADS[spec.head].per_text:
        raise ValueError(f"task distillation handles sentence(-pair) classification and regression; {spec.name} "
                         f"has a {spec.head} head")
    resolve_folder(settings.student)
    previous = _teacher_finetune_settings(teacher_dir)
    seed = settings.seed if settings.seed is not None else int(previous.get("seed", 42))
    max_train = settings.max_train_samples if settings.max_train_samples is not None else \
        previous.get("max_train_samples")
    inputs = (settings.teacher, settings.student, *settings.unlabeled, settings.data, settings.train_file,
              settings.eval_file)
    with claimed_run(settings, "distill-task", inputs) as (session, out):
        if is_finished(out):
            say(f"{out} already holds this finished distill-task run; nothing to do")
            return json.loads((out / REPORT_FILE).read_text(encoding="utf-8")) if session.is_main else {}
        return _distill_task(settings, say, session, out, teacher, spec, labels, seed, max_train, hooks)


def _distill_task(settings: TaskDistillSettings, say: Callable[[str], None], session: Session, out: Path, teacher,
                  spec, labels: Sequence[str] | None, seed: int, max_train: int | None,
                  hooks: FaultHooks | None = None) -> dict[str, Any]:

    transfer = build_transfer_set(settings, spec, labels, seed, max_train)
    ft = FinetuneSettings(model=str(settings.student), output=str(out), data_options=DataOptions(task=spec.name),
                          train=replace(settings.train, seed=seed), max_seq_length=teacher.settings.seq_length(spec),
                          batch_size=settings.batch_size, eval_batch_size=settings.eval_batch_size,
                          epochs=settings.epochs, warmup_fraction=settings.warmup_fraction)
    say(f"{spec.name}: transfer set of {len(transfer.examples)} texts ({transfer.n_unlabeled} unlabeled, "
        f"{len(transfer.examples) - transfer.n_unlabeled} from the train set), {len(transfer.dev)} dev examples")

    start = time.perf_counter()
    try:
        features = encode(spec, teacher.tokenizer, transfer.examples, ft, None, training=False)
    except ValueError as err:
        raise ValueError(f"{', '.join(map(str, settings.unlabeled))}: {err} (a sentence-pair task needs "
                         "text<TAB>pair lines)") from None
    soft = torch.from_numpy(np.stack(run_model(teacher.model, features, settings.eval_batch_size,
                                               teacher.tokenizer.pad_token_id))).float()
    labelling_seconds = time.perf_counter() - start
    say(f"teacher labelled {len(features)} texts in {labelling_seconds:.1f}s")

    student_tokenizer = load_tokenizer(settings.student)
    if student_tokenizer.vocab != teacher.tokenizer.vocab:
        features = encode(spec, student_tokenizer, transfer.examples, ft, None, training=False)
    data = TaskData([], {"eval": transfer.dev} if transfer.dev else {}, labels, transfer.note or "")
    make_stage = task_distill_stage(soft, transfer.hard, settings.temperature, settings.alpha_hard)
    run = train_run(spec, student_tokenizer, data, features, ft, settings.train.lr, seed, out, session, hooks=hooks,
                    make_stage=make_stage)
    if not session.is_main:
        return {}

    report: dict[str, Any] = {"task": spec.name, "main_metric": spec.main_metric, "note": transfer.note,
                              "threads": torch.get_num_threads()}
    report.update(compare({"teacher": teacher, "student": Predictor.load(out)}, spec, transfer.dev, labels,
                          settings.timing_rounds, settings.eval_batch_size))
    report["size_ratio"] = round(report["student"]["parameters"] / report["teacher"]["parameters"], 4)
    if transfer.dev:
        report["speedup"] = round(report["student"]["examples_per_second"]
                                  / max(report["teacher"]["examples_per_second"], 1e-9), 3)
    report["transfer_set"] = {"unlabeled": transfer.n_unlabeled,
                              "from_train": len(transfer.examples) - transfer.n_unlabeled,
                              "files": [str(p) for p in settings.unlabeled],
                              "teacher_labelling_seconds": round(labelling_seconds, 2)}
    report["training"] = {"steps": run.steps, "epochs": settings.epochs, "seconds": run.seconds}
    report["settings"] = settings_record(settings)
    atomic_write_text(out / REPORT_FILE, json.dumps(report, indent=2, default=str) + "\n")
    if transfer.dev:
        t, s, metric = report["teacher"], report["student"], spec.main_metric
        say(f"dev {metric}: teacher {t[metric]:.4f}, student {s[metric]:.4f}; examples/s: teacher "
            f"{t['examples_per_second']:.1f}, student {s['examples_per_second']:.1f} ({report['speedup']:.2f}x); "
            f"parameters {t['parameters']:,} -> {s['parameters']:,}")
    say(f"saved predictor to {out}")
    return report

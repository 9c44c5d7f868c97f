"""Fine-tuning: the paper's recipe (AdamW, 10% warmup, linear decay, weight decay 0.01) for every task head,
as a stage of the training engine (which owns device, precision, DDP, accumulation, checkpoints and resume).

`finetune(settings)` reads the task's data, runs one training run per (learning rate, restart), keeps the
run that scores best on the eval set, reports the median and spread of all runs (BERT's small-data tasks
vary a lot between seeds), and writes a predictor folder: model + tokenizer + `task.json` + `metrics.json`
+ `curves.png` (classification and NER also `classification_report.json`, `confusion_matrix.csv` and `.png`,
from the saved predictor's predictions on the eval sets). Within a run, `keep="best"` keeps the weights of the
best evaluation.
"""
from __future__ import annotations

import logging
import math
import random
import shutil
import statistics
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

from bertforge.checkpoint import SAFE_WEIGHTS
from bertforge.data.batches import BATCH_ORDERS, EpochBatches, Feature
from bertforge.device import Precision, move_to
from bertforge.outputs import is_finished
from bertforge.settings import (MAX_BATCH, MAX_EPOCHS, MAX_LENGTH, MAX_LR, MAX_SAMPLES, SettingError, flat_keywords,
                                part, setting, settings_record)
from bertforge.tasks.evaluation import (EvalRun, default_seq_length, encode, evaluate_examples, main_value,
                                        model_inputs)
from bertforge.tasks.metrics.report import evaluation_reports, report_tables, write_reports
from bertforge.tasks.predictor import Predictor, read_task_file, write_task_file
from bertforge.tasks.registry import HEADS, TaskSpec, get_task
from bertforge.tasks.task_data import DataOptions, TaskData, load_task_data, subset
from bertforge.training.engine import Stage, TrainOptions, fit
from bertforge.training.options import finetune_defaults
from bertforge.training.metrics_log import CURVES
from bertforge.tasks.finetune_report import FinetuneReport, read_finetune_report
from bertforge.training.run import claimed_run
from bertforge.training.run_output import RESULTS, RUN_RECORDS

logger = logging.getLogger(__name__)

LR_GRID = (5e-5, 4e-5, 3e-5, 2e-5)  # the paper's fine-tuning grid (Appendix A.3)
RUN_RESULT = "run_result.json"


def parse_learning_rates(value: str) -> list[float]:
    """`grid` -> the paper's {5e-5, 4e-5, 3e-5, 2e-5}; otherwise one or more comma-separated rates."""
    if value.strip().lower() == "grid":
        return list(LR_GRID)
    try:
        return [float(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise SettingError("{learning_rates} takes a number, a comma list or 'grid', not {got!r}",
                           owner=FinetuneSettings, got=value) from None


@flat_keywords
@dataclass
class FinetuneSettings:
    """Everything one fine-tuning job needs: the checkpoint, the data, the engine's settings for each run, and
    fine-tuning's own (epochs, the lr grid, restarts, lengths); the encoding ones also go into `task.json`.
    The settings of the parts may be given by their own names: `FinetuneSettings(..., task="sst2", seed=1)`."""

    model: str = setting(help="pre-trained checkpoint folder (HF layout)", metavar="DIR")
    output: str = setting(help="folder for the predictor (new, empty, or this run's own)", metavar="DIR")
    data_options: DataOptions = part(DataOptions, title="data")
    train: TrainOptions = part(
        TrainOptions, finetune_defaults, title="training",
        # each run's steps, lr and warmup follow from --epochs, --lr and --warmup
        hide=("max_steps", "time_budget", "lr", "warmup_steps"),
        help={"seed": "random seed of the first run (run r of --restarts has seed + r); it also draws "
                      "--max-train-samples",
              "eval_every": "evaluate every N steps (0: after every epoch)",
              "save_every": "checkpoint every N steps, so that a killed run resumes there (0: no checkpoints; a "
                            "killed run starts again)"})
    epochs: float = setting(3.0, "passes over the training set", positive=True, maximum=MAX_EPOCHS)
    batch_size: int = setting(32, "examples per micro-batch and process", positive=True, maximum=MAX_BATCH)
    batch_order: str = setting("length", "how training examples form batches: length (shuffled batches of similar "
                               "length: least padding, fastest) or random (as transformers' Trainer)",
                               choices=BATCH_ORDERS)
    eval_batch_size: int = setting(64, "examples per evaluation batch", positive=True, maximum=MAX_BATCH)
    learning_rates: Sequence[float] = setting((2e-5,), "learning rate(s): 2e-5, '5e-5,3e-5' or 'grid' "
                                              "(5e-5,4e-5,3e-5,2e-5); one run per rate and restart, the best is kept",
                                              flag="--lr", metavar="LR|grid", parse=parse_learning_rates, maximum=MAX_LR)
    restarts: int = setting(1, "runs per learning rate, each with another seed", positive=True, maximum=1_000)
    max_seq_length: int | None = setting(None, "tokens per example (default: 384 for SQuAD, 128 otherwise), up to "
                                         "the checkpoint's positions (4,096 for a lengthened Longformer)",
                                         positive=True, maximum=MAX_LENGTH)
    max_train_samples: int | None = setting(None, "train on a seeded sample of this many examples", positive=True,
                                            maximum=MAX_SAMPLES)
    max_eval_samples: int | None = setting(None, "evaluate on the first N examples", positive=True, maximum=MAX_SAMPLES)
    warmup_fraction: float = setting(0.1, "fraction of each run's steps for linear lr warmup", flag="--warmup",
                                     kind="probability")
    doc_stride: int = setting(128, "SQuAD: tokens between window starts", positive=True, maximum=MAX_LENGTH)
    max_query_length: int = setting(64, "SQuAD: question tokens kept", positive=True, maximum=MAX_LENGTH)
    max_answer_length: int = setting(30, "SQuAD: longest answer span in tokens", positive=True, maximum=MAX_LENGTH)
    n_best: int = setting(20, "SQuAD: start and end candidates scored per window", positive=True, maximum=1_000)
    overwrite: bool = setting(False, "start again in an OUTPUT that holds another run (its contents are deleted)")

    def seq_length(self, spec: TaskSpec) -> int:
        return default_seq_length(spec, self.max_seq_length)


# ---- model -----------------------------------------------------------------------------------------------------
def build_model(spec: TaskSpec, model_dir: str | Path, labels: Sequence[str] | None):
    """The task's head class on top of the checkpoint's encoder; label names go into the config."""
    from bertforge.model.auto import model_class_for
    head = HEADS[spec.head]
    cls = model_class_for(model_dir, head.model_role)
    overrides: dict[str, Any] = {}
    if head.regression:
        overrides = {"id2label": {0: "score"}, "problem_type": head.problem_type}
    elif head.labelled:
        overrides = {"id2label": dict(enumerate(labels or [])), "problem_type": head.problem_type}
    return cls.from_pretrained(model_dir, **overrides)


# ---- training ----------------------------------------------------------------------------------------------------
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
    folder: Path | None = None
    eval_run: EvalRun | None = None  # the saved weights' outputs on the first eval set, when training scored them


class FinetuneStage(Stage):
    """A task head on labelled features: the engine's stage for fine-tuning (and, with another loss, for task
    distillation)."""

    name = "finetune"
    find_unused_parameters = False
    recorded_later = {"batch_order": "length"}

    def __init__(self, spec: TaskSpec, settings: FinetuneSettings, model: torch.nn.Module, tokenizer: Any,
                 batches: EpochBatches, eval_examples: Sequence[Any], labels: Sequence[str] | None,
                 precision: Precision, task_note: str = "") -> None:
        self.spec, self.settings, self.model, self.tokenizer = spec, settings, model, tokenizer
        self.batches, self.eval_examples, self.labels = batches, eval_examples, labels
        self.precision, self.task_note = precision, task_note
        self.device = next(model.parameters()).device
        self.null_threshold: float | None = None  # SQuAD v2: the best no-answer threshold of the latest evaluation
        self.last_eval_run: EvalRun | None = None  # the latest evaluation's outputs, for a head with a class report
        # checkpoints (weights + optimizer) only when asked for: a fine-tuned predictor is the result
        self.final_checkpoint = settings.train.save_every > 0

    # what the engine calls
    def run_record(self) -> dict[str, Any]:
        s = self.settings
        return {"task": self.spec.name, "model": s.model, "batch_size": s.batch_size, "batch_order": s.batch_order,
                "epochs": s.epochs,
                "max_seq_length": s.seq_length(self.spec), "warmup_fraction": s.warmup_fraction,
                "train_features": len(self.batches.items), "labels": list(self.labels or [])}

    def next_batch(self) -> dict[str, Any]:
        return self.batches.next()

    def loss(self, net: torch.nn.Module, batch: dict[str, Any]) -> Any:
        return net(**move_to(model_inputs(batch, with_labels=True), self.device))

    def add_metrics(self, sums: dict[str, float], out: Any, batch: dict[str, Any]) -> None:
        rows = float(len(batch["idx"]))
        sums["loss_sum"] = sums.get("loss_sum", 0.0) + float(out.loss.detach()) * rows
        sums["rows"] = sums.get("rows", 0.0) + rows

    def summarize(self, sums: dict[str, float]) -> dict[str, float]:
        return {"train_loss": sums["loss_sum"] / sums["rows"]} if sums.get("rows") else {}

    def evaluate(self) -> dict[str, float]:
        if not self.eval_examples:
            return {}
        kept: list[EvalRun] | None = [] if HEADS[self.spec.head].report else None
        metrics, _ = evaluate_examples(self.model, self.tokenizer, self.spec, self.eval_examples, self.settings,
                                       self.labels, device=self.device, precision=self.precision, keep=kept)
        self.last_eval_run = kept[0] if kept else None
        if self.spec.name == "squad2" and "best_f1_thresh" in metrics:
            self.null_threshold = float(metrics["best_f1_thresh"])
        return {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
                and k not in ("eval_seconds", "examples_per_second")}

    def score(self, metrics: dict[str, float]) -> float | None:
        try:
            return main_value(self.spec, metrics)
        except KeyError:
            return None

    def state_dict(self) -> dict[str, Any]:
        return self.batches.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.batches.load_state_dict(state)

    def save(self, folder: Path) -> None:
        save_predictor(folder, self.model, self.tokenizer, self.spec, self.settings, self.labels, self.task_note,
                       self.null_threshold)

    def load_weights(self, folder: Path) -> None:
        super().load_weights(folder)
        self.null_threshold = read_task_file(Path(folder)).get("null_threshold")


def run_options(settings: FinetuneSettings, lr: float, seed: int, total: int, steps_per_epoch: int) -> TrainOptions:
    """The engine's options for one fine-tuning run: the settings' own, with the run's steps, lr, warmup and
    seed (and evaluation after every epoch unless told otherwise)."""
    train = settings.train
    return replace(train, max_steps=total, lr=lr, warmup_steps=int(settings.warmup_fraction * total), seed=seed,
                   eval_every=train.eval_every or steps_per_epoch)


def train_run(spec: TaskSpec, tokenizer, data: TaskData, train_features: list[Feature], settings: FinetuneSettings,
              lr: float, seed: int, run_dir: Path, session, hooks=None,
              make_stage: Callable[..., Any] | None = None) -> RunResult:
    """One fine-tuning run from the pre-trained weights, through the engine; the run's predictor is saved in
    `run_dir` (resumed from its checkpoints when it has some)."""
    info = session.info
    torch.manual_seed(seed)
    random.seed(seed)
    model = build_model(spec, settings.model, data.labels).to(session.device)
    batches = EpochBatches(train_features, settings.batch_size, seed, tokenizer.pad_token_id, info.rank,
                           info.world_size, order=settings.batch_order)
    steps_per_epoch = max(1, batches.per_epoch // settings.train.grad_accum)
    total = max(1, math.ceil(steps_per_epoch * settings.epochs))
    first_eval = next(iter(data.evals.values()), [])
    precision = session.precision(settings.train.precision)
    make = make_stage or FinetuneStage
    stage = make(spec, settings, model, tokenizer, batches, first_eval, data.labels, precision, data.note)
    opts = run_options(settings, lr, seed, total, steps_per_epoch)
    result = fit(stage, opts, session, run_dir, hooks=hooks)
    metrics = result.final_eval
    value = stage.score(metrics) if metrics else float("nan")
    curves = run_dir / CURVES
    # the engine saves the last step's weights, which its last evaluation scored, unless it kept an earlier best
    saved_last = opts.keep != "best" or result.best is None or result.best["step"] == result.step
    return RunResult(run_dir.name, lr, seed, metrics, value if value is not None else float("nan"),
                     round(result.elapsed, 2), result.step, curves if curves.exists() else None, run_dir,
                     getattr(stage, "last_eval_run", None) if saved_last else None)


def finetune(settings: FinetuneSettings, say: Callable[[str], None] | None = None, hooks=None) -> FinetuneReport:
    """Run every (lr, restart), keep the best on the eval set, save it as a predictor; returns what metrics.json
    holds, as a `FinetuneReport` (under torchrun, rank 0's is the whole of it: the other ranks' lacks the eval
    sets scored after training, and is empty when OUTPUT held the finished run). `say` receives the progress lines
    (the command passes print; none: quiet)."""
    from bertforge.tokenization import load_tokenizer

    spec = get_task(settings.data_options.task)
    _check_settings(settings)
    train = settings.train
    with claimed_run(settings, "finetune", _inputs(settings)) as (session, out):
        main = session.is_main
        say = say if main and say else (lambda msg: None)
        if is_finished(out):
            say(f"{out} already holds this finished finetune run; nothing to do")
            return read_finetune_report(out) if main else FinetuneReport()
        data = load_task_data(None, settings.data_options)
        spec = data.spec or spec  # e.g. `classification` data whose labels are scores is a regression task
        if data.note:
            say(f"NOTE: {data.note}")
        data.train = subset(data.train, settings.max_train_samples, train.seed)
        data.evals = {k: subset(v, settings.max_eval_samples, None) for k, v in data.evals.items()}
        if not data.train:
            raise ValueError("no training examples")
        tokenizer = load_tokenizer(settings.model)
        _check_length_fits(settings, spec)
        train_features = encode(spec, tokenizer, data.train, settings, data.labels, training=True)
        say(f"{spec.name}: {len(data.train)} train examples ({len(train_features)} features), "
            + ", ".join(f"{len(v)} {k} examples" for k, v in data.evals.items()))

        grid = [(lr, train.seed + r) for lr in settings.learning_rates for r in range(settings.restarts)]
        runs: list[RunResult] = []
        for lr, seed in grid:
            name = f"lr{lr:g}_seed{seed}"
            run_dir = out if len(grid) == 1 else out / "runs" / name
            result = train_run(spec, tokenizer, data, train_features, settings, lr, seed, run_dir, session, hooks)
            say(f"  run {name}: {_main_metric_name(spec)} = {result.value:.4f} ({result.steps} steps, "
                f"{result.seconds:.1f}s)")
            runs.append(result)
        best = max(runs, key=lambda x: x.value if math.isfinite(x.value) else -math.inf)
        report = _report(spec, settings, data, train_features, runs, best)
        if main:
            if best.folder != out:  # a grid: the best run's predictor becomes OUTPUT's
                _copy_predictor(best.folder, out)
                for run in runs:
                    _drop_weights(run.folder)
                if best.curves is not None:
                    shutil.copyfile(best.curves, out / CURVES)
            runs_kept = _evaluate_saved(out, spec, data, settings, session, report, best.eval_run)
            report.to_json(out / RESULTS, default=_json_default)
            class_reports = evaluation_reports(spec.head, runs_kept, data.labels)
            write_reports(out, class_reports)
            for name, table in report_tables(class_reports).items():
                say(f"{name}:\n{table.rstrip()}")
        values = [x.value for x in runs]
        say(f"best {best.name}: {report.main_metric} = {best.value:.4f}; over {len(values)} runs median "
            f"{report.summary['median']:.4f} (min {min(values):.4f}, max {max(values):.4f})")
        say(f"saved predictor to {out}")
    return report


def _evaluate_saved(out: Path, spec: TaskSpec, data: TaskData, settings: FinetuneSettings, session,
                    report: FinetuneReport, scored: EvalRun | None) -> dict[str, tuple[list[Any], EvalRun]]:
    """Score the saved predictor on the eval sets training did not report (MNLI mismatched: into `report`, a key
    after "settings") and, for a head with a per-class report, on the first one too; returns {set: (examples,
    run)} of the sets run.

    The first set's predictions must be those of the weights saved (the best evaluation's, or a grid's best run):
    `scored`, the outputs of the evaluation that scored them, when training made it; else the set is run again."""
    sets = list(data.evals.items())
    first = 0 if HEADS[spec.head].report else 1
    kept: dict[str, tuple[list[Any], EvalRun]] = {}
    if first == 0 and sets and scored is not None:
        kept[sets[0][0]] = (sets[0][1], scored)
        first = 1
    if not sets[first:]:
        return kept
    predictor = Predictor.load(out, device=session.device, precision=session.precision(settings.train.precision))
    for i, (name, examples) in enumerate(sets[first:], first):
        runs: list[EvalRun] = []
        metrics, _ = evaluate_examples(predictor.model, predictor.tokenizer, spec, examples, settings, data.labels,
                                       device=session.device, precision=predictor.precision, keep=runs)
        if i > 0:
            report.extra[name] = metrics
        kept[name] = (examples, runs[0])
    return kept


def _check_settings(s: FinetuneSettings) -> None:
    lrs = ",".join(f"{lr:g}" for lr in s.learning_rates) or "nothing"
    checks = {  # setting: (holds, what it must be, what was given)
        "epochs": (s.epochs > 0, "above 0", s.epochs), "batch_size": (s.batch_size > 0, "at least 1", s.batch_size),
        "restarts": (s.restarts > 0, "at least 1", s.restarts),
        "grad_accum": (s.train.grad_accum > 0, "at least 1", s.train.grad_accum),
        "eval_batch_size": (s.eval_batch_size > 0, "at least 1", s.eval_batch_size),
        "doc_stride": (s.doc_stride > 0, "at least 1", s.doc_stride),
        "learning_rates": (bool(s.learning_rates) and all(lr > 0 for lr in s.learning_rates),
                           "one or more rates above 0", lrs),
        "warmup_fraction": (0 <= s.warmup_fraction < 1, "a fraction in [0, 1)", s.warmup_fraction)}
    for name, (ok, expected, given) in checks.items():
        if not ok:
            raise SettingError("{" + name + "} must be {expected}, got {got}", owner=FinetuneSettings,
                               expected=expected, got=given)
    if s.train.keep not in ("best", "last"):
        raise SettingError("{keep} must be best or last, got {got!r}", owner=FinetuneSettings, got=s.train.keep)


def _check_length_fits(settings: FinetuneSettings, spec: TaskSpec) -> None:
    """--max-seq-length up to the checkpoint's positions (4,096 for a lengthened Longformer), not past them."""
    from bertforge.model.auto import AutoConfig
    from bertforge.tasks.predictor import model_positions
    most = model_positions(AutoConfig.from_pretrained(settings.model))
    if most is not None and settings.seq_length(spec) > most:
        raise SettingError("{max_seq_length} {got:,} is more than the {most:,} tokens {model} {path} reads (its "
                           "position table)", owner=FinetuneSettings, got=settings.seq_length(spec), most=most,
                           path=settings.model)


def _inputs(settings: FinetuneSettings) -> tuple[str | None, ...]:
    """What a fine-tuning run reads: `--overwrite` must never empty one of them."""
    d = settings.data_options
    return settings.model, d.data, d.train_file, d.eval_file


def _main_metric_name(spec: TaskSpec) -> str:
    return spec.main_metric if spec.name != "squad2" else "best_f1"


def _report(spec: TaskSpec, settings: FinetuneSettings, data: TaskData, train_features: list[Feature],
            runs: list[RunResult], best: RunResult) -> FinetuneReport:
    values = [x.value for x in runs]
    return FinetuneReport(
        task=spec.name, main_metric=_main_metric_name(spec), note=data.note or None, files=data.files,
        n_train_examples=len(data.train), n_train_features=len(train_features), eval=best.metrics,
        best_run={"name": best.name, "lr": best.lr, "seed": best.seed, "value": best.value},
        runs=[{"name": x.name, "lr": x.lr, "seed": x.seed, "value": x.value, "steps": x.steps,
               "seconds": x.seconds, "eval": x.metrics} for x in runs],
        summary={"median": statistics.median(values), "min": min(values), "max": max(values),
                 "stdev": statistics.stdev(values) if len(values) > 1 else 0.0, "n_runs": len(values)},
        settings=settings_record(settings))


def _copy_predictor(source: Path, target: Path) -> None:
    """The files of a run's predictor (model, tokenizer, task.json) into `target`, each replaced atomically."""
    from bertforge.atomic import atomic_path
    for path in sorted(source.iterdir()):
        if path.is_file() and path.name not in RUN_RECORDS:
            with atomic_path(target / path.name) as tmp:
                shutil.copyfile(path, tmp)


def _drop_weights(folder: Path | None) -> None:
    """A finished grid run keeps its logs and curves, not a second copy of the weights."""
    if folder is not None:
        (folder / SAFE_WEIGHTS).unlink(missing_ok=True)


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def save_predictor(out: Path, model, tokenizer, spec: TaskSpec, settings: FinetuneSettings,
                   labels: Sequence[str] | None, note: str = "", null_threshold: float | None = None) -> None:
    """Model (HF layout) + tokenizer + `task.json`: everything `Predictor.load` needs."""
    out = Path(out)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    task = {
        "task": spec.name, "head": spec.head, "labels": list(labels) if labels is not None else None,
        "max_seq_length": settings.seq_length(spec), "doc_stride": settings.doc_stride,
        "max_query_length": settings.max_query_length, "max_answer_length": settings.max_answer_length,
        "n_best": settings.n_best, "note": note or None,
    }
    if null_threshold is not None:
        task["null_threshold"] = null_threshold
    write_task_file(out, task)

"""One fine-tuning run of a GLUE suite — a task, a seed, a learning rate — as a resumable unit in its own folder.

    OUTPUT/units/<task>/seed<S>-lr<LR>/
        run/         the fine-tuning run: `bertforge finetune`'s output folder (checkpoints while it runs,
                     metrics.jsonl, curves.png, metrics.json; the predictor only with keep_predictors)
        unit.log     everything the run printed
        unit.json    the result, written atomically once the run is over: a unit is finished iff it exists

A unit killed midway resumes from the newest checkpoint of `run/` (the engine's exact resume); one killed
before its first checkpoint starts again.
"""
from __future__ import annotations

import json
import math
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertforge.atomic import atomic_write_text
from bertforge.evaluation.protocols import Protocol
from bertforge.evaluation.scores import METRICS, metrics_from_report, task_score
from bertforge.tasks.finetune_report import FinetuneReport
from bertforge.training.checkpointing import list_checkpoints
from bertforge.training.metrics_log import METRICS_LOG, last_logged_step

RESULT = "unit.json"
LOG = "unit.log"
RUN = "run"
NO_MID_RUN_EVAL = 10 ** 9  # evaluation steps: only the end of a run is scored (dev sets are never used to pick epochs)


@dataclass(frozen=True)
class Unit:
    """One run to do: which task, seed and lr, where, and how much work it is (for the suite's ETA)."""

    task: str
    seed: int
    lr: float
    folder: str
    train_examples: int   # after the protocol's cap
    steps: int            # optimizer steps the run will take
    example_length: float = 1.0   # the task's mean train example length (characters): what a step costs, roughly

    @property
    def label(self) -> str:
        return f"{self.task} seed {self.seed} lr {self.lr:g}"

    @property
    def result_path(self) -> Path:
        return Path(self.folder) / RESULT


@dataclass(frozen=True)
class UnitContext:
    """What every unit of a suite shares."""

    model: str
    data: str
    protocol: Protocol
    device: str = "auto"
    precision: str = "auto"
    save_every: int = 100        # steps between checkpoints of a unit (0: an interrupted unit starts again)
    keep_predictors: bool = False


def unit_folder(output: str | Path, task: str, seed: int, lr: float) -> Path:
    return Path(output) / "units" / task / f"seed{seed}-lr{lr:g}"


def planned_steps(train_examples: int, protocol: Protocol) -> int:
    """The optimizer steps of one run, as the fine-tuning loop counts them (ceil(n / batch) batches an epoch)."""
    per_epoch = max(1, math.ceil(train_examples / protocol.batch_size))
    return max(1, math.ceil(per_epoch * protocol.epochs))


def finetune_settings(unit: Unit, ctx: UnitContext):
    """The fine-tuning library's settings for one unit: the one place a GLUE run is described to it."""
    from bertforge.tasks.finetune import FinetuneSettings
    p = ctx.protocol
    return FinetuneSettings(
        task=unit.task, model=ctx.model, output=str(Path(unit.folder) / RUN), data=ctx.data,
        epochs=p.epochs, batch_size=p.batch_size, batch_order=p.batch_order, learning_rates=(unit.lr,), restarts=1,
        max_seq_length=p.max_seq_length, max_train_samples=p.max_train_samples, max_eval_samples=p.max_eval_samples,
        seed=unit.seed, warmup_fraction=p.warmup_fraction, weight_decay=p.weight_decay,
        # no clipping: a bound no gradient norm reaches scales every gradient by exactly 1
        max_grad_norm=p.max_grad_norm if p.max_grad_norm is not None else math.inf,
        progress=False, device=ctx.device, precision=ctx.precision, eval_every=NO_MID_RUN_EVAL,
        save_every=ctx.save_every, keep_checkpoints=1, keep="last")


def run_unit(unit: Unit, ctx: UnitContext, hooks: Any = None) -> dict[str, Any]:
    """Fine-tune and score one unit (resuming its run when it has a checkpoint), write its result file, and
    drop what is no longer needed (checkpoints; the fine-tuned weights unless `keep_predictors`)."""
    from bertforge.tasks.finetune import finetune
    report = finetune(finetune_settings(unit, ctx), say=lambda line: print(line, flush=True), hooks=hooks)
    metrics = metrics_from_report(unit.task, report.to_dict())
    run = report.runs[0]
    result = {"task": unit.task, "seed": unit.seed, "lr": unit.lr, "score": task_score(unit.task, metrics),
              "metrics": metrics, "steps": run["steps"], "seconds": run["seconds"],
              "train_examples": report.n_train_examples,
              "eval_examples": _eval_sizes(report)}
    atomic_write_text(unit.result_path, json.dumps(result, indent=2) + "\n")
    tidy(unit, ctx.keep_predictors)
    return result


def _eval_sizes(report: FinetuneReport) -> dict[str, int]:
    sizes = {"dev": int(report.eval["n_examples"])}
    mismatched = report.eval_set("eval_dev_mismatched")
    if mismatched is not None:
        sizes["dev_mismatched"] = int(mismatched["n_examples"])
    return sizes


def tidy(unit: Unit, keep_predictors: bool) -> None:
    """A finished unit keeps its logs, curves and metrics; its checkpoints (and weights) go."""
    run = Path(unit.folder) / RUN
    shutil.rmtree(run / "checkpoints", ignore_errors=True)
    if not keep_predictors:
        for path in run.glob("*.safetensors"):
            path.unlink()


def read_result(unit: Unit) -> dict[str, Any] | None:
    """The unit's result if it is finished (and is this unit's), else None."""
    try:
        result = json.loads(unit.result_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except ValueError as err:
        raise ValueError(f"{unit.result_path}: not a unit result ({err}); delete it to run the unit again") from None
    expected = {"task": unit.task, "seed": unit.seed, "lr": unit.lr}
    if not isinstance(result, dict) or any(result.get(k) != v for k, v in expected.items()) \
            or set(result.get("metrics", {})) != set(METRICS[unit.task]):
        raise ValueError(f"{unit.result_path}: holds the result of another run than {unit.label}; delete it to "
                         "run the unit again")
    return result


def examples_done(unit: Unit, batch_size: int) -> int:
    """Training examples a running unit has been through, from its run's metrics.jsonl."""
    step = last_logged_step(metrics_path(unit))
    return 0 if step is None else min(step, unit.steps) * batch_size


def examples_kept(unit: Unit, batch_size: int) -> int:
    """Training examples an interrupted unit will not redo: those up to its newest checkpoint, where it resumes
    (its metrics.jsonl may show later steps, which the resumed run does again)."""
    newest = list_checkpoints(Path(unit.folder) / RUN)
    return min(newest[-1][0], unit.steps) * batch_size if newest else 0


def metrics_path(unit: Unit) -> Path:
    return Path(unit.folder) / RUN / METRICS_LOG

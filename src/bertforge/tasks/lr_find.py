"""The learning-rate finder (Smith 2017, as fastai's `lr_find`): a few hundred steps of fine-tuning with the lr
growing exponentially, to read off a peak lr for `finetune --schedule onecycle` instead of sweeping a grid.

The model and data are built exactly as `finetune` builds them (`tasks.finetune.build_model`, `task_data`, the
same features and batches), so the curve is that of the run it is for. Each step trains one batch at the next lr
of the exponential ramp `--start-lr` .. `--end-lr`; its loss is recorded and smoothed (an exponential moving
average with bias correction: step i's smoothed loss is the average of the losses so far, weighted by
beta^(i - j), so the first points are not pulled towards 0); the run stops when the smoothed loss exceeds 4x the
best so far (diverged) or a loss is not finite. Two readings of the curve: the lr where the smoothed curve falls
most steeply (per unit of log lr), between the first 10% of the steps (noise about the starting loss) and its
minimum; and the lr of the minimum / 10. The suggestion is the steepest descent, but never above the minimum / 10:
the moving average lags the raw loss, so its steepest point can sit next to the minimum, where the short ramp is
about to diverge and a whole run at that lr does (all-MiniLM-L6-v2 on the emotion messages: steepest 9.1e-4,
minimum 1.7e-3; one-cycle at 9.1e-4 stayed at 43 % accuracy after its first epoch).

The weights are loaded, trained in memory and dropped: nothing is written into the model folder, and OUTPUT gets
only `lr_find.json` (the curve, the suggestions, the settings), `lr_find.png` and the run's record.
"""
from __future__ import annotations

import math
import random
import shlex
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, ClassVar, Sequence

import numpy as np
import torch

from bertforge.data.batches import BATCH_ORDERS, EpochBatches
from bertforge.device import move_to
from bertforge.outputs import RunAlreadyFinished, fresh_output
from bertforge.settings import (MAX_BATCH, MAX_LENGTH, MAX_SAMPLES, SettingError, check_settings, field_flag,
                                flat_keywords, part, setting, settings_record)
from bertforge.tasks.evaluation import encode, model_inputs
from bertforge.tasks.finetune import FinetuneSettings, build_model
from bertforge.tasks.registry import get_task
from bertforge.tasks.task_data import DataOptions, load_task_data, subset
from bertforge.training.engine import Session
from bertforge.training.optim import build_optimizer
from bertforge.training.options import TrainOptions, finetune_defaults
from bertforge.training.progress import progress
from bertforge.training.summary import NUMBER, JsonRecord, check_kind, key

RESULT = "lr_find.json"
PLOT = "lr_find.png"
DIVERGED = 4.0      # stop once the smoothed loss is this many times the best smoothed loss
SKIP_START = 0.1    # the share of the first steps the suggestion ignores
# the engine settings an lr finder uses; the others (steps, lr, schedule, checkpoints...) are its own or moot
KEPT = ("weight_decay", "optimizer", "adam_epsilon", "max_grad_norm", "seed", "device", "precision", "progress")


@flat_keywords
@dataclass
class LrFindSettings:
    """What `lr_find` trains on and how: the settings `finetune` takes for its model and data, and the ramp."""

    model: str = setting(help="pre-trained checkpoint folder (HF layout); read, never written", metavar="DIR")
    output: str = setting(help="folder for lr_find.json and lr_find.png (new or empty, unless --overwrite)",
                          metavar="DIR")
    data_options: DataOptions = part(DataOptions, lambda: DataOptions(task="classification"), title="data",
                                     hide=("eval_file",))
    train: TrainOptions = part(TrainOptions, finetune_defaults, title="training",
                               hide=tuple(f.name for f in fields(TrainOptions) if f.name not in KEPT))
    steps: int = setting(100, "steps of the ramp (fewer if the loss diverges first)", positive=True, metavar="N",
                         maximum=100_000)
    start_lr: float = setting(1e-7, "the first step's learning rate", positive=True, metavar="LR", maximum=10.0)
    end_lr: float = setting(1.0, "the last step's learning rate", positive=True, metavar="LR", maximum=10.0)
    smoothing: float = setting(0.98, "beta of the loss's exponential moving average (0: no smoothing)",
                               kind="probability", metavar="BETA")
    batch_size: int = setting(32, "examples per batch (as finetune's)", positive=True, maximum=MAX_BATCH)
    batch_order: str = setting("length", "how examples form batches (as finetune's)", choices=BATCH_ORDERS)
    max_seq_length: int | None = setting(None, "tokens per example (default: 384 for SQuAD, 128 otherwise)",
                                         positive=True, maximum=MAX_LENGTH)
    max_train_samples: int | None = setting(None, "train on a seeded sample of this many examples", positive=True,
                                            maximum=MAX_SAMPLES)
    overwrite: bool = setting(False, "empty an OUTPUT that holds something else first")

    def __post_init__(self) -> None:
        self.model, self.output = str(self.model), str(self.output)  # a Path is welcome; the record holds text

    def check(self) -> None:
        check_settings(self)
        check_settings(self.train)
        if self.end_lr <= self.start_lr:
            raise SettingError("{end_lr} must be above {start_lr}, got {end} <= {start}", owner=LrFindSettings,
                               end=self.end_lr, start=self.start_lr)
        if self.steps < 2:
            raise SettingError("{steps} must be at least 2 for a curve, got {got}", owner=LrFindSettings,
                               got=self.steps)
        if not 0.0 <= self.smoothing < 1.0:
            raise SettingError("{smoothing} must be at least 0 and below 1, got {got}", owner=LrFindSettings,
                               got=self.smoothing)

    def finetune_settings(self) -> FinetuneSettings:
        """The `finetune` settings this finder stands for (what encoding and batching read)."""
        return FinetuneSettings(model=self.model, output=self.output, data_options=self.data_options, train=self.train,
                                batch_size=self.batch_size, batch_order=self.batch_order,
                                max_seq_length=self.max_seq_length, max_train_samples=self.max_train_samples)


@dataclass(kw_only=True)
class LrFindResult(JsonRecord):
    """lr_find.json: the suggestions, why the ramp stopped, the curve (`lrs`, `losses`, `smoothed`: one value per
    step run) and the settings; `output` is the folder it is in (not a key of the file). `min_loss_lr_div10` and
    `steps_run` follow from the other keys, and are filled in when not given."""

    FILE: ClassVar[str] = RESULT
    suggested_lr: float = key(NUMBER)           # min(steepest_lr, min_loss_lr / 10)
    # the steepest descent of the smoothed loss (None: it falls nowhere before its minimum)
    steepest_lr: float | None = key(NUMBER + (type(None),), None)
    min_loss_lr: float = key(NUMBER)
    min_loss_lr_div10: float = key(NUMBER, None)
    stopped_by: str = key(str)                  # "diverged", "non-finite" or "steps"
    steps_run: int = key(int, None)
    command: str = key(str)                     # the `bertforge finetune` command at the suggested lr
    lrs: list[float] = key(list)
    losses: list[float] = key(list)
    smoothed: list[float] = key(list)
    settings: dict[str, Any] = key(dict, factory=dict)  # the LrFindSettings record
    output: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.min_loss_lr_div10 is None:
            self.min_loss_lr_div10 = self.min_loss_lr / 10
        if self.steps_run is None:
            self.steps_run = len(self.lrs)

    def _check(self, where: str, prefix: str) -> None:
        """One number per step run in each curve (what the plot and the suggestions read)."""
        if not self.lrs:
            raise ValueError(f"{where}key 'lrs' is empty (no step run)")
        for name in ("lrs", "losses", "smoothed"):
            values = getattr(self, name)
            for i, value in enumerate(values):
                check_kind(value, NUMBER, f"{where}key '{name}[{i}]'")
            if len(values) != self.steps_run:
                raise ValueError(f"{where}key {name!r} has {len(values)} value{'s' * (len(values) != 1)}, not "
                                 f"steps_run's {self.steps_run}")


def read_lr_find(folder: str | Path) -> LrFindResult:
    """The lr_find.json an lr-find run wrote in `folder` (FileNotFoundError or ValueError in one line naming the file
    and the key)."""
    result = LrFindResult.from_json(Path(folder) / RESULT)
    result.output = Path(folder)
    return result


# ---- the curve ---------------------------------------------------------------------------------------------------
def lr_ramp(start: float, end: float, steps: int) -> list[float]:
    """`steps` lrs from `start` to `end`, each the previous one times the same factor."""
    return [start * (end / start) ** (i / (steps - 1)) for i in range(steps)]


def smooth(losses: Sequence[float], beta: float) -> list[float]:
    """The bias-corrected exponential moving average of `losses` (fastai's `SmoothenValue`)."""
    average, out = 0.0, []
    for i, loss in enumerate(losses, start=1):
        average = beta * average + (1 - beta) * loss
        out.append(average / (1 - beta ** i))
    return out


def steepest_descent(lrs: Sequence[float], smoothed: Sequence[float]) -> tuple[float | None, float]:
    """(the lr where the smoothed loss falls most steeply per unit of log lr, before its minimum and after the first
    `SKIP_START` of the points, or None when it does not fall there; the lr of the minimum)."""
    curve, logs = np.asarray(smoothed, dtype=np.float64), np.log(np.asarray(lrs, dtype=np.float64))
    low = int(np.argmin(curve))
    start = int(len(curve) * SKIP_START)
    if low - start < 1:
        return None, lrs[low]
    slopes = np.diff(curve[start:low + 1]) / np.diff(logs[start:low + 1])
    return lrs[start + int(np.argmin(slopes))], lrs[low]


def suggestions(lrs: Sequence[float], smoothed: Sequence[float]) -> tuple[float, float | None, float]:
    """(the suggested lr: the steepest descent, at most the minimum's lr / 10; the steepest descent; the minimum's
    lr)."""
    steepest, low = steepest_descent(lrs, smoothed)
    return (low / 10 if steepest is None else min(steepest, low / 10)), steepest, low


# ---- the run -----------------------------------------------------------------------------------------------------
def lr_find(settings: LrFindSettings | None = None, say: Callable[[str], None] | None = None,
            **given: Any) -> LrFindResult:
    """Run the finder and write OUTPUT/lr_find.json and lr_find.png; see the module. Settings as an
    `LrFindSettings` or by name: `lr_find(model="m", output="o", task="sst2", data="glue/SST-2")`. An OUTPUT that
    already holds this finished finder run is read back, not run again."""
    settings = settings if settings is not None else LrFindSettings(**given)
    say = say or (lambda msg: None)
    settings.check()
    spec = get_task(settings.data_options.task)
    record = settings_record(settings)
    d = settings.data_options
    try:
        with fresh_output(settings.output, verb="lr-find", overwrite=settings.overwrite, settings=record,
                          inputs=(settings.model, d.data, d.train_file)) as out:
            result = _run(settings, spec, say)
            result.output, result.settings = out, record
            result.to_json(out / RESULT, default=str)
            plot(result, out / PLOT)
    except RunAlreadyFinished:
        say(f"{settings.output} already holds this finished lr-find run; nothing to do")
        return read_lr_find(settings.output)
    return result


def _run(settings: LrFindSettings, spec, say: Callable[[str], None]) -> LrFindResult:
    from bertforge.tokenization import load_tokenizer

    train = settings.train
    with Session(train.device) as session:
        if session.info.world_size > 1:
            raise SettingError("lr-find runs in one process, not under torchrun ({n} processes)",
                               n=session.info.world_size)
        data = load_task_data(None, settings.data_options)
        spec = data.spec or spec
        examples = subset(data.train, settings.max_train_samples, train.seed)
        if not examples:
            raise ValueError("no training examples")
        tokenizer = load_tokenizer(settings.model)
        features = encode(spec, tokenizer, examples, settings.finetune_settings(), data.labels, training=True)
        say(f"{spec.name}: {len(examples)} train examples ({len(features)} features); lr {settings.start_lr:g} to "
            f"{settings.end_lr:g} over {settings.steps} steps")
        torch.manual_seed(train.seed)
        random.seed(train.seed)
        model = build_model(spec, settings.model, data.labels).to(session.device)
        batches = EpochBatches(features, settings.batch_size, train.seed, tokenizer.pad_token_id,
                               order=settings.batch_order)
        lrs, losses, stopped_by = _ramp(model, batches, settings, session)
    smoothed = smooth(losses, settings.smoothing)
    suggested, steepest, min_loss_lr = suggestions(lrs, smoothed)
    return LrFindResult(lrs=lrs, losses=losses, smoothed=smoothed, suggested_lr=suggested, min_loss_lr=min_loss_lr,
                        stopped_by=stopped_by, command=finetune_command(settings, suggested), steepest_lr=steepest)


def _ramp(model: torch.nn.Module, batches: EpochBatches, settings: LrFindSettings,
          session: Session) -> tuple[list[float], list[float], str]:
    """Train one batch per lr of the ramp; (the lrs run, their losses, why it stopped)."""
    train = settings.train
    precision = session.precision(train.precision)
    scaler = precision.grad_scaler()
    optimizer = build_optimizer(model, settings.start_lr, weight_decay=train.weight_decay, eps=train.adam_epsilon,
                                kind=train.optimizer)
    device = next(model.parameters()).device
    model.train()
    lrs, losses, stopped_by = [], [], "steps"
    average, best = 0.0, math.inf
    bar = progress(settings.steps, bar=train.progress, desc="lr-find", dynamic_ncols=True)
    for i, lr in enumerate(lr_ramp(settings.start_lr, settings.end_lr, settings.steps), start=1):
        for group in optimizer.param_groups:
            group["lr"] = lr
        with precision.autocast():
            loss = model(**move_to(model_inputs(batches.next(), with_labels=True), device)).loss
        value = float(loss.detach())
        if not math.isfinite(value):
            stopped_by = "non-finite"
            break
        (scaler.scale(loss) if scaler is not None else loss).backward()
        if scaler is not None:
            scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), train.max_grad_norm)
        if scaler is not None:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        lrs.append(lr)
        losses.append(value)
        average = settings.smoothing * average + (1 - settings.smoothing) * value
        smoothed = average / (1 - settings.smoothing ** i)
        best = min(best, smoothed)
        bar.set_postfix({"lr": f"{lr:.2e}", "loss": f"{smoothed:.4f}"}, refresh=False)
        bar.update(1)
        if smoothed > DIVERGED * best:
            stopped_by = "diverged"
            break
    bar.close()
    if not lrs:
        raise SettingError("the first step's loss is not finite; nothing to find (is {model} a trained checkpoint?)",
                           owner=LrFindSettings)
    return lrs, losses, stopped_by


def finetune_command(settings: LrFindSettings, lr: float) -> str:
    """`bertforge finetune` with this finder's model, data and batching, at `lr` with the one-cycle schedule."""
    words = ["bertforge", "finetune", "--model", settings.model]
    defaults = DataOptions(task="")
    for f in fields(DataOptions):
        value = getattr(settings.data_options, f.name)
        if f.metadata.get("cli", True) and (f.name == "task" or value != getattr(defaults, f.name)):
            words += _flag(f, value)
    for name in ("batch_size", "batch_order", "max_seq_length", "max_train_samples"):
        f = next(f for f in fields(LrFindSettings) if f.name == name)
        value = getattr(settings, name)
        if value != next(g for g in fields(FinetuneSettings) if g.name == name).default:
            words += _flag(f, value)
    if settings.train.seed != finetune_defaults().seed:
        words += ["--seed", str(settings.train.seed)]
    output = Path(settings.output)
    words += ["--output", str(output.with_name(output.name + "-finetune")), "--lr", f"{lr:.2g}",
              "--schedule", "onecycle"]
    return shlex.join(words)


def _flag(f, value: Any) -> list[str]:
    if value is True:
        return [field_flag(f)]
    if value is False:
        return ["--no-" + f.name.replace("_", "-")]
    return [field_flag(f), str(value)]  # numbers, names and paths alike


def plot(result: LrFindResult, path: Path) -> None:
    """The raw and smoothed loss against the lr (log scale); the steepest descent, the minimum's lr / 10 and the
    suggestion (the smaller of the two) marked."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(result.lrs, result.losses, color="0.75", lw=1, label="loss")
    ax.plot(result.lrs, result.smoothed, color="C0", lw=2, label="smoothed loss")
    if result.steepest_lr in result.lrs:
        at = result.lrs.index(result.steepest_lr)
        ax.plot([result.steepest_lr], [result.smoothed[at]], "o", color="C1", ms=7,
                label=f"steepest descent: {result.steepest_lr:.2g}")
    ax.axvline(result.min_loss_lr_div10, color="C2", ls="--", lw=1,
               label=f"min loss lr / 10: {result.min_loss_lr_div10:.2g}")
    ax.axvline(result.suggested_lr, color="C3", lw=2, label=f"suggested (the smaller): {result.suggested_lr:.2g}")
    ax.set_xscale("log")
    ax.set_xlabel("learning rate")
    ax.set_ylabel("training loss")
    low, high = min(result.smoothed), max(result.smoothed[0], min(result.smoothed) * 2)
    ax.set_ylim(low - 0.1 * (high - low + 1e-9), high + 0.3 * (high - low + 1e-9))
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)

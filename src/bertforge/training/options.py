"""The settings of a training run, whatever it trains: the part every training verb's settings compose
(`bertforge.settings`), and from which the command line derives each verb's training flags."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from bertforge.device import device_setting, precision_setting
from bertforge.settings import (MAX_BATCH, MAX_INTERVAL, MAX_LR, MAX_SEED, MAX_STEPS, SettingError, check_settings,
                                setting)
from bertforge.training.schedules import BY_TIME, SCHEDULE_NAMES

DIST_TIMEOUT = 1800.0  # seconds (torch's own default for gloo): long enough for rank 0's evaluations


@dataclass
class TrainOptions:
    """How a run trains, whatever it trains. A field added here is a setting, and a flag, of every training verb."""

    max_steps: int | None = setting(None, "optimizer steps (required unless --time-budget or --cpu-budget is given)",
                                    positive=True, maximum=MAX_STEPS)
    time_budget: float | None = setting(None, "wall-clock budget, e.g. 90s, 30m, 2h: the lr decays with the time "
                                        "spent and the run stops when it is spent", kind="duration", maximum=30 * 86400.0)
    cpu_budget: float | None = setting(None, "CPU-time budget, e.g. 90s, 30m, 2h: the process's CPU time in the "
                                       "training loop (all threads; times the processes under torchrun), which the "
                                       "lr decays with and the run stops at: a budget a loaded machine does not "
                                       "shrink", kind="duration", maximum=365 * 86400.0)
    lr: float = setting(1e-4, "peak learning rate (see --schedule)", positive=True, maximum=MAX_LR)
    schedule: str = setting("linear", "lr schedule: linear (warmup, then linear decay to 0: the paper's), onecycle "
                            "(rise from lr/25 over the warmup, or 30% of the steps without one, then cosine down to "
                            "lr/25e4, with AdamW's beta1 cycled 0.95-0.85-0.95), cosine (warmup, then cosine decay to "
                            "0) or constant (warmup, then flat)", choices=SCHEDULE_NAMES)
    weight_decay: float = setting(0.01, "AdamW weight decay (not on biases and LayerNorms)", non_negative=True, maximum=10.0)
    optimizer: str = setting("adamw", "optimizer: AdamW, or LAMB for large batches", choices=("adamw", "lamb"))
    adam_epsilon: float = setting(1e-6, "the optimizer's epsilon (BERT's 1e-6; transformers' Trainer and "
                                  "sentence-transformers use 1e-8)", positive=True, maximum=1.0)
    warmup_steps: int = setting(0, "steps of lr warmup (onecycle: of its rise)", non_negative=True, maximum=MAX_STEPS)
    grad_accum: int = setting(1, "micro-batches per optimizer step", positive=True, maximum=MAX_BATCH)
    max_grad_norm: float = setting(1.0, "clip the gradient norm to this", positive=True,
                                   maximum=1e6, inf_means="no clipping")
    max_bad_steps: int = setting(20, "stop after this many steps in a row with a non-finite loss", positive=True,
                                 maximum=1_000_000)
    save_every: int = setting(1000, "checkpoint every N steps, so that a killed run resumes there (0: only at the "
                              "end)", non_negative=True, maximum=MAX_INTERVAL)
    keep_checkpoints: int = setting(3, "how many newest checkpoints to keep while the run goes on", positive=True,
                                    maximum=1_000)
    keep_checkpoints_at_end: bool = setting(False, "keep OUTPUT/checkpoints when the run has finished (by default "
                                            "they are removed: the finished model is in OUTPUT itself)")
    eval_every: int = setting(0, "evaluate every N steps (0: at the end only)", non_negative=True,
                                 maximum=MAX_INTERVAL)
    log_every: int = setting(10, "log training metrics every N steps", positive=True, maximum=MAX_INTERVAL)
    keep: str = setting("last", "which weights the final model holds: the last step's, or the best evaluation's",
                        choices=("last", "best"))
    patience: int | None = setting(None, "stop after N evaluations without a better score", positive=True, maximum=1_000_000)
    seed: int = setting(0, "random seed (initialisation, data order, masks, dropout)", minimum=0, maximum=MAX_SEED)
    device: str = device_setting()
    precision: str = precision_setting()
    progress: bool = setting(True, "no progress bar: one line a minute with rate and ETA instead", flag="--no-progress")
    dist_timeout: float = setting(DIST_TIMEOUT, "under torchrun: how long a process waits for the others (to join the "
                                  "group, in every collective) before the run ends naming the rank and the cause, e.g. "
                                  "90s, 10m", kind="duration", positive=True, maximum=86400.0)
    tensorboard: bool = setting(False, "also write TensorBoard events to OUTPUT/tensorboard (pip install "
                                "'bertforge[tensorboard]')")

    # settings that change what a step computes: a resumed run must share them
    RESUMED = ("max_steps", "time_budget", "cpu_budget", "lr", "schedule", "weight_decay", "optimizer", "adam_epsilon",
               "warmup_steps", "grad_accum", "max_grad_norm", "seed", "precision")

    def check(self) -> None:
        """The values within their ranges, and a budget to stop at."""
        if self.max_steps is None and self.time_budget is None and self.cpu_budget is None:
            raise SettingError("give {max_steps}, {time_budget} or both (or {cpu_budget})", owner=TrainOptions)
        check_settings(self)
        if self.time_budget is not None and self.cpu_budget is not None:
            raise SettingError("give {time_budget} or {cpu_budget}, not both: the lr follows one clock",
                               owner=TrainOptions)
        for name in ("time_budget", "cpu_budget"):
            budget = getattr(self, name)
            if budget is not None and budget <= 0:
                raise SettingError(f"{{{name}}} must be positive, got {{got}}", owner=TrainOptions, got=budget)
            if budget is not None and self.schedule not in BY_TIME:
                raise SettingError(f"{{schedule}} {{name}} is defined over steps and cannot follow {{{name}}}: give "
                                   "{max_steps} instead, or a schedule of {by_time}", owner=TrainOptions,
                                   name=self.schedule, by_time=", ".join(BY_TIME))

    @property
    def budget(self) -> tuple[str, float] | None:
        """The clock the run is budgeted on ("time" or "cpu") and its seconds, or None for a run of steps."""
        if self.cpu_budget is not None:
            return "cpu", self.cpu_budget
        return ("time", self.time_budget) if self.time_budget is not None else None


@dataclass
class FaultHooks:
    """Fault injection for tests: passed in by whoever starts the run, never read from the environment."""

    nan_at: Callable[[int], bool] | None = None            # 1-based step -> make its loss NaN
    inside_save: Callable[[int], None] | None = None       # runs inside a checkpoint save, before its rename


# Each training verb's defaults for the engine's settings (where they differ from the class's)
def pretrain_defaults() -> TrainOptions:
    return TrainOptions(lr=1e-4, save_every=1000, keep_checkpoints=3, max_grad_norm=1.0)


def distill_defaults() -> TrainOptions:
    return TrainOptions(lr=5e-4, max_grad_norm=5.0, save_every=1000, keep_checkpoints=3)


def seq2seq_defaults() -> TrainOptions:
    return TrainOptions(lr=1e-4, warmup_steps=100, save_every=1000)


def finetune_defaults() -> TrainOptions:
    """The paper's fine-tuning: seed 42; no checkpoints unless asked for; the predictor holds the best evaluation."""
    return TrainOptions(seed=42, save_every=0, keep_checkpoints=1, keep="best")


def task_distill_defaults() -> TrainOptions:
    return TrainOptions(lr=1e-4, save_every=0, keep_checkpoints=1, keep="last")

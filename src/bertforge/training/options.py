"""The settings of a training run, whatever it trains: a plain dataclass (no torch import), so that the CLI
derives its flags from it without loading the model code."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Callable


DIST_TIMEOUT = 1800.0  # seconds (torch's own default for gloo): long enough for rank 0's evaluations


def _opt(default: Any, help: str, **meta: Any) -> Any:
    return field(default=default, metadata={"help": help, **meta})


@dataclass
class TrainOptions:
    """How a run trains, whatever it trains. The CLI derives its flags from these fields."""

    max_steps: int | None = _opt(None, "optimizer steps (required unless --time-budget is given)", positive=True)
    time_budget: float | None = _opt(None, "wall-clock budget, e.g. 90s, 30m, 2h: the lr decays with the time "
                                     "spent and the run stops when it is spent", kind="duration")
    lr: float = _opt(1e-4, "peak learning rate", positive=True)
    weight_decay: float = _opt(0.01, "AdamW weight decay (not on biases and LayerNorms)", non_negative=True)
    optimizer: str = _opt("adamw", "optimizer", choices=("adamw", "lamb"))
    warmup_steps: int = _opt(0, "steps of linear lr warmup", non_negative=True)
    grad_accum: int = _opt(1, "micro-batches per optimizer step", positive=True)
    max_grad_norm: float = _opt(1.0, "clip the gradient norm to this", positive=True)
    max_bad_steps: int = _opt(20, "stop after this many steps in a row with a non-finite loss", positive=True)
    save_every: int = _opt(1000, "checkpoint every N steps (0: only at the end)", non_negative=True)
    keep_checkpoints: int = _opt(3, "how many newest checkpoints to keep while the run goes on", positive=True)
    keep_checkpoints_at_end: bool = _opt(False, "keep OUTPUT/checkpoints when the run has finished (by default they "
                                         "are removed: the finished model is in OUTPUT itself)")
    eval_every: int = _opt(0, "evaluate every N steps (0: at the end only)", non_negative=True)
    log_every: int = _opt(10, "log training metrics every N steps", positive=True)
    keep: str = _opt("last", "which weights the final model holds: the last step's, or the best evaluation's",
                     choices=("last", "best"))
    patience: int | None = _opt(None, "stop after N evaluations without a better score", positive=True)
    seed: int = _opt(0, "random seed")
    device: str = _opt("auto", "where to train (auto: CUDA when present)", choices=("auto", "cpu", "cuda"))
    precision: str = _opt("auto", "fp32, bf16 autocast, or fp16 autocast with loss scaling (CUDA); auto: bf16 on "
                          "CUDA, fp32 on CPU", choices=("auto", "fp32", "bf16", "fp16"))
    progress: bool = _opt(True, "a progress bar (off: one line a minute with rate and ETA)", flag="--no-progress")
    dist_timeout: float = _opt(DIST_TIMEOUT, "under torchrun: how long a process waits for the others (to join the "
                               "group, in every collective) before the run ends naming the rank and the cause, e.g. "
                               "90s, 10m", kind="duration", positive=True)
    tensorboard: bool = _opt(False, "also write TensorBoard events to OUTPUT/tensorboard (pip install "
                             "'bertforge[tensorboard]')")

    # settings that change what a step computes: a resumed run must share them
    RESUMED = ("max_steps", "time_budget", "lr", "weight_decay", "optimizer", "warmup_steps", "grad_accum",
               "max_grad_norm", "seed", "precision")

    def check(self) -> None:
        if self.max_steps is None and self.time_budget is None:
            raise ValueError("give --max-steps, --time-budget or both")
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            flag = "--" + f.name.replace("_", "-")
            if f.metadata.get("positive") and not value > 0:
                raise ValueError(f"{flag} must be positive, got {value}")
            if f.metadata.get("non_negative") and value < 0:
                raise ValueError(f"{flag} must be 0 or more, got {value}")
            if "choices" in f.metadata and value not in f.metadata["choices"]:
                raise ValueError(f"{flag} must be one of {', '.join(f.metadata['choices'])}, got {value!r}")
        if self.time_budget is not None and self.time_budget <= 0:
            raise ValueError(f"--time-budget must be positive, got {self.time_budget}")


@dataclass
class FaultHooks:
    """Fault injection for tests: passed in by whoever starts the run, never read from the environment."""

    nan_at: Callable[[int], bool] | None = None            # 1-based step -> make its loss NaN
    inside_save: Callable[[int], None] | None = None       # runs inside a checkpoint save, before its rename


def pretrain_defaults() -> TrainOptions:
    return TrainOptions(lr=1e-4, save_every=1000, keep_checkpoints=3, max_grad_norm=1.0)


def distill_defaults() -> TrainOptions:
    return TrainOptions(lr=5e-4, max_grad_norm=5.0, save_every=1000, keep_checkpoints=3)

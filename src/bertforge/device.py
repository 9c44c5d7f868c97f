"""Device and precision, decided in one place for training and inference alike.

`resolve_device("auto")` picks CUDA when torch sees it (a process under `torchrun` takes the GPU of its local
rank); `Precision.resolve(name, device)` turns `--precision auto|fp32|bf16|fp16` into what a step runs under:
"auto" is bf16 autocast on CUDA and fp32 on CPU; bf16 autocast works on both; fp16 autocast (with a gradient
scaler when training) on CUDA only.

The rules are applied in three places: a training run's `Session` (its device, per local rank under `torchrun`,
and its precision, resolved once for the run), and `placement()` for inference. Everything else receives the
resolved `torch.device` and `Precision`.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, ContextManager

import torch

from bertforge.settings import SettingError, setting

DEVICES = ("auto", "cpu", "cuda")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")


def device_setting() -> Any:
    """The `device` setting (`--device`), declared once for every verb that runs a model."""
    return setting("auto", "where to run: auto (CUDA when present; under torchrun each process takes its local "
                   "rank's GPU), cpu or cuda", choices=DEVICES)


PRECISION_HELP = ("fp32, bf16 autocast, or fp16 autocast (CUDA only; training scales the loss); auto: bf16 on CUDA, "
                  "fp32 on CPU")


def precision_setting() -> Any:
    """The `precision` setting (`--precision`), declared once for every verb that runs a model."""
    return setting("auto", PRECISION_HELP, choices=PRECISIONS)


@dataclass
class DeviceOptions:
    """Where a model runs and in which precision (the training verbs have the same two in `TrainOptions`)."""

    device: str = device_setting()
    precision: str = precision_setting()


class DeviceError(SettingError, RuntimeError):
    """A device or precision this machine cannot run (a ValueError and a RuntimeError); names the setting."""


def resolve_device(device: str = "auto", local_rank: int = 0) -> torch.device:
    """"auto" picks CUDA when present; a CUDA run uses the GPU of its local rank."""
    if isinstance(device, torch.device):
        return device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise DeviceError("{device} cuda was asked for but torch sees no CUDA device")
        index = int(device.split(":", 1)[1]) if ":" in device else local_rank
        torch.cuda.set_device(index)
        return torch.device("cuda", index)
    if device != "cpu":
        raise ValueError(f"unknown device {device!r}; choose one of {', '.join(DEVICES)}")
    return torch.device("cpu")


@dataclass(frozen=True)
class Precision:
    """What a forward pass runs under: `autocast()` is a fresh context manager each call."""

    name: str                    # "fp32", "bf16" or "fp16" (never "auto")
    device: torch.device

    @classmethod
    def resolve(cls, name: str, device: torch.device) -> "Precision":
        if name not in PRECISIONS:
            raise ValueError(f"unknown precision {name!r}; choose one of {', '.join(PRECISIONS)}")
        if name == "auto":
            # CPU stays fp32 under "auto": bf16 is one flag away, but its measured gain on CPU (1.56x for a
            # mini step, docs/BENCHMARKS.md) is below what would make it the default
            name = "bf16" if device.type == "cuda" and torch.cuda.is_bf16_supported() else "fp32"
        if name == "fp16" and device.type != "cuda":
            raise DeviceError("{precision} fp16 needs a CUDA device (use bf16 or fp32 on CPU)")
        return cls(name, device)

    @property
    def dtype(self) -> torch.dtype:
        return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[self.name]

    def autocast(self) -> ContextManager[Any]:
        if self.name == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.dtype)

    def grad_scaler(self) -> "torch.amp.GradScaler | None":
        """fp16 training needs loss scaling; bf16 and fp32 do not."""
        if self.name != "fp16":
            return None
        return torch.amp.GradScaler(self.device.type)

    def __str__(self) -> str:
        return self.name


def model_device(model: Any) -> torch.device:
    """Where a model runs: its `device` attribute when it has one (torch modules, wrappers), else the CPU."""
    device = getattr(model, "device", None)
    return device if isinstance(device, torch.device) else torch.device("cpu")


def placement(device: torch.device | str | None = "auto", precision: "Precision | str | None" = "auto",
              model: Any = None) -> tuple[torch.device, Precision]:
    """Where and in which precision inference runs: the one place the inference side (predictors, embeddings,
    serving, features, generation) turns `--device` / `--precision` into objects, as a training run's `Session`
    does for training. Resolved objects pass through unchanged; `device=None` is `model`'s own device (the CPU
    when it has none) and `precision=None` is fp32."""
    dev = model_device(model) if device is None else resolve_device(device)
    if isinstance(precision, Precision):
        return dev, precision
    return dev, Precision.resolve(precision or "fp32", dev)


def move_to(batch: dict[str, Any], device: torch.device) -> dict[str, Any]:
    """Tensors of a batch on `device` (non-blocking from pinned memory); other values unchanged."""
    return {k: v.to(device, non_blocking=True) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}

"""The engine's state, and the one schema of a checkpoint's `training_state.json` (+ `.safetensors`).

`EngineState` is what a run has done so far (steps, time, skipped updates, the best evaluation, why it stopped);
the engine reads and changes it through its attributes. `TrainingState` is what a checkpoint saves: the engine's
state plus what a resume restores (optimizer, scheduler, loss scaler, the stage's data position, every rank's RNGs,
the settings a resume must match, the number of processes). Its fields are the file's keys and their annotations
are what `check_saved` holds a loaded file to: a field without a default must be there.
"""
from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class EngineState:
    """What the run has done so far: saved with every checkpoint, so a resumed run goes on where it stopped."""

    step: int = 0
    elapsed: float = 0.0                      # seconds of training, over every resume
    cpu_seconds: float = 0.0                  # CPU seconds of the training loop (all ranks), over every resume
    skipped: int = 0                          # updates skipped for a non-finite loss or gradient
    bad_in_row: int = 0
    warmup_ended_at: float | None = None      # seconds (on the budget's clock): a budgeted run decays its lr from there
    tokens_seen: int = 0
    best: dict | None = None                  # {"step", "score", "metrics"} of the best evaluation
    evals_since_best: int = 0
    stopped_by: str | None = None             # "max-steps", "time-budget", "cpu-budget" or "early-stopping"


@dataclass(kw_only=True)
class TrainingState(EngineState):
    """A checkpoint's training state: the engine's state and what a resume restores."""

    step: int                                 # required in a saved state
    optimizer: dict
    scheduler: dict
    scaler: dict | None = None                # fp16's loss scaler
    stage: dict                               # the stage's own state (its data position)
    rng: dict | list                          # the RNG states of every rank, by rank
    run: dict                                 # the settings a resume must be given again
    world_size: int

    @classmethod
    def of(cls, engine: EngineState, **parts: Any) -> TrainingState:
        return cls(**_values(engine), **parts)

    @classmethod
    def from_dict(cls, saved: dict[str, Any]) -> TrainingState:
        """A state read by `checkpointing.load_training_state` (checked by `check_saved`); fields it lacks keep their
        defaults, keys of no field are ignored."""
        return cls(**{f.name: saved[f.name] for f in dataclasses.fields(cls) if f.name in saved})

    def to_dict(self) -> dict[str, Any]:
        """The values by field name (not copied: the optimizer's tensors are saved as they are)."""
        return _values(self)

    def engine(self) -> EngineState:
        """The engine's part, to go on with."""
        return EngineState(**{f.name: getattr(self, f.name) for f in dataclasses.fields(EngineState)})


def _values(state: EngineState) -> dict[str, Any]:
    return {f.name: getattr(state, f.name) for f in dataclasses.fields(state)}


def check_saved(saved: Any, where: Path) -> str | None:
    """What is wrong with a loaded training state, in one line naming the field, or None when it fits the schema
    (every required field present, every field of its declared type; `bool` is no number)."""
    if not isinstance(saved, dict):
        return f"the training state must be an object, got {type(saved).__name__}"
    hints = typing.get_type_hints(TrainingState)
    for f in sorted(dataclasses.fields(TrainingState), key=_required_first):
        if f.name not in saved:
            if _required(f):
                return f"field {f.name!r} is missing"
            continue
        kinds = _kinds(hints[f.name])
        value = saved[f.name]
        if not isinstance(value, kinds) or isinstance(value, bool):
            return (f"field {f.name!r} has type {type(value).__name__}, expected "
                    f"{' or '.join(k.__name__ for k in kinds)}")
    return None


def _required(f: dataclasses.Field) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


def _required_first(f: dataclasses.Field) -> bool:
    return not _required(f)


def _kinds(annotation: Any) -> tuple[type, ...]:
    """The types a JSON-loaded value of `annotation` may have (a float may have been saved as an int)."""
    parts = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    kinds: list[type] = []
    for part in parts:
        part = typing.get_origin(part) or part
        kinds += [int, float] if part is float else [type(None) if part is None else part]
    return tuple(kinds)

"""Resuming a run: the newest complete checkpoint every rank sees, checked against this run's settings, number of
processes and own objects before anything of it is loaded, then restored — weights, optimizer, schedule, gradient
scaler, the stage's data position and every rank's RNG — so the run goes on bitwise as if never interrupted."""
from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any, Callable

import torch

from bertforge.settings import SettingError
from bertforge.training import checkpointing as ckpt
from bertforge.training import distributed as dist_
from bertforge.training.options import TrainOptions
from bertforge.training.state import EngineState, TrainingState

TORCHRUN_SIZE = "--nnodes x --nproc_per_node"  # torchrun's own flags, which set a run's number of processes


def resume(out: Path, stage: Any, info: Any, *, optimizer: torch.optim.Optimizer, scheduler: Any, scaler: Any,
           record: dict[str, Any], seed: int, say: Callable[[str], None],
           notes: list[str]) -> tuple[Path | None, EngineState | None]:
    """(the checkpoint resumed from, its engine state) after restoring it into `stage`, `optimizer`, `scheduler`
    and `scaler`; (None, None) for a fresh start, which seeds this rank's RNG instead."""
    if info.is_main:
        for leftover in ckpt.sweep_partial_saves(out):
            notes.append(f"removed an interrupted checkpoint save: {leftover.name}")
        for kept in ckpt.incomplete_checkpoints(out):
            notes.append(f"{kept} misses a file: left as it is, not resumed from")
    latest = agreed_checkpoint(out, info)
    if latest is None:
        torch.manual_seed(seed + 1_000_003 * info.rank)  # dropout differs between ranks
        return None, None
    saved = TrainingState.from_dict(ckpt.load_training_state(latest))
    dist_.on_rank_zero(lambda: check_resumable(saved, latest, out, record, stage.recorded_later, info), info)
    stage.load_weights(latest)
    restored = [("optimizer", optimizer.load_state_dict, saved.optimizer),
                ("scheduler", scheduler.load_state_dict, saved.scheduler),
                ("scaler", scaler.load_state_dict if scaler is not None and saved.scaler else None, saved.scaler),
                ("stage", stage.load_state_dict, saved.stage)]
    for name, restore, value in restored:
        wrong = _unlike(value, scheduler.state_dict()) if name == "scheduler" else \
            _optimizer_problem(value, optimizer) if name == "optimizer" else None
        if wrong:
            raise ckpt.CheckpointError(f"{latest / ckpt.TRAINING_STATE}: field '{name}{wrong}")
        try:
            if restore is not None:
                restore(value)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as err:  # a tampered state file
            raise ckpt.CheckpointError(f"{latest / ckpt.TRAINING_STATE}: field {name!r} does not fit this run "
                                       f"({type(err).__name__}: {str(err)[:120]})") from None
    ckpt.restore_rng(saved.rng[info.rank])
    state = saved.engine()
    say(f"resuming from {latest} (step {state.step})")
    return latest, state


def agreed_checkpoint(out: Path, info: Any) -> Path | None:
    """Rank 0's newest checkpoint, which every rank must see too (OUTPUT on a filesystem all nodes share)."""
    latest = dist_.broadcast_object(ckpt.latest_checkpoint(out) if info.is_main else None, info)
    if latest is None or not info.enabled:
        return latest
    sees = dist_.gather_objects(latest in [path for _, path in ckpt.list_checkpoints(out)], info)

    def check() -> None:
        blind = [str(rank) for rank, seen in enumerate(sees or []) if not seen]
        if blind:
            raise SettingError("rank(s) {blind} cannot read {latest}, the checkpoint rank 0 resumes from: "
                               "{output} must be a folder every node shares", blind=", ".join(blind), latest=latest)
    dist_.on_rank_zero(check, info)
    return latest


def check_resumable(saved: TrainingState, latest: Path, out: Path, record: dict[str, Any],
                    recorded_later: dict[str, Any], info: Any) -> None:
    """Refuse to resume the run in OUTPUT with other settings or another number of processes."""
    # a run saved before a setting was recorded ran with its default
    was = {**RECORDED_LATER, **recorded_later, **saved.run}
    changed = {k: (was.get(k), v) for k, v in record.items() if _differs(was.get(k), v)}
    if changed:
        what = ", ".join(f"{k}: {a!r} there, {b!r} now" for k, (a, b) in changed.items())
        raise SettingError("{out} holds a run with other settings ({what}); resume with the same settings, "
                           "start again with {overwrite}, or choose another {output}", out=out, what=what)
    if saved.world_size != info.world_size:
        raise SettingError("{latest} was written by a run of {was} and this run has {now}; resume with {n} in all "
                           "(torchrun: {torchrun}), or start again with {overwrite}", latest=latest,
                           was=_processes(saved.world_size), now=info.world_size, n=saved.world_size,
                           torchrun=TORCHRUN_SIZE)


def _unlike(saved: Any, fresh: Any, where: str = "") -> str | None:
    """Where a saved state differs in kind from the one this run's own object gives (`/key: expected ...`), or
    None. Keys only one side has are left to the object's load_state_dict (older and newer torch differ)."""
    if isinstance(fresh, dict):
        if not isinstance(saved, dict):
            return f"{where}' must be an object, got {type(saved).__name__}"
        return next((w for k in fresh if k in saved for w in [_unlike(saved[k], fresh[k], f"{where}/{k}")] if w), None)
    if isinstance(fresh, (list, tuple)):
        if not isinstance(saved, (list, tuple)) or len(saved) != len(fresh):
            return f"{where}' must be a list of {len(fresh)}, got {saved!r}"[:200]
        return next((w for i, (a, b) in enumerate(zip(saved, fresh)) for w in [_unlike(a, b, f"{where}/{i}")] if w),
                    None)
    if fresh is None:
        return None if saved is None or isinstance(saved, dict) else f"{where}' must be null or an object"
    kinds = (int, float) if isinstance(fresh, (int, float)) and not isinstance(fresh, bool) else (type(fresh),)
    if not isinstance(saved, kinds) or (isinstance(saved, bool) and not isinstance(fresh, bool)):
        what = "a number" if len(kinds) == 2 else f"a {kinds[0].__name__}"
        return f"{where}' must be {what}, got {saved!r}"[:200]
    return None


def _optimizer_problem(saved: Any, optimizer: torch.optim.Optimizer) -> str | None:
    """A saved optimizer state whose parameter groups differ in kind from this run's, or whose per-parameter
    state is not tensors of each parameter's shape (torch would fail only at the next step)."""
    if not isinstance(saved, dict) or not isinstance(saved.get("state"), dict):
        return "' must be an object with a 'state' object"
    wrong = _unlike(saved.get("param_groups"), optimizer.state_dict()["param_groups"], "/param_groups")
    if wrong:
        return wrong
    params = [p for group in optimizer.param_groups for p in group["params"]]
    for index, entry in saved["state"].items():
        if not isinstance(index, int) or not 0 <= index < len(params) or not isinstance(entry, dict):
            return f"/state/{index}' must be the state of a parameter of this model"
        for key, value in entry.items():
            number = isinstance(value, (int, float)) and not isinstance(value, bool)  # a step count
            if not number and (not isinstance(value, torch.Tensor)
                               or (value.dim() > 0 and value.shape != params[index].shape)):
                return f"/state/{index}/{key}' must be a tensor of shape {tuple(params[index].shape)}"
    return None


def _processes(n: Any) -> str:
    return f"{n} process" if n == 1 else f"{n} processes"


#: settings a checkpoint may lack (written before they were recorded), with the value such a run used
RECORDED_LATER = {f.name: f.default for f in fields(TrainOptions) if f.name in ("adam_epsilon", "schedule", "cpu_budget")}


#: settings a checkpoint may lack (written before they were recorded), with the value such a run used
RECORDED_LATER = {f.name: f.default for f in fields(TrainOptions) if f.name in ("adam_epsilon", "schedule", "cpu_budget")}


def _differs(a: Any, b: Any) -> bool:
    """Settings compared after a JSON round trip (tuples come back as lists, ints may come back as floats)."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) != len(b) or any(_differs(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return float(a) != float(b)
    return a != b

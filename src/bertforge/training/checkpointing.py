"""Training checkpoints that survive SIGKILL at any moment.

Layout: ``OUTPUT/checkpoints/step-N/`` holds the model in the HF layout (`config.json`, `model.safetensors`),
the tokenizer files and the training state (optimizer, scheduler, RNG states of every rank, dataset
position, step and counters) as `training_state.json` + `training_state.safetensors`: never a pickle, so
a checkpoint folder from someone else cannot run code when resumed (see `statefile`). Each folder is built
under a hidden temporary name and renamed into place, so a folder named ``step-N`` is always complete;
leftovers of a killed save start with a dot and are swept away on the next start. Resuming loads everything
a step depends on, which is what makes a killed and resumed run end bitwise identical to an uninterrupted one.
"""
from __future__ import annotations

import random
import re
import shutil
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from bertforge.atomic import atomic_directory
from bertforge.checkpoint import SAFE_WEIGHTS, CheckpointError
from bertforge.config import CONFIG_NAME
from bertforge.settings import SettingError
from bertforge.training.state import check_saved
from bertforge.training.statefile import load_state, save_state

CHECKPOINTS = "checkpoints"
TRAINING_STATE = "training_state.json"
TRAINING_TENSORS = "training_state.safetensors"
LEGACY_TRAINING_STATE = "training_state.pt"  # pickled by bertforge before the JSON format: refused, never read
REQUIRED_FILES = (CONFIG_NAME, SAFE_WEIGHTS, TRAINING_STATE, TRAINING_TENSORS)
_LEGACY_FILES = (CONFIG_NAME, SAFE_WEIGHTS, LEGACY_TRAINING_STATE)
_STEP_DIR = re.compile(r"step-(\d+)")


def capture_rng() -> dict[str, Any]:
    """Every random generator a training step may draw from (dropout uses torch's)."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def checkpoint_dir(output: str | Path, step: int) -> Path:
    return Path(output) / CHECKPOINTS / f"step-{step}"


def list_checkpoints(output: str | Path) -> list[tuple[int, Path]]:
    """Complete checkpoints (step, folder), oldest first. A folder missing a file is not a checkpoint.

    A folder of an older bertforge (its state in `training_state.pt`) is listed too, so that resuming
    refuses it with a message (`load_training_state`) instead of sweeping it away and starting over."""
    root = Path(output) / CHECKPOINTS
    if not root.is_dir():
        return []
    found = []
    for path in root.iterdir():
        m = _STEP_DIR.fullmatch(path.name)
        if m and path.is_dir() and any(all((path / f).is_file() for f in files)
                                       for files in (REQUIRED_FILES, _LEGACY_FILES)):
            found.append((int(m.group(1)), path))
    return sorted(found)


def latest_checkpoint(output: str | Path) -> Path | None:
    found = list_checkpoints(output)
    return found[-1][1] if found else None


def sweep_partial_saves(output: str | Path) -> list[Path]:
    """Remove what a kill leaves behind: the hidden folders of an unfinished save or prune (a save writes into
    one and renames it; pruning renames before deleting). A visible `step-N` folder missing a file was not left by
    us (a user's partial copy, a file deleted by hand): it is not resumed from, and not deleted either.
    Returns what was removed."""
    root = Path(output) / CHECKPOINTS
    removed = []
    if root.is_dir():
        for path in sorted(root.iterdir()):
            if path.name.startswith(".") and path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
    return removed


def incomplete_checkpoints(output: str | Path) -> list[Path]:
    """Visible `step-N` folders that miss a file: kept as they are, named to the user, never resumed from."""
    root = Path(output) / CHECKPOINTS
    complete = {path for _, path in list_checkpoints(output)}
    if not root.is_dir():
        return []
    return [p for p in sorted(root.iterdir()) if _STEP_DIR.fullmatch(p.name) and p.is_dir() and p not in complete]


def save_checkpoint(output: str | Path, step: int, model: torch.nn.Module, tokenizer: Any,
                    state: dict[str, Any], keep: int = 3,
                    before_commit: Callable[[Path], None] | None = None) -> Path:
    """Write ``checkpoints/step-N`` atomically, then drop all but the newest `keep` checkpoints.
    `before_commit(folder)` runs once the files are written, before the rename (fault-injection tests)."""
    target = checkpoint_dir(output, step)
    with atomic_directory(target) as tmp:
        model.save_pretrained(tmp)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
        save_state(state, tmp / TRAINING_STATE, tmp / TRAINING_TENSORS)
        if before_commit is not None:
            before_commit(tmp)
    if keep > 0:
        for _, old in list_checkpoints(output)[:-keep]:
            _remove_checkpoint(old)
    return target


def _remove_checkpoint(folder: Path) -> None:
    """Rename, then delete: a kill mid-way leaves a hidden folder (swept at the next start), never a visible
    `step-N` with files missing — so a visible incomplete step folder is never ours to delete."""
    doomed = folder.with_name(f".{folder.name}.pruned")
    try:
        folder.rename(doomed)
    except OSError:
        doomed = folder
    shutil.rmtree(doomed, ignore_errors=True)


class LegacyStateError(SettingError, CheckpointError):
    """A checkpoint whose training state only an older bertforge wrote (a pickle, never read)."""


def load_training_state(folder: str | Path) -> dict[str, Any]:
    """The training state saved with a checkpoint, checked enough that a resume cannot index into garbage.

    Raises `CheckpointError` (one line naming the file and field) for a missing, tampered or old-format state.
    """
    folder = Path(folder)
    json_path, tensors_path = folder / TRAINING_STATE, folder / TRAINING_TENSORS
    if not json_path.is_file() and (folder / LEGACY_TRAINING_STATE).is_file():
        raise LegacyStateError("{file}: a training state pickled by an older bertforge; pickles are never loaded "
                               "(they can run code), so this run cannot be resumed: start it again in another "
                               "{output} (its {weights} can be {init_from})", file=folder / LEGACY_TRAINING_STATE,
                               weights=SAFE_WEIGHTS)
    state = load_state(json_path, tensors_path)
    wrong = check_saved(state, json_path)  # the fields and types of `state.TrainingState`
    if wrong:
        raise CheckpointError(f"{json_path}: {wrong}")
    for i, rng in enumerate(state["rng"] if isinstance(state["rng"], list) else [state["rng"]]):
        why = _rng_problem(rng)
        if why:
            where = f"rng/{i}" if isinstance(state["rng"], list) else "rng"
            raise CheckpointError(f"{json_path}: field {where}: {why}")
    return state


def _rng_problem(rng: Any) -> str | None:
    """Why `rng` is not what `capture_rng` returns (so `restore_rng` cannot fail on it), or None."""
    if not isinstance(rng, dict) or not {"python", "numpy", "torch"} <= set(rng):
        return "expected an object with python, numpy and torch generator states"
    py = rng["python"]
    if not (isinstance(py, tuple) and len(py) == 3 and type(py[0]) is int and isinstance(py[1], tuple)
            and len(py[1]) == len(random.getstate()[1])
            and all(type(v) is int and 0 <= v < 2 ** 32 for v in py[1])):
        return "python: expected random.getstate()'s (version, tuple of ints, gauss) tuple"
    npy = rng["numpy"]
    if not (isinstance(npy, tuple) and len(npy) == 5 and npy[0] == "MT19937" and isinstance(npy[1], np.ndarray)
            and npy[1].shape == (624,) and npy[1].dtype == np.uint32):
        return "numpy: expected numpy.random.get_state()'s ('MT19937', uint32[624], pos, has_gauss, gauss) tuple"
    cpu = rng["torch"]
    if not (isinstance(cpu, torch.Tensor) and cpu.dtype == torch.uint8 and cpu.shape == torch.get_rng_state().shape):
        return "torch: expected torch.get_rng_state()'s uint8 tensor"
    cuda = rng.get("cuda", [])
    if not (isinstance(cuda, list) and all(isinstance(t, torch.Tensor) and t.dtype == torch.uint8 for t in cuda)):
        return "cuda: expected a list of uint8 generator-state tensors"
    return None

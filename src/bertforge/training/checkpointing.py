"""Training checkpoints that survive SIGKILL at any moment.

Layout: ``OUTPUT/checkpoints/step-N/`` holds the model in the HF layout (`config.json`, `model.safetensors`),
the tokenizer files and `training_state.pt` (optimizer, scheduler, RNG states of every rank, dataset
position, step and counters). Each folder is built under a hidden temporary name and renamed into place, so
a folder named ``step-N`` is always complete; leftovers of a killed save start with a dot and are swept
away on the next start. Resuming loads everything a step depends on, which is what makes a killed and
resumed run end bitwise identical to one that was never interrupted.
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

CHECKPOINTS = "checkpoints"
TRAINING_STATE = "training_state.pt"
REQUIRED_FILES = ("config.json", "model.safetensors", TRAINING_STATE)
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
    """Complete checkpoints (step, folder), oldest first. A folder missing a file is not a checkpoint."""
    root = Path(output) / CHECKPOINTS
    if not root.is_dir():
        return []
    found = []
    for path in root.iterdir():
        m = _STEP_DIR.fullmatch(path.name)
        if m and path.is_dir() and all((path / f).is_file() for f in REQUIRED_FILES):
            found.append((int(m.group(1)), path))
    return sorted(found)


def latest_checkpoint(output: str | Path) -> Path | None:
    found = list_checkpoints(output)
    return found[-1][1] if found else None


def sweep_partial_saves(output: str | Path) -> list[Path]:
    """Remove what a kill leaves behind: hidden temporary folders of a save, and step folders that a kill
    during pruning left half-deleted. Returns what was removed."""
    root = Path(output) / CHECKPOINTS
    removed = []
    complete = {path for _, path in list_checkpoints(output)}
    if root.is_dir():
        for path in sorted(root.iterdir()):
            half_deleted = _STEP_DIR.fullmatch(path.name) and path not in complete
            if (path.name.startswith(".") or half_deleted) and path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
    return removed


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
        torch.save(state, tmp / TRAINING_STATE)
        if before_commit is not None:
            before_commit(tmp)
    if keep > 0:
        for _, old in list_checkpoints(output)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    return target


def load_training_state(folder: str | Path) -> dict[str, Any]:
    # Our own file, but it holds RNG states and numpy objects that the weights-only unpickler refuses.
    return torch.load(Path(folder) / TRAINING_STATE, map_location="cpu", weights_only=False)

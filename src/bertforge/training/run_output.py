"""A training run's output folder: claimed before anything is written, cleaned up if the run fails early.

A run writes into OUTPUT only when OUTPUT is new, empty, or holds a run of the same kind (which it then resumes,
after the engine checks that the settings agree). Anything else — another model, a predictor, a file — is
refused unless `--overwrite` says to start again: work is never replaced without a word. A run that fails
before its first checkpoint leaves no half-written folder behind.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any, Iterator

from bertforge.atomic import atomic_write_text
from bertforge.training import checkpointing as ckpt
from bertforge.training import distributed as dist_

RUN_CONFIG = "run_config.json"


def run_kind(folder: Path) -> str | None:
    """The verb that made `folder` ("pretrain", "finetune", ...), or None when it is not a bertforge run."""
    try:
        return json.loads((folder / RUN_CONFIG).read_text(encoding="utf-8")).get("verb")
    except (OSError, ValueError, AttributeError):
        return None


def check_output(path: Path, verb: str, overwrite: bool) -> bool:
    """Refuse an output we must not write into; True when the folder is new or empty (ours to remove)."""
    if path.exists() and not path.is_dir():
        raise ValueError(f"--output {path} is a file; expected a folder (new, empty, or an earlier {verb} run)")
    if path.is_dir() and any(path.iterdir()):
        kind = run_kind(path)
        if kind == verb and not overwrite:
            return False  # our own run: resume it
        if not overwrite:
            what = f"a {kind} run" if kind else "files that are not a bertforge " + verb + " run"
            raise ValueError(f"--output {path} already holds {what}; pass --overwrite to replace it, or choose "
                             "another --output")
        for child in path.iterdir():
            shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
        return True
    parent = path if path.is_dir() else _existing_parent(path)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PermissionError(f"cannot write --output {path}: {parent} is not writable")
    return True


def _existing_parent(path: Path) -> Path:
    for parent in path.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise ValueError(f"--output {path}: {parent} is a file, not a folder")
            return parent
    return Path("/")


@contextlib.contextmanager
def claim_run_output(output: str | Path, verb: str, settings: Any, session: Any = None, *,
                     overwrite: bool = False) -> Iterator[Path]:
    """Check OUTPUT (rank 0), record the run's settings in it, yield it; remove it again if the run fails
    before its first checkpoint and the folder was new or empty."""
    path = Path(output)
    info = session.info if session is not None else None
    main = info is None or info.is_main
    fresh = False
    if main:
        fresh = check_output(path, verb, overwrite)
        path.mkdir(parents=True, exist_ok=True)
    if main and (fresh or not ckpt.list_checkpoints(path)):  # a resumed run keeps the record it started with
        record = asdict(settings) if is_dataclass(settings) else dict(settings)
        atomic_write_text(path / RUN_CONFIG, json.dumps({"verb": verb, **record}, indent=2, default=str) + "\n")
    if info is not None:
        dist_.barrier(info)
    try:
        yield path
    except BaseException:
        if main and fresh and not ckpt.list_checkpoints(path):
            shutil.rmtree(path, ignore_errors=True)
        raise

"""A training run's output folder: claimed before anything is written, cleaned up if the run fails early.

A run writes into OUTPUT only when OUTPUT is new, empty, or holds a run of the same verb (which it then resumes,
after the engine checks that the settings agree); anything else needs `--overwrite` (`bertforge.outputs`). A
run that fails before its first checkpoint leaves no half-written folder behind. Under torchrun, rank 0 claims.
"""
from __future__ import annotations

import contextlib
import shutil
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any, Iterator

from bertforge.outputs import claim_output, write_run_config
from bertforge.training import checkpointing as ckpt
from bertforge.training import distributed as dist_


@contextlib.contextmanager
def claim_run_output(output: str | Path, verb: str, settings: Any, session: Any = None, *,
                     overwrite: bool = False) -> Iterator[Path]:
    """Claim OUTPUT for `verb` (rank 0), record the run's settings in it unless it resumes, yield it; if the run
    fails before its first checkpoint in a folder that was new or empty, remove what it wrote."""
    path = Path(output)
    info = session.info if session is not None else None
    main = info is None or info.is_main
    fresh = False
    if main:
        fresh = not path.exists() or (path.is_dir() and not any(path.iterdir())) or overwrite
        claim_output(path, verb=verb, overwrite=overwrite, resumable=True)
        if fresh or not ckpt.list_checkpoints(path):  # a resumed run keeps the record it started with
            record = asdict(settings) if is_dataclass(settings) else dict(settings)
            write_run_config(path, verb, record)
    if info is not None:
        dist_.barrier(info)
    try:
        yield path
    except BaseException:
        if main and fresh and not ckpt.list_checkpoints(path):
            shutil.rmtree(path, ignore_errors=True)
        raise

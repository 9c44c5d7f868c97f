"""A training run's output folder: claimed before anything is written, marked finished when the run is done,
cleaned up if the run fails early.

A run writes into OUTPUT only when OUTPUT is new, empty, or holds a run of the same verb with the same settings
(which it then resumes; a finished one is left as it is); anything else needs `--overwrite`, which never empties
one of the run's inputs (`bertforge.outputs`). A run that fails before its first checkpoint leaves no
half-written folder behind. A finished run's folder holds the model, not the training checkpoints it resumed
from, unless asked to keep them. Under torchrun, rank 0 decides and every rank follows.
"""
from __future__ import annotations

import contextlib
import json
import shutil
from dataclasses import is_dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from bertforge.atomic import atomic_write_text
from bertforge.data.identity import INPUT_CONTENT, check_input_content
from bertforge.outputs import (RUN_CONFIG, RunAlreadyFinished, claim_output, mark_finished, read_run_config,
                               write_run_config)
from bertforge.settings import settings_record
from bertforge.training import checkpointing as ckpt
from bertforge.training import distributed as dist_
from bertforge.training.metrics_log import CURVES, METRICS_LOG
from bertforge.training.summary import TrainingSummary

# A run folder: the run's settings (RUN_CONFIG, `outputs.read_run_config`), its metrics as they come (METRICS_LOG)
# and their curves (CURVES, `training.metrics_log`), its checkpoints (`training.checkpointing`: the model and
# training_state), the engine's summary once it ends (TRAINING_SUMMARY) and the verb's results (RESULTS).
TRAINING_SUMMARY = "training_summary.json"
RESULTS = "metrics.json"
RUN_RECORDS = (METRICS_LOG, CURVES, RUN_CONFIG, TRAINING_SUMMARY)  # what a run writes besides its model


def read_training_summary(path: str | Path) -> TrainingSummary | None:
    """The training_summary.json a finished run wrote in folder `path`, or None when it has none or it is not
    JSON; a file with a missing or mistyped key is a ValueError naming it and the key."""
    file = Path(path) / TRAINING_SUMMARY
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return TrainingSummary.from_dict(data, file)


def write_training_summary(path: str | Path, summary: TrainingSummary) -> None:
    summary.to_json(Path(path) / TRAINING_SUMMARY, default=str)


def write_results(path: str | Path, report: dict[str, Any], default: Callable[[Any], Any] | None = float) -> Path:
    """Write `path`/metrics.json atomically (values JSON cannot hold go through `default`)."""
    target = Path(path) / RESULTS
    atomic_write_text(target, json.dumps(report, indent=2, default=default) + "\n")
    return target


@contextlib.contextmanager
def claim_run_output(output: str | Path, verb: str, settings: Any, session: Any = None, *,
                     overwrite: bool = False, inputs: Iterable[str | Path | None] = (),
                     keep_checkpoints: bool = False) -> Iterator[Path]:
    """Claim OUTPUT for `verb` (rank 0), record the run's settings in it, yield it; on success mark it finished
    and remove its training checkpoints unless `keep_checkpoints`; if the run fails before its first checkpoint
    in a folder that was new or empty, remove what it wrote. When OUTPUT holds this very run finished, it is
    yielded untouched (`outputs.is_finished` tells the stage: the engine then returns the recorded result)."""
    path = Path(output)
    info = session.info if session is not None else dist_.DistInfo()
    main = info.is_main
    record = settings_record(settings) if is_dataclass(settings) else dict(settings)
    inputs = tuple(inputs)

    def claim() -> tuple[bool, bool]:
        fresh = not path.exists() or (path.is_dir() and not any(path.iterdir())) or overwrite
        # the inputs' content is compared first: the same settings on changed data are another run
        content = check_input_content(path, verb, inputs, overwrite)
        try:
            claim_output(path, verb=verb, overwrite=overwrite, resumable=True, settings=record, inputs=inputs)
            # a resumed run keeps its record as it was: the engine may still refuse to resume it (its checkpoint's
            # settings), and a record rewritten with the refused settings would then refuse the right ones
            if fresh or read_run_config(path) is None:
                write_run_config(path, verb, {**record, INPUT_CONTENT: content})
        except RunAlreadyFinished:
            return fresh, True
        return fresh, False

    # rank 0 decides and every rank follows; a refused OUTPUT stops every rank and is reported once, by rank 0
    fresh, finished = dist_.broadcast_object(dist_.on_rank_zero(claim, info), info)
    try:
        yield path
    except BaseException:
        if main and fresh and not ckpt.list_checkpoints(path):
            shutil.rmtree(path, ignore_errors=True)
        raise
    if main and not finished:
        mark_finished(path)
        if not keep_checkpoints:
            drop_checkpoints(path)


def drop_checkpoints(path: Path) -> None:
    """Remove the training checkpoints of a finished run (its own, and those of a grid's runs under runs/)."""
    for folder in (path / ckpt.CHECKPOINTS, *path.glob(f"runs/*/{ckpt.CHECKPOINTS}")):
        if folder.is_dir() and not folder.is_symlink():
            shutil.rmtree(folder, ignore_errors=True)

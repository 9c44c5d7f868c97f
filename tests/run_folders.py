"""Test scaffolding for resume tests: a copy of a finished run's folder as a run killed after one checkpoint."""
from __future__ import annotations

import json
import shutil
from pathlib import Path


def copy_as_interrupted(ref: Path, target: Path, step: int) -> Path:
    """`target` holding `ref`'s checkpoint at `step` and its run record as a run killed after that checkpoint
    leaves them: the record is not marked finished. `ref` must have kept its checkpoints (keep_checkpoints_at_end)."""
    shutil.copytree(ref / "checkpoints" / f"step-{step}", target / "checkpoints" / f"step-{step}")
    record = json.loads((ref / "run_config.json").read_text(encoding="utf-8"))
    record.pop("status", None)
    (target / "run_config.json").write_text(json.dumps(record), encoding="utf-8")
    return target

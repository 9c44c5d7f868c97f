"""demo/run.sh: DEMO_PRETRAIN_STEPS gives the from-scratch run a step count instead of the time budget.

The script runs with `bertforge` and `python` replaced by stubs that record their arguments (no training), so
what is checked is the commands the demo would run."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
STUB = """#!/bin/sh
echo "$(basename "$0") $*" >> "$DEMO_CALLS"
case "$1" in -c) echo /no/such/minilm ;; esac
exit 0
"""


def demo_commands(tmp_path: Path, **env: str) -> list[str]:
    """The `bertforge` and `python` command lines demo/run.sh runs, in order."""
    if shutil.which("bash") is None:
        pytest.skip("demo/run.sh needs bash")
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for name in ("bertforge", "python"):
        (stubs / name).write_text(STUB)
        (stubs / name).chmod(0o755)
    calls = tmp_path / "calls.txt"
    environment = {**os.environ, "PATH": f"{stubs}{os.pathsep}{os.environ['PATH']}", "DEMO_CALLS": str(calls),
                   "DEMO_OUT": str(tmp_path / "out"), **env}
    subprocess.run(["bash", "demo/run.sh"], cwd=REPO_ROOT, env=environment, check=True, capture_output=True,
                   timeout=120)
    return calls.read_text().splitlines()


def scratch_run(commands: list[str], out: Path) -> str:
    (line,) = [c for c in commands if c.startswith("bertforge pretrain") and f"--output {out}/tiny-fast " in c + " "]
    return line


def test_a_step_count_replaces_the_time_budget(tmp_path):
    line = scratch_run(demo_commands(tmp_path, DEMO_PRETRAIN_STEPS="2500"), tmp_path / "out")
    assert "--max-steps 2500" in line and "--time-budget" not in line


def test_without_a_step_count_the_budget_runs(tmp_path):
    commands = demo_commands(tmp_path, DEMO_PRETRAIN_BUDGET="7m")
    line = scratch_run(commands, tmp_path / "out")
    assert "--time-budget 7m" in line and "--max-steps" not in line
    # the 60-step run is meant to stay on the plateau: its report gives no advice to train longer
    (first_report,) = [c for c in commands if "pretrain_report.py" in c and "tiny-fast-60-steps" in c]
    assert "--baseline" in first_report

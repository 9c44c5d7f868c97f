"""The check every script of `benchmarks/` and `experiments/` gets: it imports without running (no work outside
`if __name__ == "__main__"`, no `sys.path` edits needed), and its argument parser builds and answers `--help`."""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def scripts_in(folder: str) -> set[str]:
    """The module names of the Python files in `folder` of the repository."""
    return {path.stem for path in (REPO / folder).glob("*.py")}


def check_help(folder: str, name: str, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """Import `folder/name.py` as the tests see it and run its `main` with `--help`: exit 0, a usage line."""
    module = importlib.import_module(name)
    path = REPO / folder / f"{name}.py"
    assert Path(module.__file__).resolve() == path, f"{name} imported from {module.__file__}, not {path}"
    monkeypatch.setattr(sys, "argv", [str(path), "--help"])
    with pytest.raises(SystemExit) as done:
        module.main()
    assert done.value.code in (0, None)
    out = capsys.readouterr().out
    assert out.startswith(f"usage: {path.name}"), out[:200]
    assert "--help" in out

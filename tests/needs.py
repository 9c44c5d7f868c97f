"""What a test needs from outside the repository, and what happens when it is missing.

Outside CI a test whose package or data is absent is skipped (a laptop need not have everything). With
``CI=true`` (or 1/yes) the same absence FAILS the test, saying what is missing, so a broken CI image can
never turn into a green run that silently tested nothing. Test modules import these helpers
(``from needs import require_module``); `tests/conftest.py` builds its fixtures on them.
"""
from __future__ import annotations

import importlib
import os
from pathlib import Path
from types import ModuleType

import pytest

CI_ENV = "CI"


def in_ci() -> bool:
    return os.environ.get(CI_ENV, "").strip().lower() in ("true", "1", "yes")


def missing(what: str) -> None:
    """Skip (or, in CI, fail) the current test — or the whole module when called at import time."""
    if in_ci():
        pytest.fail(f"{CI_ENV}=true and {what}; CI must provide it", pytrace=False)
    pytest.skip(what, allow_module_level=True)


def require_module(name: str, hint: str | None = None) -> ModuleType:
    """`import name`, or skip/fail naming the module (and where it comes from, via `hint`)."""
    try:
        return importlib.import_module(name)
    except ImportError as err:
        missing(f"the Python module {name!r} cannot be imported ({err})" + (f"; {hint}" if hint else ""))
        raise  # not reached: missing() always raises


def require_path(path: Path, what: str) -> Path:
    """`path` if it exists, else skip/fail saying which data (`what`) is absent."""
    if not path.exists():
        missing(f"{what} is not present ({path.name} not found)")
    return path

"""What a test needs from outside the repository, and what happens when it is missing.

Outside CI a test whose package or data is absent is skipped (a laptop need not have everything). With
``CI=true`` (or 1/yes) the same absence FAILS the test, saying what is missing, so a broken CI image can
never turn into a green run that silently tested nothing. Test modules import these helpers
(``from needs import require_module``); `tests/conftest.py` builds its fixtures on them.

Only two kinds of test may skip under CI, and they say so in their reason: *root-only* (a check that
cannot hold for a user who may write anywhere, such as a read-only folder; CI runs as root) and
*platform-only* (a check of one operating system's facility). `skip_as_root`, `skip_privileged` and
`only_on` write those reasons; `tests/conftest.py` installs the two report hooks below, which turn every
other skip (and every expected failure) into a failure under CI, so a new silent skip cannot creep in.
"""
from __future__ import annotations

import importlib
import os
from pathlib import Path
from types import ModuleType

import pytest

CI_ENV = "CI"
ROOT_ONLY = "root-only"          # skipped because this user may write or read anything (root, CAP_DAC_OVERRIDE)
PLATFORM_ONLY = "platform-only"  # checks a facility of one platform (e.g. glibc's heap)
NAMED_SKIPS = (ROOT_ONLY, PLATFORM_ONLY)


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


# ---- the skips CI accepts, and the hooks that refuse the others ------------------------------------------------
def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def skip_as_root(reason: str) -> pytest.MarkDecorator:
    """Skip when running as root, with a reason marked root-only (the one skip CI accepts besides platform-only)."""
    return pytest.mark.skipif(_is_root(), reason=f"{ROOT_ONLY}: {reason}")


def skip_privileged(reason: str) -> None:
    """Skip now, marked root-only: this user is privileged in a way the test cannot work around."""
    pytest.skip(f"{ROOT_ONLY}: {reason}")


def only_on(condition: bool, reason: str) -> pytest.MarkDecorator:
    """Run only where `condition` holds (a platform's facility); elsewhere skip, marked platform-only."""
    return pytest.mark.skipif(not condition, reason=f"{PLATFORM_ONLY}: {reason}")


def _skip_reason(report) -> str:
    if hasattr(report, "wasxfail"):
        return f"expected failure: {report.wasxfail}"
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


def _refuse_unnamed_skip(report) -> None:
    """Under CI, turn a skip whose reason is not root-only or platform-only into a failure saying why."""
    if not (in_ci() and report.skipped):
        return
    reason = _skip_reason(report)
    if not hasattr(report, "wasxfail") and any(f"{kind}:" in reason for kind in NAMED_SKIPS):
        return
    report.outcome = "failed"
    report.longrepr = (f"{CI_ENV}=true and this was skipped ({reason}); under CI only skips whose reason says "
                       f"{ROOT_ONLY!r} or {PLATFORM_ONLY!r} are allowed (see tests/needs.py)")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    _refuse_unnamed_skip(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    report = yield
    _refuse_unnamed_skip(report)
    return report

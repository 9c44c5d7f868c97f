"""A pytest plugin (registered by conftest.py): the folders a module's fixtures or a test make with
`tmp_path_factory.mktemp` are deleted as soon as they are done with, when nothing failed there.

pytest deletes a passing test's `tmp_path` when the test ends (`tmp_path_retention_policy = "failed"`, see
pyproject.toml), but a folder from `tmp_path_factory.mktemp` lives until the run ends: the suite's module-scoped
fixtures (fine-tuned models, exported ONNX files, prepared corpora) would pile up to GBs in a run, and all of them
stay when any test fails. Here each `mktemp` folder is owned by the fixture being set up when it is made (or by
the test, outside any fixture's set-up); a module-scoped fixture's folders go when the fixture is torn down after
its module's last test, a test's when the test ends, unless a test of that module has failed (then they stay
with the run's other folders, for a look). Session-scoped fixtures' folders stay to the end of the run, where pytest
deletes them after a passing run.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

_making: list[list[Path]] = []  # one list per fixture being set up, innermost last
_owned: dict[int, list[Path]] = {}  # id(fixturedef) of a module-scoped fixture -> the folders it made
_by_test: list[Path] = []  # folders made by the running test itself
_failed_modules: set[str] = set()


def _module_of(nodeid: str) -> str:
    return nodeid.split("::")[0]


def pytest_configure(config) -> None:
    factory = pytest.TempPathFactory
    original = factory.mktemp

    def mktemp(self, basename: str, numbered: bool = True) -> Path:
        path = original(self, basename, numbered)
        (_making[-1] if _making else _by_test).append(path)
        return path
    factory.mktemp = mktemp  # type: ignore[method-assign]


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef, request):
    _making.append([])
    try:
        yield
    finally:
        made = _making.pop()
        if fixturedef.scope == "module":
            _owned.setdefault(id(fixturedef), []).extend(made)
        elif fixturedef.scope == "function":  # the test's, or those of the fixture that asked for this one
            (_making[-1] if _making else _by_test).extend(made)
        # class, package and session scopes: their folders stay to the end of the run


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if outcome.get_result().failed:
        _failed_modules.add(_module_of(item.nodeid))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield
    made = list(_by_test)
    _by_test.clear()
    if _module_of(item.nodeid) not in _failed_modules:
        _remove(made)


def pytest_fixture_post_finalizer(fixturedef, request) -> None:
    made = _owned.pop(id(fixturedef), [])
    if made and _module_of(request.node.nodeid) not in _failed_modules:
        _remove(made)


def _remove(folders: list[Path]) -> None:
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)

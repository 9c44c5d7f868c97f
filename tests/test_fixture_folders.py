"""tests/fixture_folders.py: a module fixture's and a test's `mktemp` folders go when they are done with, unless a
test of that module failed (by then); a session fixture's stay to the end of the run. Checked on a small suite run by
pytest in a process of its own, with a --basetemp (which pytest itself never deletes)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SUITE = '''
import pytest

@pytest.fixture(scope="session")
def shared(tmp_path_factory):
    return tmp_path_factory.mktemp("session-kept")

@pytest.fixture(scope="module")
def model(tmp_path_factory, shared):
    folder = tmp_path_factory.mktemp("module-{name}")
    (folder / "weights.bin").write_bytes(b"x" * 1000)
    return folder

def test_uses(model, shared, tmp_path_factory):
    tmp_path_factory.mktemp("test-{name}")
    assert (model / "weights.bin").exists() and shared.is_dir()

def test_again(model, tmp_path_factory):
    tmp_path_factory.mktemp("failing-{name}")
    assert {fail}
'''


def run_suite(tmp_path: Path) -> set[str]:
    suite = tmp_path / "suite"
    suite.mkdir()
    for name, fail in (("passes", "True"), ("fails", "False")):
        (suite / f"test_{name}.py").write_text(SUITE.format(name=name, fail=fail))
    basetemp = tmp_path / "basetemp"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "fixture_folders", "-p", "no:cacheprovider",
                           "--basetemp", str(basetemp), "--rootdir", str(suite), str(suite)],
                          cwd=suite, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(Path(__file__).resolve().parent), "PATH": "/usr/bin:/bin"})
    assert "1 failed, 3 passed" in done.stdout, done.stdout + done.stderr
    return {p.name for p in basetemp.iterdir()}


def test_folders_go_when_done_with_and_stay_where_a_test_failed(tmp_path):
    left = run_suite(tmp_path)
    # a passing test's folders go with it, a module's with its last test, when nothing in it failed
    assert not any(name.startswith(("module-passes", "test-", "failing-passes")) for name in left), left
    # where a test failed: its own folders and its module's stay, for a look
    assert any(name.startswith("module-fails") for name in left), left
    assert any(name.startswith("failing-fails") for name in left), left
    assert any(name.startswith("session-kept") for name in left), left

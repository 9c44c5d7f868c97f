"""Missing packages or data skip a test on a laptop and fail it under CI=true."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
PROBE = '''
import sys

import pytest
from pathlib import Path
from needs import require_module, require_path

@pytest.mark.slow
def test_module():
    require_module("bertforge_no_such_module")

@pytest.mark.slow
def test_data(tmp_path):
    require_path(tmp_path / "absent.txt.xz", "the absent corpus")

@pytest.mark.slow
def test_present(tmp_path):
    assert require_module("json").dumps(1) == "1"
    assert require_path(tmp_path, "tmp") == tmp_path
'''
MODULE_LEVEL = '''
import sys

import pytest
from needs import require_module
mod = require_module("bertforge_no_such_module")

@pytest.mark.slow
def test_never_runs():
    pass
'''


def _run(tmp_path: Path, source: str, ci: str | None) -> subprocess.CompletedProcess:
    (tmp_path / "test_probe.py").write_text(source.format(tests=str(TESTS)))
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), env.get("PYTHONPATH")]))  # `from needs import`
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # a bare pytest starts in a fraction of the time
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "--rootdir",
                           str(tmp_path), str(tmp_path / "test_probe.py")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.slow
def test_outside_ci_missing_things_skip(tmp_path):
    done = _run(tmp_path, PROBE, "false")
    assert done.returncode == 0, done.stdout[-2000:]
    assert "1 passed, 2 skipped" in done.stdout
    assert "'bertforge_no_such_module' cannot be imported" in done.stdout
    assert "the absent corpus is not present" in done.stdout


@pytest.mark.slow
def test_in_ci_missing_things_fail_saying_what(tmp_path):
    done = _run(tmp_path, PROBE, "true")
    assert done.returncode == 1, done.stdout[-2000:]
    assert "2 failed, 1 passed" in done.stdout
    assert "CI=true and the Python module 'bertforge_no_such_module' cannot be imported" in done.stdout
    assert "CI=true and the absent corpus is not present" in done.stdout


@pytest.mark.slow
def test_module_level_requirement_skips_the_module_or_fails_collection_in_ci(tmp_path):
    done = _run(tmp_path, MODULE_LEVEL, None)
    assert done.returncode in (0, 5) and "1 skipped" in done.stdout, done.stdout[-2000:]  # 5: nothing ran
    done = _run(tmp_path, MODULE_LEVEL, "1")
    assert done.returncode == 2 and "CI=true and the Python module 'bertforge_no_such_module'" in done.stdout, \
        done.stdout[-2000:]  # 2: a collection error


SKIPS = '''
import pytest
from needs import only_on, skip_as_root, skip_privileged


def test_plain_skip():
    pytest.skip("no reason that CI accepts")


@pytest.mark.skip(reason="switched off")
def test_marked_skip():
    pass


@pytest.mark.xfail(reason="hides a failure")
def test_expected_failure():
    assert False


@only_on(False, "a platform this is not")
def test_platform_only():
    pass


def test_privileged_user():
    skip_privileged("this user may write anywhere")


@skip_as_root("root writes anywhere")
def test_root_only():
    skip_privileged("not root, but privileged here")  # whichever way it skips, the reason says root-only
'''
SKIPPED_MODULE = '''
import pytest

pytest.skip("the whole module is off", allow_module_level=True)
'''
CONFTEST = '''
import sys
from needs import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401
'''


def _run_all(tmp_path: Path, ci: str | None, *files: str) -> subprocess.CompletedProcess:
    """pytest on the skip probes, with the report hooks that tests/conftest.py installs."""
    (tmp_path / "conftest.py").write_text(CONFTEST.format(tests=str(TESTS)))
    (tmp_path / "test_module_off.py").write_text(SKIPPED_MODULE)
    (tmp_path / "test_probe.py").write_text(SKIPS)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), env.get("PYTHONPATH")]))  # `from needs import`
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "--rootdir",
                           str(tmp_path), *(str(tmp_path / f) for f in files)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.slow
def test_outside_ci_every_skip_is_a_skip(tmp_path):
    done = _run_all(tmp_path, None, "test_probe.py", "test_module_off.py")
    assert done.returncode == 0, done.stdout[-3000:]
    assert "6 skipped, 1 xfailed" in done.stdout, done.stdout[-3000:]


@pytest.mark.slow
def test_in_ci_only_root_only_and_platform_only_skips_remain(tmp_path):
    done = _run_all(tmp_path, "true", "test_probe.py")
    out = done.stdout
    assert done.returncode == 1 and "2 failed, 3 skipped, 1 error" in out, out[-3000:]  # a marked skip: at setup
    for name in ("FAILED test_probe.py::test_plain_skip", "ERROR test_probe.py::test_marked_skip",
                 "FAILED test_probe.py::test_expected_failure"):
        assert name in out, out[-3000:]
    assert "CI=true and this was skipped (Skipped: no reason that CI accepts)" in out
    assert "'root-only' or 'platform-only'" in out and "(expected failure: hides a failure)" in out
    assert "platform-only: a platform this is not" in out and "root-only: this user may write anywhere" in out
    module = _run_all(tmp_path, "true", "test_module_off.py")
    assert module.returncode == 2, module.stdout[-3000:]  # a collection error
    assert "CI=true and this was skipped (Skipped: the whole module is off)" in module.stdout

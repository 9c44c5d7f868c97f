"""Run a document's blocks in order, as a reader who copies them into one shell would.

The blocks run in a scratch checkout: a folder holding copies of the repository's scripts (benchmarks/,
experiments/, demo/, tools/) beside a `shared` link to the real `../shared`, so a command reads
`../shared/data/...` exactly as written and writes only into the scratch folder. `bertforge` and `python` on PATH
are this repository's source and this test's interpreter; `bertforge` runs through the test process's warm
interpreter (tests/warm_cli.py), so a command does not import torch again. Shell variables and the working folder
carry from one shell block to the next; each block runs in a process group of its own, which is ended when the
block ends (a server a block started and forgot is stopped there).
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import warm_cli
from docs.markdown_blocks import PYTHON_LANGS, REPO_ROOT, Block, runnable_text

SCRIPT_FOLDERS = ("benchmarks", "experiments", "demo", "tools")
_ERROR_LINE = re.compile(r"^bertforge(?: [\w-]+)*: (?:error|internal error)\b.*$", re.M)

# Shell variables and the folder a block leaves behind, for the next block: every variable the block's shell did
# not start with (bash's own excepted).
_PRELUDE = r"""set -eu
__docs_known=" $(compgen -v | tr '\n' ' ') "
if [ -f "$DOCS_TEST_STATE" ]; then . "$DOCS_TEST_STATE"; fi
__docs_save() {
  {
    for __docs_v in $(compgen -v); do
      case "$__docs_known" in *" $__docs_v "*) continue ;; esac
      case "$__docs_v" in __docs*|BASH*|_|COLUMNS|LINES|PIPESTATUS|FUNCNAME|OLDPWD|PWD) continue ;; esac
      declare -p "$__docs_v"
    done
    printf 'cd %q\n' "$PWD"
  } > "$DOCS_TEST_STATE.new" 2>/dev/null && mv "$DOCS_TEST_STATE.new" "$DOCS_TEST_STATE"
}
trap __docs_save EXIT
"""


@dataclass
class Outcome:
    returncode: int | None  # None: stopped at its timeout
    output: str
    seconds: float


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Scratch:
    """The scratch checkout one document's blocks run in."""

    def __init__(self, root: Path, shared: Path):
        self.root = root
        self.work = root / "checkout"
        self.work.mkdir(parents=True)
        for name in SCRIPT_FOLDERS:
            if (REPO_ROOT / name).is_dir():
                shutil.copytree(REPO_ROOT / name, self.work / name,
                                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        (root / "shared").symlink_to(shared.resolve(), target_is_directory=True)
        bin_dir = root / "bin"
        bin_dir.mkdir()
        warm_cli.write_wrapper(bin_dir / "bertforge")
        self.state = root / "shell-state.sh"
        self.port = free_port()
        env = dict(os.environ)
        env["PATH"] = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), env.get("PATH", "")])
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT / "src"), env.get("PYTHONPATH")]))
        env.setdefault("OMP_NUM_THREADS", "1")
        env["MPLBACKEND"] = "Agg"
        env["DOCS_TEST_STATE"] = str(self.state)
        env.pop("DEBUG", None)
        self.env = warm_cli.environment(env)

    def run(self, block: Block) -> Outcome:
        text = runnable_text(block, self.port)
        if block.lang in PYTHON_LANGS:
            script = self.root / f"block-{block.line}.py"
            script.write_text(text, encoding="utf-8")
            command = [sys.executable, str(script)]
        else:
            script = self.root / f"block-{block.line}.sh"
            script.write_text(_PRELUDE + text, encoding="utf-8")
            command = ["bash", str(script)]
        return run_in_own_group(command, self.work, self.env, block.directives.timeout,
                                self.root / f"block-{block.line}.log")


def run_in_own_group(command: list[str], cwd: Path, env: dict, timeout: float, log: Path) -> Outcome:
    """Run `command` in a new session; when it exits or times out, end every process left in its group.

    Output goes to a file, not a pipe: a server started in the background keeps its copy of the output open,
    and a pipe would wait for it. The leader is left unreaped until its group is ended, so the group id cannot
    have been given to another process in between.
    """
    start = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    returncode: int | None = None
    while time.monotonic() - start < timeout:
        info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        if info is not None:
            returncode = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
            break
        time.sleep(0.1)
    _end_group(proc.pid)
    proc.wait()
    return Outcome(returncode, log.read_text(encoding="utf-8", errors="replace"), time.monotonic() - start)


def _end_group(pgid: int, grace: float = 5.0) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if not _group_alive(pgid):
                return
            time.sleep(0.1)


def _group_alive(pgid: int) -> bool:
    """Whether a process of the group still runs (its unreaped leader, a zombie, does not count)."""
    proc = Path("/proc")
    if not (proc / "self" / "stat").exists():  # no /proc: ask the kernel, zombie or not
        try:
            os.killpg(pgid, 0)
            return True
        except ProcessLookupError:
            return False
    for stat_file in proc.glob("[0-9]*/stat"):
        try:
            fields = stat_file.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if fields and fields[0] != "Z" and int(fields[2]) == pgid:
            return True
    return False


def failure(block: Block, outcome: Outcome) -> str | None:
    """Why the block's run does not show what the document says, or None."""
    tail = "\n".join(outcome.output.splitlines()[-40:])
    expected = block.directives.fails
    if outcome.returncode is None:
        return f"{block.where}: still running after {block.directives.timeout:.0f} s (timeout):\n{tail}"
    if expected is not None:
        if outcome.returncode == 0:
            return f"{block.where}: the block should fail (test: fails) but exited 0:\n{tail}"
        if expected not in outcome.output:
            return f"{block.where}: the block failed without printing {expected!r}:\n{tail}"
        return None
    if outcome.returncode != 0:
        return f"{block.where}: exit status {outcome.returncode}:\n{tail}"
    errors = _ERROR_LINE.findall(outcome.output)
    if errors:
        return f"{block.where}: a command printed an error and the block went on: {errors[0]}\n{tail}"
    absent = [text for text in block.directives.expect if text not in outcome.output]
    if absent:
        return f"{block.where}: the block did not print {absent[0]!r}:\n{tail}"
    return None

"""Processes of a test's driver, read from /proc: which a driver started (its descendants), and whether they are
still alive, so a test can assert that nothing outlives a killed driver. Linux only (tests skip elsewhere)."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

PROC = Path("/proc")


def need_proc() -> None:
    if not (PROC / "self" / "stat").is_file():
        pytest.skip("needs Linux /proc to follow the driver's processes")


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process, None when it is gone."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # after "pid (comm) ", which may hold spaces
    return fields[0], int(fields[1])


def descendants(pid: int) -> set[int]:
    """Every live process below `pid` (children, their children, ...)."""
    parents: dict[int, int] = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None and stat[0] != "Z":
                parents[int(entry.name)] = stat[1]
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pid: int) -> bool:
    """Running (a zombie, dead but not yet reaped by whoever adopted it, counts as ended)."""
    stat = _stat(pid)
    return stat is not None and stat[0] != "Z"


def left_alive(pids: set[int], within: float = 10.0) -> set[int]:
    """The processes of `pids` still alive after waiting up to `within` seconds for all of them to end."""
    deadline = time.monotonic() + within
    while True:
        living = {p for p in pids if alive(p)}
        if not living or time.monotonic() > deadline:
            return living
        time.sleep(0.05)


def wait_for(condition, within: float, what: str, process=None) -> None:
    """Poll `condition()` until it holds; fail naming `what` after `within` seconds (or when `process`, a Popen,
    ended first)."""
    deadline = time.monotonic() + within
    while not condition():
        if process is not None and process.poll() is not None:
            output = process.stdout.read() if process.stdout else ""
            pytest.fail(f"the driver ended (status {process.returncode}) before {what}: {output}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} after {within:.0f}s")
        time.sleep(0.05)


def kill_leftovers(pids: set[int]) -> None:
    """Clean up after a failed assertion: nothing a test started stays behind."""
    for pid in pids:
        try:
            os.kill(pid, 9)
        except OSError:
            pass

"""Worker processes that end with the process that started them.

A worker that outlives its driver (the driver SIGKILLed, or SIGTERMed before it could stop its workers) goes on
writing into an output that the re-run of the same command then writes into too. Every worker bertforge starts
calls `die_with_parent()` first thing, which sets two guards:

- on Linux, the kernel's parent-death signal (`prctl(PR_SET_PDEATHSIG, SIGKILL)`): the worker is killed the
  moment its parent process ends;
- everywhere, a watchdog thread waiting on multiprocessing's parent sentinel, which becomes ready when the
  process that started the worker ends, whatever the start method. Under `forkserver` this is the guard that
  counts: the worker's parent is then the fork server, which every worker keeps alive (it holds the server's
  liveness pipe open), so the kernel signal alone would never fire.

The driver's side is `cli.main`'s: SIGTERM ends a verb as Ctrl-C does, so its `finally` blocks stop the workers.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import multiprocessing
import os
import signal
import sys
import threading
from multiprocessing.connection import wait

__all__ = ["PARENT_GONE", "die_with_parent", "killed_with_parent"]

PARENT_GONE = 70  # a worker's exit status when it stopped because its parent had ended
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent() -> None:
    """In a worker process: end this process as soon as the process that started it ends (see the module's
    docstring). In the main process, nothing."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a forked worker inherits the driver's handler: die at once
    _parent_death_signal(signal.SIGKILL)
    sentinel = parent.sentinel
    if sentinel is None:  # pragma: no cover - every start method gives one since Python 3.8
        return
    if wait([sentinel], timeout=0):  # the parent ended before the guards were set
        os._exit(PARENT_GONE)
    threading.Thread(target=_watch, args=(sentinel,), name="bertforge-lifeline", daemon=True).start()


def killed_with_parent() -> bool:
    """Linux: have the kernel SIGKILL this process the moment its parent ends (for a helper process that is not a
    multiprocessing worker: the fork server, which would otherwise take seconds to notice and tear torch down).
    False where there is no such signal."""
    return _parent_death_signal(signal.SIGKILL)


def _watch(sentinel: int) -> None:
    wait([sentinel])
    os._exit(PARENT_GONE)  # no cleanup: a killed run's files are left as a SIGKILL leaves them, which resume reads


def _parent_death_signal(signum: int) -> bool:
    """Linux: have the kernel send `signum` to this process when its parent ends. False elsewhere."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(signum), 0, 0, 0) == 0
    except (OSError, AttributeError):  # pragma: no cover - a libc without prctl: the watchdog still guards
        return False

"""Files a hostile model folder may hold, made so that a test fails instead of hanging or filling memory.

Test modules import these (`from hostile_files import fifo`); they are shared by every test of a loader that
reads a model or tokenizer folder.
"""
from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

DEV_ZERO = Path("/dev/zero")
UNBLOCK_AFTER_S = 20.0


@contextlib.contextmanager
def fifo(path: Path) -> Iterator[Path]:
    """A FIFO at `path`. A reader that opens it would block forever; after UNBLOCK_AFTER_S seconds a watchdog
    opens it for writing and closes it at once, so such a reader gets an empty file and the test fails on
    what it then reports, rather than hanging the suite."""
    if not hasattr(os, "mkfifo"):
        pytest.skip("this platform has no FIFOs (os.mkfifo)")
    os.mkfifo(path)
    done = threading.Event()

    def unblock() -> None:
        if done.wait(UNBLOCK_AFTER_S):
            return
        while not done.is_set():
            try:  # succeeds only while a reader is blocked in open()
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
            done.wait(0.05)

    watchdog = threading.Thread(target=unblock, daemon=True)
    watchdog.start()
    try:
        yield path
    finally:
        done.set()
        watchdog.join()


def zero_device_link(path: Path) -> Path:
    """`path` as a symbolic link to /dev/zero: endless zero bytes to whoever reads it."""
    if not DEV_ZERO.exists():
        pytest.skip("this platform has no /dev/zero")
    path.symlink_to(DEV_ZERO)
    return path


def sparse_file(path: Path, size: int) -> Path:
    """A file of `size` zero bytes that takes no disk space (a hole), for size bounds."""
    with open(path, "wb") as handle:
        handle.truncate(size)
    return path

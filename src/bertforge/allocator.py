"""Keep large freed blocks in the process heap (glibc) instead of handing them back to the OS.

glibc serves every allocation above its mmap threshold (which grows to 32 MiB at most) with a fresh `mmap`
and unmaps it on free, so the same large temporaries come back every training step as new pages, each of
them page-faulted and zeroed by the kernel: at `mini` size, the MLM logits over the masked rows
(`[masked, vocab]`, ~70 MB), their gradient and the log-softmax around them. Raising the mmap and trim
thresholds lets freed blocks be reused: the `mini` pre-training step on CPU takes 1.12x less time
(`benchmarks/bench_allocator.py`, docs/BENCHMARKS.md). The same cure as jemalloc or tcmalloc, without a preload.

The process keeps its peak heap instead of shrinking after it, which a training or serving process does
anyway. But freed blocks are not always the right size for the next request: a step whose temporaries change
shape (left-to-right or hybrid batches: `[tokens, vocab]` logits beside the masked rows' smaller ones) leaves
holes that only grow the heap, to several times glibc's own peak within a CPU-hour (`bench_allocator.py
--memory ltr`). The training loop calls `bound_kept_memory()` after each step: it learns the working set as the
largest resident set of the first `SETTLE` steps (after the start, or after the last release), and once the
resident set outgrows that by `GROWTH` the free pages go back to the OS (`release_freed_memory`, which the next
steps pay for in page faults). A heap that settles (MLM, even through a sequence-length schedule) is never
released; one that keeps growing is released now and then, which trims its pages but not its holes, so its
resident set still climbs: the bound is a guard, not yet a cure for left-to-right steps.
A process that runs several jobs in turn (`bertforge ablate`: pre-training and fine-tuning runs, one after
another) calls `release_freed_memory()` between them. `BERTFORGE_MALLOC=default` leaves glibc as it is; other
C libraries and other OSes are left alone.
"""
from __future__ import annotations

import ctypes
import os
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
THRESHOLD = 1 << 30  # 1 GiB: above any single temporary of the models this package trains
GROWTH = 1.5  # growth over the learned working set at which `bound_kept_memory` gives the free pages back
SETTLE = 10   # steps whose largest resident set is the working set

_kept = False                     # the thresholds are raised in this process
_reference = 0                    # the largest resident set of the settling steps, in bytes
_settling = SETTLE                # settling steps still to see


def keep_freed_memory() -> bool:
    """Raise glibc's mmap/trim thresholds for this process; True if they were set."""
    if os.environ.get("BERTFORGE_MALLOC", "").lower() == "default" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (e.g. musl)
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    global _kept
    _kept = bool(mallopt(_M_MMAP_THRESHOLD, THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, THRESHOLD))
    return _kept


def release_freed_memory() -> bool:
    """Give the heap's free pages back to the OS (glibc's `malloc_trim`), between two jobs of one process;
    True if glibc did it."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        trim = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return False
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    trim(0)
    global _reference, _settling
    _reference, _settling = 0, SETTLE  # the next steps, refaulting what they need, set the new working set
    return True


def resident_bytes() -> int | None:
    """This process's resident set (Linux `/proc/self/statm`), or None where it cannot be read."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def bound_kept_memory() -> bool:
    """After a training step: release the kept free pages once the resident set outgrows the working set (the
    largest of the `SETTLE` steps after the start or the last release) by `GROWTH`; only where
    `keep_freed_memory` raised the thresholds. True if it released them."""
    global _reference, _settling
    if not _kept:
        return False
    resident = resident_bytes()
    if resident is None:
        return False
    if _settling > 0:
        _reference, _settling = max(_reference, resident), _settling - 1
        return False
    if resident <= GROWTH * _reference:
        return False
    return release_freed_memory()

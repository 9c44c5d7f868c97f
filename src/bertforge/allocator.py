"""Keep large freed blocks in the process heap (glibc) instead of handing them back to the OS.

glibc serves every allocation above its mmap threshold (which grows to 32 MiB at most) with a fresh `mmap`
and unmaps it on free, so the same large temporaries come back every training step as new pages, each of
them page-faulted and zeroed by the kernel: at `mini` size, the MLM logits over the masked rows
(`[masked, vocab]`, ~70 MB), their gradient and the log-softmax around them. Raising the mmap and trim
thresholds lets freed blocks be reused: the `mini` pre-training step on CPU takes 1.12x less time
(`benchmarks/bench_allocator.py`, docs/BENCHMARKS.md). The same cure as jemalloc or tcmalloc, without a preload.

The process keeps its peak heap instead of shrinking after it, which a training or serving process does
anyway. A process that runs several jobs in turn (`bertforge ablate`: pre-training and fine-tuning runs, one
after another) calls `release_freed_memory()` between them: otherwise the free holes each job leaves in the
heap, never the right size for the next one, can add up to many times one job's peak. `BERTFORGE_MALLOC=default`
leaves glibc as it is; other C libraries and other OSes are left alone.
"""
from __future__ import annotations

import ctypes
import os
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
THRESHOLD = 1 << 30  # 1 GiB: above any single temporary of the models this package trains


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
    return bool(mallopt(_M_MMAP_THRESHOLD, THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, THRESHOLD))


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
    return True

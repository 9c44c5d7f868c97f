"""What a run writes about itself while it trains: `metrics.jsonl` and `curves.png` (rank 0 only) and, when
asked, TensorBoard. The engine's loop computes the values; this part only records them, so the loop reads as
steps and the logging can change without touching it."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bertforge.settings import SettingError
from bertforge.training.metrics_log import CURVES, METRICS_LOG, MetricsLog

PLOT_EVERY = 60.0  # seconds between redraws of curves.png while a run runs


class RunLog:
    """The metrics log, its curves and TensorBoard of one run in `out` (a silent stand-in on ranks other than 0)."""

    def __init__(self, out: Path, title: str, *, resume_step: int, tensorboard: bool, main: bool) -> None:
        self.title, self.main = title, main
        self.file = MetricsLog(out / METRICS_LOG, out / CURVES, resume_step=resume_step) if main else None
        self.writer = open_tensorboard(out) if main and tensorboard else None
        self.last_plot = time.perf_counter()

    def add(self, split: str, step: int, values: dict[str, Any]) -> None:
        """One record of `split` ("train" or "eval") at `step`: the metrics log and TensorBoard."""
        if self.file is None:
            return
        self.file.log(step, split, **values)
        if self.writer is not None:
            for k, v in values.items():
                if isinstance(v, (int, float)):
                    self.writer.add_scalar(f"{split}/{k}", v, step)

    def refresh_curves(self, now: float | None = None) -> None:
        """Redraw curves.png while the run runs, at most once a minute: a drawing costs a few CPU-seconds (about
        as much as a small model's evaluation), and the run's end draws the final curves anyway."""
        now = time.perf_counter() if now is None else now
        if self.file is not None and now - self.last_plot > PLOT_EVERY:
            self.file.plot(title=self.title)
            self.last_plot = now

    def draw_final(self) -> None:
        """The finished run's curves.png (when it logged anything)."""
        if self.file is not None and self.file.records:
            self.file.plot(title=self.title)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def open_tensorboard(out: Path):
    """A TensorBoard writer into OUTPUT/tensorboard (the package is an extra)."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise SettingError("{tensorboard} needs the tensorboard package: pip install 'bertforge[tensorboard]'") \
            from None
    return SummaryWriter(str(out / "tensorboard"))

"""metrics.jsonl and curves.png: a run with few log lines still draws what it logged."""
from __future__ import annotations

from needs import require_module

from bertforge.training.metrics_log import FEW_POINTS, MetricsLog


def drawn_lines(monkeypatch, log: MetricsLog) -> list[tuple[int, str | None]]:
    """(points, marker) of every series `plot` draws, seen through matplotlib's own Line2D objects."""
    require_module("matplotlib")
    from matplotlib.axes import Axes
    drawn: list[tuple[int, str | None]] = []
    plot = Axes.plot

    def recording(self, *args, **kwargs):
        lines = plot(self, *args, **kwargs)
        drawn.extend((len(line.get_xdata()), line.get_marker()) for line in lines)
        return lines
    monkeypatch.setattr(Axes, "plot", recording)
    assert log.plot() == log.png_path and log.png_path.stat().st_size > 0
    return drawn


def test_a_short_train_series_is_drawn_with_its_points_marked(tmp_path, monkeypatch):
    """One train record (a 99-step run with a log line every 100 steps ends with one) is a visible point, not
    an invisible line through a single point; a long series stays a plain line."""
    short = MetricsLog(tmp_path / "short" / "metrics.jsonl")
    short.log(99, "train", loss=4.2)
    short.log(99, "eval", mlm_loss=4.5)
    assert all(marker not in (None, "None", "", " ") for _, marker in drawn_lines(monkeypatch, short))
    long = MetricsLog(tmp_path / "long" / "metrics.jsonl")
    for step in range(1, FEW_POINTS + 2):
        long.log(step, "train", loss=1.0 / step)
    assert drawn_lines(monkeypatch, long) == [(FEW_POINTS + 1, "None")]


def test_read_metrics_log_gives_the_records_a_run_logged_without_a_line_a_kill_cut(tmp_path):
    from bertforge.training.metrics_log import METRICS_LOG, read_metrics_log
    assert read_metrics_log(tmp_path) == []  # no run here yet
    log = MetricsLog(tmp_path / METRICS_LOG)
    log.log(1, loss=2.5)
    log.log(2, split="eval", accuracy=0.5)
    with open(tmp_path / METRICS_LOG, "a", encoding="utf-8") as handle:
        handle.write('{"step": 3, "spl')  # the kill came mid-line
    assert [(r["step"], r["split"]) for r in read_metrics_log(tmp_path)] == [(1, "train"), (2, "eval")]
    assert read_metrics_log(tmp_path)[1]["accuracy"] == 0.5

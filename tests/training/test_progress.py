"""With the bar off (logs), training still reports: a line per interval with step, values, rate and ETA."""
from __future__ import annotations

from bertforge.training.progress import LogLines, progress


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_log_lines_report_every_interval_with_rate_and_eta():
    clock, lines = FakeClock(), []
    bar = LogLines(total=100, desc="sst2 run", every=60.0, write=lines.append, clock=clock)
    for _ in range(10):  # 10 steps in 50 s: under the interval, nothing yet
        clock.now += 5.0
        bar.update()
    assert lines == []
    bar.set_postfix(loss="0.4321")
    clock.now += 10.0  # step 11 at 60 s
    bar.update()
    assert len(lines) == 1
    # 11 steps in 60 s; 89 left at 11/60 step/s -> 485 s
    assert lines[0] == "sst2 run: step 11/100 (11%) | loss 0.4321 | 0.183 step/s, elapsed 01:00, ETA 08:05"
    clock.now += 1.0
    bar.update()
    assert len(lines) == 1  # the next line waits for another interval
    bar.close()  # the last step is always reported
    assert len(lines) == 2 and lines[1].startswith("sst2 run: step 12/100 (12%)")
    bar.close()
    assert len(lines) == 2  # nothing new to say


def test_resumed_runs_measure_the_rate_from_where_they_started():
    clock, lines = FakeClock(), []
    bar = LogLines(total=1000, initial=900, every=10.0, write=lines.append, clock=clock)
    clock.now += 20.0
    bar.update(50)
    assert "step 950/1000 (95%)" in lines[0] and "2.5 step/s" in lines[0] and "ETA 00:20" in lines[0]


def test_close_without_steps_says_nothing():
    lines = []
    LogLines(total=5, write=lines.append, clock=FakeClock()).close()
    assert lines == []


def test_progress_picks_bar_lines_or_nothing(capsys):
    bar = progress(3, bar=True, desc="x", disable=False, file=None)
    assert not isinstance(bar, LogLines) and not bar.disable
    bar.close()
    assert isinstance(progress(3, bar=False), LogLines)
    silent = progress(3, bar=False, silent=True)
    assert not isinstance(silent, LogLines) and silent.disable
    silent.update(3)
    silent.close()
    assert capsys.readouterr().out == ""

"""With the bar off (logs), training still reports: a line per interval with step, values, rate and ETA."""
from __future__ import annotations

import time

from bertforge.training.progress import LogLines, cpu_share_note, progress


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


def test_a_run_that_got_a_tenth_of_its_cpu_says_so_without_guessing_a_free_machines_steps():
    """Steps / share is no estimate of an unshared machine's count (a step costs more CPU time under load: it said
    563 where an idle machine makes 3,039), so the note gives the steps made and --max-steps, no count."""
    note = cpu_share_note(cpu_seconds=6.0, wall_seconds=60.0, threads=1, steps=40, load=7.5, cores=2)
    assert note is not None
    assert "10% of the CPU time its 1 thread" in note
    assert "load average 7.5 on 2 cores" in note
    assert "made 40 steps" in note and "--max-steps" in note
    assert "400" not in note and "roughly" not in note


def test_the_share_counts_every_thread_the_run_asked_for():
    # 60 CPU-seconds over 60 s is a full core: all of one thread's time, half of two threads'
    assert cpu_share_note(60.0, 60.0, threads=1, steps=100) is None
    note = cpu_share_note(60.0, 60.0, threads=2, steps=100)
    assert note is not None and "50% of the CPU time its 2 threads" in note and "200" not in note


def test_the_share_is_measured_from_this_process_cpu_time():
    """The engine's inputs: time.process_time() does not advance while the process waits (as it does when other
    processes hold the cores), so a run that mostly waited reports a small share."""
    cpu, wall = time.process_time(), time.perf_counter()
    time.sleep(0.3)
    note = cpu_share_note(time.process_time() - cpu, time.perf_counter() - wall, threads=1, steps=5)
    assert note is not None and "made 5 steps" in note

"""The suite's progress: finished units count as done from the start, interrupted ones up to their newest
checkpoint, running units by the steps their metrics.jsonl shows; and why a unit failed, in one line."""
from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from bertforge.evaluation.glue import _jobs
from bertforge.evaluation.scheduler import ERROR, SuiteProgress, _failure_reason
from bertforge.evaluation.units import Unit, examples_done
from bertforge.training.checkpointing import REQUIRED_FILES


def unit(tmp_path, task: str, steps: int = 10) -> Unit:
    return Unit(task, 42, 1e-4, str(tmp_path / task), 10 * steps, steps)


def log_steps(u: Unit, *steps: int, cut: bool = False) -> None:
    run = Path(u.folder) / "run"
    run.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"step": s, "split": "train", "loss": 0.5}) for s in steps]
    (run / "metrics.jsonl").write_text("\n".join(lines) + ("\n{\"step\": 9" if cut else "\n"))


def test_progress_counts_finished_interrupted_and_running_units(tmp_path):
    done, partial, fresh = unit(tmp_path, "cola"), unit(tmp_path, "sst2"), unit(tmp_path, "rte", steps=20)
    done.result_path.parent.mkdir(parents=True)
    done.result_path.write_text("{}")
    log_steps(partial, 1, 2, 3, cut=True)  # killed mid-line: the cut line is not counted
    assert examples_done(partial, batch_size=8) == 24
    checkpoint(partial, 3)
    suite = SuiteProgress([done, partial, fresh], [partial, fresh], batch_size=8, progress=False)
    assert suite.bar.n == 10 * 8 + 3 * 8 and suite.bar.total == 40 * 8 and suite.description() == "glue: 1/3 units"
    log_steps(partial, 1, 2, 3, 4, 5, 6)
    log_steps(fresh, 2)
    suite.update([partial, fresh])
    assert suite.bar.n == 80 + 6 * 8 + 2 * 8
    suite.finished(partial)
    suite.update([fresh])
    assert suite.bar.n == 80 + 80 + 16 and suite.bar.desc == "glue: 2/3 units"
    suite.close()


def checkpoint(u: Unit, step: int) -> None:
    """Plant the files that make run/checkpoints/step-N a complete checkpoint."""
    folder = Path(u.folder) / "run" / "checkpoints" / f"step-{step}"
    folder.mkdir(parents=True)
    for name in REQUIRED_FILES:
        (folder / name).write_bytes(b"")


def test_an_interrupted_unit_counts_up_to_the_checkpoint_it_resumes_from(tmp_path):
    # killed at step 7 with its last checkpoint at step 4: the resumed run does steps 5-7 again
    killed, fresh = unit(tmp_path, "mrpc"), unit(tmp_path, "rte")
    log_steps(killed, *range(1, 8))
    checkpoint(killed, 2)
    checkpoint(killed, 4)
    suite = SuiteProgress([killed, fresh], [killed, fresh], batch_size=8, progress=False)
    assert suite.bar.n == 4 * 8
    suite.update([killed, fresh])  # running, but its metrics.jsonl is still the killed run's
    assert suite.bar.n == 4 * 8
    log_steps(killed, 1, 2, 3, 4, 5)  # the resumed run rewrote it up to its checkpoint and logged step 5
    log_steps(fresh, 1)
    suite.update([killed, fresh])
    assert suite.bar.n == 5 * 8 + 1 * 8
    suite.close()


def test_failure_reasons_name_the_cause_and_the_log(tmp_path):
    u = unit(tmp_path, "mrpc")
    (tmp_path / "mrpc").mkdir()
    assert _failure_reason(u, -9).startswith("its process was killed by signal 9 (out of memory?) (log: ")
    (tmp_path / "mrpc" / ERROR).write_text("DataError: train.tsv line 7: expected a label\n")
    assert _failure_reason(u, 1) == f"DataError: train.tsv line 7: expected a label (log: {tmp_path / 'mrpc' / 'unit.log'})"


def test_jobs_one_per_core_with_the_cores_shared_out(monkeypatch):
    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: set(range(8)), raising=False)
    assert _jobs(None, 20, 0) == (8, 1)
    assert _jobs(2, 20, 0) == (2, 4)
    assert _jobs(None, 3, 0) == (3, 2)      # never more jobs than runs left
    assert _jobs(None, 0, 0) == (1, 8)
    assert _jobs(None, 20, 2) == (2, 4)     # CUDA: one job per GPU


def test_the_longest_runs_start_first(tmp_path, monkeypatch):
    """Equal steps, longer examples: RTE's pairs before SST-2's sentences; then more steps first."""
    from bertforge.evaluation import scheduler
    started = []
    monkeypatch.setattr(scheduler, "SuiteProgress", lambda *a, **k: type("P", (), {
        "update": lambda self, r: None, "close": lambda self: None, "finished": lambda self, u: None})())

    class Recorder:
        def __init__(self, target, args, name):
            started.append(args[0].task)
            self.sentinel, self.exitcode = object(), 0

        def start(self):
            pass

        def join(self):
            pass

    monkeypatch.setattr(scheduler, "_context", lambda: type("C", (), {"Process": Recorder})())
    monkeypatch.setattr(scheduler, "wait", lambda sentinels, timeout: sentinels)
    monkeypatch.setattr(scheduler, "read_result", lambda u: None if u.task not in started else {"score": 1.0})
    units = [Unit("sst2", 42, 1e-4, str(tmp_path / "a"), 320, 10, 60.0),
             Unit("rte", 42, 1e-4, str(tmp_path / "b"), 320, 10, 400.0),
             Unit("cola", 42, 1e-4, str(tmp_path / "c"), 6400, 200, 40.0)]
    from bertforge.evaluation.protocols import get_protocol
    from bertforge.evaluation.units import UnitContext
    scheduler.run_units(units, UnitContext("m", "d", get_protocol("cpu")), jobs=1, threads=1, progress=False)
    assert started == ["cola", "rte", "sst2"]


# ---- a killed suite leaves no worker behind -------------------------------------------------------------------
def _suite_command(tiny_model, data, out) -> list[str]:
    import sys
    return [sys.executable, "-m", "bertforge", "glue", "--model", str(tiny_model), "--data", str(data),
            "--output", str(out), "--tasks", "rte", "--seeds", "1", "--epochs", "1", "--batch-size", "4",
            "--max-train-samples", "320", "--max-eval-samples", "16", "--save-every", "20", "--jobs", "1",
            "--no-progress"]


def _src_env() -> dict[str, str]:
    import os
    return {**os.environ, "OMP_NUM_THREADS": "1",
            "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2] / "src"), os.environ.get("PYTHONPATH", "")])}


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_no_worker_outlives_a_killed_suite_and_the_rerun_completes_it(signum, glue_folder, tiny_model, tmp_path):
    """The suite's process is killed (only it: not its process group, as `kill PID` or an OOM killer would) while
    its worker trains RTE (80 steps, checkpoints every 20). Within seconds no process it started is left — the
    worker, the fork server, the resource tracker — and the same command then finishes the suite: one run of all
    its steps, logged once each (a worker left writing beside the resumed one would log steps twice)."""
    import subprocess

    from processes import descendants, kill_leftovers, left_alive, need_proc, wait_for
    need_proc()
    data, out = glue_folder(tmp_path / "glue", "RTE"), tmp_path / "suite"
    command = _suite_command(tiny_model, data, out)
    driver = subprocess.Popen(command, env=_src_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    started: set[int] = set()
    try:
        wait_for(lambda: any(out.glob("units/rte/*/run/metrics.jsonl")), 300, "training worker", driver)
        started = descendants(driver.pid)
        assert len(started) >= 2  # the worker and the fork server (and its resource tracker)
        driver.send_signal(signum)
        output, _ = driver.communicate(timeout=120)
        assert left_alive(started) == set(), f"processes outlived the suite killed by {signum.name}"
        if signum == signal.SIGTERM:  # ended as Ctrl-C ends it: stopped its workers, said how to go on
            assert driver.returncode == 128 + signal.SIGTERM and "run the same command again" in output, output
        assert not any(out.glob("units/rte/*/unit.json"))
    finally:
        kill_leftovers(started)
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    rerun = subprocess.run(command, env=_src_env(), capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    result = json.loads((out / "glue.json").read_text())
    assert [r["steps"] for r in result["tasks"]["rte"]["runs"]] == [80]
    (metrics,) = out.glob("units/rte/*/run/metrics.jsonl")
    steps = [json.loads(line)["step"] for line in metrics.read_text().splitlines()
             if json.loads(line)["split"] == "train"]
    assert steps == sorted(set(steps)) and steps[-1] == 80


def test_a_suite_refuses_its_output_while_workers_of_an_earlier_one_live(glue_folder, tiny_model, tmp_path, capsys):
    """A process holding the workers' lock (as a worker of a killed suite does until it ends) keeps a second
    suite on that output from starting: one line, status 1; once it is gone the suite runs."""
    import subprocess
    import sys

    from bertforge.cli import main
    from bertforge.evaluation.scheduler import WORKERS_LOCK
    data, out = glue_folder(tmp_path / "glue", "WNLI"), tmp_path / "suite"
    flags = ["glue", "--model", str(tiny_model), "--data", str(data), "--output", str(out), "--tasks", "wnli",
             "--no-progress"]
    assert main(flags) == 0
    capsys.readouterr()
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time\n"
                               "handle = open(sys.argv[1], 'a+')\nfcntl.flock(handle, fcntl.LOCK_SH)\n"
                               "print('held', flush=True)\ntime.sleep(120)", str(out / WORKERS_LOCK)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert main(flags) == 1
        err = capsys.readouterr().err.strip()
        assert err.startswith("bertforge glue: error: ") and "still has fine-tuning processes" in err
        assert "\n" not in err and "--output" in err
        before = sorted(p.name for p in out.rglob("*"))
        assert main([*flags, "--overwrite"]) == 1, "--overwrite must not empty a folder workers still write into"
        assert "still has fine-tuning processes" in capsys.readouterr().err
        assert sorted(p.name for p in out.rglob("*")) == before
    finally:
        holder.kill()
        holder.wait()
    assert main(flags) == 0


def test_overwrite_refuses_the_output_of_a_running_suite(glue_folder, tiny_model, tmp_path, capsys):
    """A suite holding OUTPUT (its .glue.lock) is not emptied under it by a second one's --overwrite."""
    import subprocess
    import sys

    from bertforge.cli import main
    data, out = glue_folder(tmp_path / "glue", "WNLI"), tmp_path / "suite"
    flags = ["glue", "--model", str(tiny_model), "--data", str(data), "--output", str(out), "--tasks", "wnli",
             "--no-progress"]
    assert main(flags) == 0
    capsys.readouterr()
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time\n"
                               "handle = open(sys.argv[1], 'a+')\nfcntl.flock(handle, fcntl.LOCK_EX)\n"
                               "handle.seek(0); handle.truncate(); handle.write('pid 4242'); handle.flush()\n"
                               "print('held', flush=True)\n"
                               "time.sleep(120)", str(out / ".glue.lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        before = sorted(p.name for p in out.rglob("*"))
        assert main([*flags, "--overwrite"]) == 1
        err = capsys.readouterr().err.strip()
        assert "in use by another bertforge glue (pid 4242)" in err and "--overwrite" in err and "\n" not in err
        assert sorted(p.name for p in out.rglob("*")) == before
    finally:
        holder.kill()
        holder.wait()
    assert main([*flags, "--overwrite"]) == 0

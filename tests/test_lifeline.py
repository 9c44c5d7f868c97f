"""A worker that called `die_with_parent` ends with the process that started it, killed with SIGKILL (no
cleanup at all), under every start method — by the kernel's parent-death signal and, where that is not there
(other platforms; or the fork server, which is the parent of a forkserver worker and stays alive), by the
watchdog on the parent sentinel alone."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from processes import descendants, kill_leftovers, left_alive, need_proc, wait_for

DRIVER = '''
import multiprocessing, os, sys, time

def work(ready, watchdog_only):
    import bertforge.lifeline as lifeline
    if watchdog_only:  # as on a platform without prctl
        lifeline._parent_death_signal = lambda signum: False
    lifeline.die_with_parent()
    with open(ready, "w") as handle:
        handle.write(str(os.getpid()))
    while True:  # a worker that would run for ever
        time.sleep(0.05)

if __name__ == "__main__":
    context = multiprocessing.get_context(sys.argv[1])
    worker = context.Process(target=work, args=(sys.argv[2], sys.argv[3] == "watchdog"))
    worker.start()
    worker.join()
'''


@pytest.mark.parametrize("guard", ["both", "watchdog"])
@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_a_worker_ends_within_seconds_of_its_killed_driver(method, guard, tmp_path):
    need_proc()
    if method not in __import__("multiprocessing").get_all_start_methods():
        pytest.skip(f"no {method} start method here")
    script, ready = tmp_path / "driver.py", tmp_path / "worker.pid"
    script.write_text(DRIVER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1] / "src"),
                                                        os.environ.get("PYTHONPATH", "")])}
    driver = subprocess.Popen([sys.executable, str(script), method, str(ready), guard], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    started: set[int] = set()
    try:
        wait_for(lambda: ready.is_file() and ready.read_text(), 60, "worker", driver)
        worker = int(ready.read_text())
        started = descendants(driver.pid)
        assert worker in started
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=10)
        assert left_alive(started) == set(), f"{method}: processes outlived their SIGKILLed driver"
    finally:
        kill_leftovers(started)
        if driver.poll() is None:
            driver.kill()
            driver.wait()

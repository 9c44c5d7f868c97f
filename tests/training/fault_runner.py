"""Run a `bertforge` verb with fault-injection hooks, for tests that kill or break a run from outside.

    python fault_runner.py [--sleep-in-save SECONDS] [--save-step N] [--attempt N] [--nan-from STEP] [--announce]
                           -- <verb> <flags...>

`--sleep-in-save` prints "inside checkpoint save of step-N" to stderr and sleeps inside every checkpoint save
(only step N's with `--save-step`; only in torchrun's restart number N with `--attempt`), after its files are
written and before the rename, so a test can SIGKILL the process exactly there. `--announce` prints
"rank R pid P attempt A" at the start, so a test can kill one rank of a torchrun group.
"""
import argparse
import os
import sys
import time

from bertforge.cli import main
from bertforge.training.engine import FaultHooks

if __name__ == "__main__":
    split = sys.argv.index("--")
    parser = argparse.ArgumentParser()
    parser.add_argument("--sleep-in-save", type=float, default=0.0)
    parser.add_argument("--save-step", type=int, default=None)
    parser.add_argument("--attempt", type=int, default=None)
    parser.add_argument("--nan-from", type=int, default=None)
    parser.add_argument("--announce", action="store_true")
    faults = parser.parse_args(sys.argv[1:split])
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    if faults.announce:
        print(f"[test hook] rank {os.environ.get('RANK', '0')} pid {os.getpid()} attempt {attempt}", file=sys.stderr,
              flush=True)

    def inside_save(step: int) -> None:
        if faults.save_step not in (None, step) or faults.attempt not in (None, attempt):
            return
        print(f"[test hook] inside checkpoint save of step-{step}", file=sys.stderr, flush=True)
        time.sleep(faults.sleep_in_save)

    hooks = FaultHooks(nan_at=(lambda step: step >= faults.nan_from) if faults.nan_from else None,
                       inside_save=inside_save if faults.sleep_in_save > 0 else None)
    sys.exit(main(sys.argv[split + 1:], hooks=hooks))

"""Run a `bertforge` verb with fault-injection hooks, for tests that kill or break a run from outside.

    python fault_runner.py [--sleep-in-save SECONDS] [--nan-from STEP] -- <verb> <flags...>

`--sleep-in-save` prints "inside checkpoint save of step-N" to stderr and sleeps inside every checkpoint save,
after its files are written and before the rename, so a test can SIGKILL the process exactly there.
"""
import argparse
import sys
import time

from bertforge.cli import main
from bertforge.training.engine import FaultHooks

if __name__ == "__main__":
    split = sys.argv.index("--")
    parser = argparse.ArgumentParser()
    parser.add_argument("--sleep-in-save", type=float, default=0.0)
    parser.add_argument("--nan-from", type=int, default=None)
    faults = parser.parse_args(sys.argv[1:split])

    def inside_save(step: int) -> None:
        print(f"[test hook] inside checkpoint save of step-{step}", file=sys.stderr, flush=True)
        time.sleep(faults.sleep_in_save)

    hooks = FaultHooks(nan_at=(lambda step: step >= faults.nan_from) if faults.nan_from else None,
                       inside_save=inside_save if faults.sleep_in_save > 0 else None)
    sys.exit(main(sys.argv[split + 1:], hooks=hooks))

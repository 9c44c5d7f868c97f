"""Kill a whole `bertforge glue` suite at an exact point, as a power cut would.

    python glue_faults.py TASK STEP -- glue <flags...>

runs the verb with a hook inside every checkpoint save: the save of step STEP of TASK's fine-tuning run, after
its files are written and before it is committed, SIGKILLs the process group — the suite, its fork server and
every worker. Start it in a session of its own (start_new_session=True). The hook is a class in this module so
that the worker processes can unpickle it; it knows its run by the worker process's name ("glue <task> ...").
"""
import os
import signal
import sys


class KillGroupAt:
    def __init__(self, task: str, step: int) -> None:
        self.task, self.step = task, step

    def __call__(self, step: int) -> None:
        import multiprocessing
        if step == self.step and multiprocessing.current_process().name.startswith(f"glue {self.task} "):
            print(f"[test hook] killing the suite inside the checkpoint save of step-{step}", flush=True)
            os.killpg(os.getpgrp(), signal.SIGKILL)


class NanIn:
    """FaultHooks.nan_at: every loss of TASK's run is NaN, so that run diverges and fails."""

    def __init__(self, task: str) -> None:
        self.task = task

    def __call__(self, step: int) -> bool:
        import multiprocessing
        return multiprocessing.current_process().name.startswith(f"glue {self.task} ")


if __name__ == "__main__":
    from glue_faults import KillGroupAt as Hook  # by its module name, so workers can unpickle it

    from bertforge.cli import main
    from bertforge.training.options import FaultHooks
    split = sys.argv.index("--")
    sys.exit(main(sys.argv[split + 1:], hooks=FaultHooks(inside_save=Hook(sys.argv[1], int(sys.argv[2])))))

"""Run several `bertforge` commands one after another in one process, so that one `torchrun` launch (whose
start-up dominates a small run) serves many runs; each run forms and leaves its own process group.

    torchrun --nproc_per_node 2 run_many.py COMMANDS.json     # a JSON list of argument lists

Exits with the first non-zero status.
"""
import json
import sys

from bertforge.cli import main

if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as handle:
        commands = json.load(handle)
    for argv in commands:
        status = main(argv)
        if status:
            sys.exit(status)

"""`bertforge <verb>`: one sub-command per pipeline stage.

Each verb lives in `bertforge/commands/<verb>.py` with `register(subparsers)` (its flags) and `run(args)`
(one call into the library). This file only lists them, so `bertforge --help` stays fast: a verb's heavy
imports happen when it runs.
"""
from __future__ import annotations

import argparse
import importlib
import logging
import sys

from bertforge.allocator import keep_freed_memory

# verb -> module under bertforge.commands, in pipeline order (what `--help` shows)
VERBS = {
    "vocab": "vocab",
    "prepare": "prepare",
    "pretrain": "pretrain",
    "fill-mask": "fill_mask",
    "finetune": "finetune",
    "distill": "distill",
    "evaluate": "evaluate",
    "predict": "predict",
    "features": "features",
    "embed": "embed",
    "serve": "serve",
    "export": "export",
    "generate": "generate",
    "score": "score",
    "ablate": "ablate",
    "info": "info",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bertforge", description="BERT end to end: vocabulary, pre-training, "
                                     "fine-tuning, evaluation and prediction.")
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="verb", metavar="<verb>")
    for module_name in VERBS.values():
        try:
            module = importlib.import_module(f"bertforge.commands.{module_name}")
        except ModuleNotFoundError as err:
            if err.name == f"bertforge.commands.{module_name}":
                continue  # verb not built yet
            raise
        module.register(sub)
    return parser


def _version() -> str:
    from bertforge import __version__
    return f"bertforge {__version__}"


def main(argv: list[str] | None = None, hooks=None) -> int:
    """Run one verb. `hooks` (a `training.engine.FaultHooks`) reaches the training verbs: fault-injection tests."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = build_parser()
    args = parser.parse_args(argv)
    args.hooks = hooks
    if not getattr(args, "run", None):
        parser.print_help()
        return 2
    keep_freed_memory()  # large temporaries (model steps, corpora) are reused, not page-faulted in each time
    try:
        return int(args.run(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (FileNotFoundError, ValueError, RuntimeError) as err:
        # Library errors are written to be read by users: show the message, not a traceback.
        if getattr(args, "debug", False):
            raise
        print(f"bertforge {args.verb}: error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

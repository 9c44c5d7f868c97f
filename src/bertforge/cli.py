"""`bertforge <verb>`: one sub-command per pipeline stage.

Each verb lives in `bertforge/commands/<verb>.py` with `register(subparsers)` (its flags) and `run(args)`
(one call into the library). This file only lists them, so `bertforge --help` stays fast: a verb's heavy
imports happen when it runs.
"""
from __future__ import annotations

import argparse
import importlib
import logging
import os
import re
import signal
import sys
import threading

from bertforge.allocator import keep_freed_memory
from bertforge.commands import add_common
from bertforge.outputs import RunAlreadyFinished

# verb -> module under bertforge.commands, in pipeline order (what `--help` shows)
VERBS = {
    "vocab": "vocab",
    "prepare": "prepare",
    "pretrain": "pretrain",
    "lengthen": "lengthen",
    "fill-mask": "fill_mask",
    "finetune": "finetune",
    "lr-find": "lr_find",
    "distill": "distill",
    "seq2seq": "seq2seq",
    "train-embeddings": "train_embeddings",
    "evaluate": "evaluate",
    "glue": "glue",
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


class _Parser(argparse.ArgumentParser):
    """argparse, but a mistake in the flags is one line (and where to look), not the whole usage first; a
    mistyped flag or verb is named, with the nearest one, before any complaint about what is missing."""

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        self._given = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str):  # type: ignore[override]
        parser, mistake = _mistyped(self, getattr(self, "_given", []))
        if mistake:
            parser, message = parser, mistake
        self.exit(2, f"{parser.prog}: error: {message} (see {parser.prog} --help)\n")


def _mistyped(parser: argparse.ArgumentParser, given: list[str]) -> tuple[argparse.ArgumentParser, str | None]:
    """(the parser the mistake belongs to, `--modle is not a flag of bertforge finetune; did you mean --model?`),
    or (parser, None): the first unknown verb or flag in `given`, looked up in the (sub-)parser it was given to."""
    import difflib
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    known = set(parser._option_string_actions)
    for i, token in enumerate(given):
        if token == "--":
            break
        if subs and not token.startswith("-"):
            choices = subs[0].choices
            if token in choices:
                return _mistyped(choices[token], given[i + 1:])
            close = difflib.get_close_matches(token, sorted(choices), n=1)
            if close:
                return parser, f"{token!r} is not a verb of {parser.prog}; did you mean {close[0]}?"
            return parser, None
        name = token.split("=", 1)[0]
        if name.startswith("--") and not any(flag.startswith(name) for flag in known):  # prefixes are argparse's
            close = difflib.get_close_matches(name, sorted(f for f in known if f.startswith("--")), n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            return parser, f"{name} is not a flag of {parser.prog}{hint}"
    return parser, None


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="bertforge", description="BERT end to end: vocabulary, pre-training, "
                                     "fine-tuning, evaluation and prediction.")
    parser.add_argument("--version", action="version", version=_version())
    parser.add_argument("--debug", dest="global_debug", action="store_true",
                        help="show the full traceback of an error (also accepted after the verb)")
    sub = parser.add_subparsers(dest="verb", metavar="<verb>")
    for module_name in VERBS.values():
        try:
            module = importlib.import_module(f"bertforge.commands.{module_name}")
        except ModuleNotFoundError as err:
            if err.name == f"bertforge.commands.{module_name}":
                continue  # verb not built yet
            raise
        module.register(sub)
    for verb_parser in sub.choices.values():  # every verb takes --debug, whether or not it declares it
        if "--debug" not in verb_parser._option_string_actions:
            add_common(verb_parser)
        for each in _with_subcommands(verb_parser):
            _show_defaults(each)
            _show_bounds(each)
    return parser


def _with_subcommands(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return [parser] + [p for s in subs for p in s.choices.values()]


def _show_defaults(parser: argparse.ArgumentParser) -> None:
    """Every flag's help ends with its default, as the settings generator writes it, unless the help already
    says it or the flag is a switch (off unless given)."""
    for action in parser._actions:
        default = action.default
        if (not action.option_strings or not action.help or action.help == argparse.SUPPRESS or action.nargs == 0
                or default in (None, argparse.SUPPRESS, "", [], ()) or "default" in action.help):
            continue
        shown = ",".join(map(str, default)) if isinstance(default, (list, tuple)) else str(default)
        action.help += f" (default: {shown})".replace("%", "%%")


def _show_bounds(parser: argparse.ArgumentParser) -> None:
    """Every number flag's help ends with its upper bound (what its `type=` refuses above, `upper_bound`), unless the
    help already says it."""
    from bertforge.commands.options import bound_text
    for action in parser._actions:
        high = getattr(action.type, "upper_bound", None)
        if high is None or not action.help or action.help == argparse.SUPPRESS:
            continue
        shown = getattr(action.type, "upper_text", None) or bound_text(high)
        if not re.search(rf"(at most |\d-|to ){re.escape(shown)}(?![\d./]|,\d)", action.help):
            action.help += f" (at most {shown})".replace("%", "%%")


def _version() -> str:
    from bertforge.version import __version__
    return f"bertforge {__version__}"


def _wants_debug(argv: list[str]) -> bool:
    """--debug anywhere before a bare `--`: known even when parsing itself fails."""
    return "--debug" in (argv[: argv.index("--")] if "--" in argv else argv)


def _reported_by_rank_zero(err: Exception) -> bool:
    """An error every rank of a torchrun group hit, which rank 0 prints (training.distributed.on_rank_zero)."""
    distributed = sys.modules.get("bertforge.training.distributed")
    return distributed is not None and isinstance(err, distributed.FailedOnRankZero)


class Terminated(KeyboardInterrupt):
    """SIGTERM (what kill, systemd, docker and torchrun send), raised like Ctrl-C's KeyboardInterrupt so that a
    verb's `finally` blocks run — worker processes stopped, files closed — instead of Python's default of ending
    on the spot, which leaves the workers running."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_terminated(signum: int, frame) -> None:
    raise Terminated(signum)


def _on_sigterm(handler):
    """Install `handler` for SIGTERM (from the main thread only, as Python requires); returns the previous one."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, handler)


def main(argv: list[str] | None = None, hooks=None) -> int:
    """Run one verb. Every error a user can cause ends as one line on stderr and exit status 1 (argparse's own
    errors: 2); `--debug` shows the traceback instead. `hooks` (a `training.options.FaultHooks`) reaches the
    training verbs: fault-injection tests."""
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = _wants_debug(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    verb = next((a for a in argv if a in VERBS), None)
    args = parser = None
    previous = _on_sigterm(_raise_terminated)
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        args.hooks = hooks
        verb = args.verb
        if not getattr(args, "run", None):
            parser.print_help()
            return 2
        keep_freed_memory()  # large temporaries (model steps, corpora) are reused, not page-faulted in each time
        return int(args.run(args) or 0)
    except KeyboardInterrupt as stop:
        signum = getattr(stop, "signum", signal.SIGINT)
        print("terminated" if signum == signal.SIGTERM else "interrupted", file=sys.stderr)
        return 128 + int(signum)
    except BrokenPipeError:  # `bertforge ... | head`: the reader left; say nothing more
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - stays open until exit, Python flushes it
        except OSError:
            pass
        return 141
    except SystemExit:
        raise  # argparse's own one-line errors (status 2), --help and --version
    except RunAlreadyFinished as done:  # the same command on its own finished output: nothing to do
        print(f"bertforge {verb}: {done}")
        return 0
    except Exception as err:
        if _reported_by_rank_zero(err):
            return 1
        if debug:
            raise
        from bertforge.commands.errors import describe, verb_flags
        flags = verb_flags(parser, argv) if parser is not None else None
        described = describe(err, output=getattr(args, "output", None), flags=flags)
        prog = f"bertforge {verb}" if verb else "bertforge"
        print(f"{prog}: error: {described.message}", file=sys.stderr)
        return 1
    finally:
        if previous is not None:
            _on_sigterm(previous)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""Every number a flag takes has an upper bound, shown in --help and checked when the command line is parsed:
a slip such as `--epochs 1e12` stops in one line before any work instead of running until killed. The test
walks the whole parser, so a flag added without a bound fails it."""
from __future__ import annotations

import argparse
import functools
import math
import re

import pytest

from bertforge.cli import build_parser, main
from bertforge.settings import SettingError
from bertforge.training.options import TrainOptions

PROBES = ("1", "0.5", "0", "17", "100", "1000", "90s")


def _verb_parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if path:
        yield path, parser
    for sub in subs:
        for name, child in sub.choices.items():
            yield from _verb_parsers(child, path + (name,))


def _takes_a_number(action: argparse.Action) -> bool:
    """The flag's value is a number (or a list of numbers): some probe converts to one."""
    if not action.option_strings or action.type is None or action.nargs == 0:
        return False
    for probe in PROBES:
        try:
            value = action.type(probe)
        except (argparse.ArgumentTypeError, ValueError, TypeError):
            continue
        values = value if isinstance(value, (list, tuple)) else [value]
        return bool(values) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    return False


@functools.cache
def every_verb() -> argparse.ArgumentParser:
    """One parser for the module (a refused command line leaves it as it was)."""
    return build_parser()


@functools.cache
def number_flags() -> list[tuple[tuple[str, ...], str, argparse.Action]]:
    found = []
    for path, parser in _verb_parsers(every_verb()):
        for action in parser._actions:
            if _takes_a_number(action):
                found.append((path, action.option_strings[-1], action))
    return found


def _above(bound: float, integer: bool) -> str:
    return str(int(bound) + 1) if integer else repr(float(bound) * 2 + 1)


def test_the_walk_finds_the_number_flags():
    names = {(" ".join(path), flag) for path, flag, _ in number_flags()}
    assert {("glue", "--epochs"), ("train-embeddings", "--epochs"), ("serve", "--port"), ("glue", "--lr"),
            ("finetune", "--lr"), ("pretrain", "--time-budget"), ("distill task", "--seed")} <= names
    assert len(names) > 150


@pytest.mark.parametrize("path, flag, action", number_flags(),
                         ids=[" ".join(path) + " " + flag for path, flag, _ in number_flags()])
def test_every_number_flag_has_a_documented_bound_refused_above_in_one_line(path, flag, action, capsys):
    bound = getattr(action.type, "upper_bound", None)
    assert isinstance(bound, (int, float)) and math.isfinite(bound), f"{' '.join(path)} {flag}: no upper bound"
    shown = getattr(action.type, "upper_text", None) or (f"{int(bound):,}" if float(bound).is_integer() and bound >= 1
                                                         else f"{bound:g}")
    assert re.search(rf"(?<![\d.,]){re.escape(shown)}(?![\d./]|,\d)", action.help or ""), (flag, action.help)
    integer = isinstance(action.type("1") if _converts(action, "1") else 0.5, int)
    if integer:
        action.type(str(int(bound)))  # the bound itself is a value it takes
    with pytest.raises(SystemExit) as refused:
        every_verb().parse_args([*path, flag, _above(bound, integer)])
    assert refused.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"argument {flag}" in err and "Traceback" not in err, err


def _converts(action: argparse.Action, text: str) -> bool:
    try:
        action.type(text)
    except (argparse.ArgumentTypeError, ValueError, TypeError):
        return False
    return True


@pytest.mark.parametrize("verb", ["glue", "train-embeddings", "finetune", "distill task"])
def test_epochs_1e12_stops_before_any_work(verb, tmp_path, capsys):
    """The probes' case: no folder is read or written, the command ends at once with status 2."""
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as refused:
        main([*verb.split(), "--output", str(out), "--epochs", "1e12"])
    assert refused.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "argument --epochs" in err and "expected at most 1,000" in err and "\n" not in err, err
    assert not out.exists()


def test_the_library_refuses_what_the_flag_refuses():
    """The same bound holds when code builds the settings (check_settings reads the field's metadata)."""
    TrainOptions(max_steps=100_000_000).check()
    with pytest.raises(SettingError, match=r"--max-steps must be at most 100,000,000, got 1000000000000"):
        TrainOptions(max_steps=10 ** 12).check()
    with pytest.raises(SettingError, match=r"--seed must be from 0 to 4,294,967,295, got -1"):
        TrainOptions(max_steps=10, seed=-1).check()
    with pytest.raises(SettingError, match=r"--lr must be at most 1.0, got 2.0"):
        TrainOptions(max_steps=10, lr=2.0).check()
    TrainOptions(max_steps=10, max_grad_norm=math.inf).check()  # inf means "no clipping" to code that passes it

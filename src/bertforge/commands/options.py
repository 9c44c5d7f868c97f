"""Argparse `type=` checks shared by every verb.

A mistake such as `--batch-size 0` or `--input corpus/` should stop at parse time with argparse's own one-line
message (`bertforge pretrain: error: argument --batch-size: expected a whole number of at least 1, got '0'`),
before a model is built or a folder is written. Each callable raises `argparse.ArgumentTypeError`; argparse adds
the flag's name.
"""
from __future__ import annotations

import argparse
import math
import re
from pathlib import Path
from typing import Any, Callable

# the inference settings' bounds and input check, written beside them; re-exported for the verbs that take them from here
from bertforge.tasks.inference_options import MAX_BATCH_TOKENS, MAX_CHARS, check_plain_text

__all__ = [
    "MAX_BATCH_TOKENS",
    "MAX_CHARS",
    "at_most",
    "bound_text",
    "bounded_float",
    "bounded_int",
    "check_plain_text",
    "duration",
    "existing_dir",
    "existing_file",
    "existing_path",
    "fraction",
    "input_path",
    "non_negative_float",
    "non_negative_int",
    "positive_float",
    "positive_int",
    "probability",
]

_INT = re.compile(r"[+-]?\d+")



def _int(text: str, what: str) -> int:
    text = str(text).strip()
    if not _INT.fullmatch(text):
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return int(text)


def _float(text: str, what: str) -> float:
    try:
        value = float(str(text).strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """A whole number >= 1 (counts, sizes, intervals)."""
    value = _int(text, "a whole number of at least 1")
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """A whole number >= 0 (where 0 means "none" or "off")."""
    value = _int(text, "a whole number of at least 0")
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 0, got {text!r}")
    return value


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """A whole number from `low` to `high`: counts whose cost grows with the value (iterations, samples,
    lengths) get an upper bound, so a slip such as `--iterations 1000000000` stops at parse time instead of
    running for days. The bound belongs in the flag's help."""
    what = f"a whole number from {low:,} to {high:,}"

    def parse(text: str) -> int:
        value = _int(text, what)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value

    parse.__name__ = f"int {low}..{high}"  # what argparse shows if it ever names the type
    parse.upper_bound = high  # type: ignore[attr-defined] # the bound --help shows (cli adds it where the help has not)
    return parse


def bounded_float(low: float, high: float) -> Callable[[str], float]:
    """A finite number from `low` to `high` (NaN and infinities refused)."""
    what = f"a number from {low:g} to {high:g}"

    def parse(text: str) -> float:
        value = _float(text, what)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value

    parse.__name__ = f"float {low:g}..{high:g}"
    parse.upper_bound = high  # type: ignore[attr-defined] # the bound --help shows
    return parse


def at_most(convert: Callable[[str], Any], high: float, shown: str | None = None) -> Callable[[str], Any]:
    """`convert`, refusing a value (each value of a list) above `high`; `shown` is how --help writes the bound
    (a duration's in hours, say)."""
    shown = shown or bound_text(high)

    def parse(text: str) -> Any:
        value = convert(text)
        if any(not v <= high for v in (value if isinstance(value, (list, tuple)) else [value])):  # NaN too
            raise argparse.ArgumentTypeError(f"expected at most {shown}, got {text!r}")
        return value

    parse.__name__ = getattr(convert, "__name__", "value")
    parse.upper_bound, parse.upper_text = high, shown  # type: ignore[attr-defined]
    return parse


def bound_text(high: float) -> str:
    """A bound as --help writes it: 1,000,000 or 0.5."""
    return f"{int(high):,}" if float(high).is_integer() and abs(high) >= 1 else f"{high:g}"


def positive_float(text: str) -> float:
    """A finite number > 0 (learning rates, epochs)."""
    value = _float(text, "a number greater than 0")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number greater than 0, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """A finite number >= 0 (weight decay, dropout-like knobs where 0 is off)."""
    value = _float(text, "a number of at least 0")
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number of at least 0, got {text!r}")
    return value


def probability(text: str) -> float:
    """A rate in [0, 1): dropout, held-out fractions that may be 0. 1 would drop or hold out everything."""
    value = _float(text, "a number in [0, 1)")
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1), got {text!r}")
    return value


def fraction(text: str) -> float:
    """A share in (0, 1]: mask rates, warmup shares, parts of a dataset. 0 would select nothing."""
    value = _float(text, "a number in (0, 1]")
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}")
    return value


def existing_file(text: str) -> Path:
    """A path that exists and is a regular file (a folder is named as such)."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder; expected a file")
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text} does not exist")
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text} is not a regular file")
    return path


def existing_dir(text: str) -> Path:
    """A path that exists and is a folder (a checkpoint, a tokenizer, a corpus)."""
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text} does not exist")
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a file; expected a folder")
    return path


def existing_path(text: str) -> Path:
    """A file or a folder that exists (inputs that may be a folder of files)."""
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text} does not exist")
    return path


def path_or_glob(text: str) -> str:
    """A file or folder that exists, or a glob pattern (its matches are found when the run starts)."""
    if any(c in text for c in "*?[") or Path(text).exists():
        return text
    raise argparse.ArgumentTypeError(f"{text} does not exist (and is not a glob pattern)")


def input_path(text: str) -> str:
    """An input file, or '-' for standard input. Returned as str so '-' survives; a folder is refused."""
    if text == "-":
        return text
    return str(existing_file(text))


_DURATION = re.compile(r"(\d+(?:\.\d+)?|\.\d+)\s*([hms])")


def duration(text: str) -> float:
    """'90' or '90s', '30m', '1.5h', '1h30m' -> seconds (> 0)."""
    raw = str(text).strip().lower()
    if re.fullmatch(r"\d+(?:\.\d+)?|\.\d+", raw):
        seconds = float(raw)
    else:
        parts = _DURATION.findall(raw)
        if not parts or "".join(n + u for n, u in parts) != re.sub(r"\s+", "", raw):
            raise argparse.ArgumentTypeError(f"expected a duration such as 90s, 30m, 1.5h or 1h30m, got {text!r}")
        seconds = sum(float(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in parts)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"expected a duration greater than 0, got {text!r}")
    return seconds


probability.upper_bound = fraction.upper_bound = 1.0  # type: ignore[attr-defined] # the bound --help shows

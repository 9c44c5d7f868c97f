"""Command-line flags derived from an options dataclass, so a setting is declared once: its field (type,
default, help, range) becomes the flag `--field-name`, checked when the command line is parsed."""
from __future__ import annotations

import argparse
from dataclasses import MISSING, fields
from typing import Any, Callable, Iterable

from bertforge.commands.options import (duration, non_negative_float, non_negative_int, positive_float,
                                        positive_int)

UNSET = argparse.SUPPRESS  # a deferred flag the user did not give is absent from the parsed namespace

__all__ = ["UNSET", "add_dataclass_arguments", "dataclass_from_args", "positive_int", "non_negative_int", "positive_float"]


def _plain(kind: type) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, "
                                             f"got {text!r}") from None
    parse.__name__ = kind.__name__
    return parse


def flag_of(f) -> str:
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def add_dataclass_arguments(parser: argparse.ArgumentParser, cls: type, *, defaults: Any = None,
                            exclude: Iterable[str] = (), include: Iterable[str] | None = None,
                            title: str | None = None, deferred: dict[str, str] | None = None) -> None:
    """One flag per field of `cls` (help from `metadata["help"]`; `positive`/`non_negative`/`choices`/
    `kind="duration"` from the metadata); `defaults` (an instance) overrides the class defaults; `include` /
    `exclude` pick the fields. A `deferred` field's default is decided after parsing (say, by a recipe): its
    flag is absent from the namespace unless given, and its help ends with the text given for it."""
    target = parser.add_argument_group(title) if title else parser
    skip = set(exclude)
    only = set(include) if include is not None else None
    for f in fields(cls):
        if f.name in skip or (only is not None and f.name not in only):
            continue
        default = getattr(defaults, f.name) if defaults is not None else \
            (f.default if f.default is not MISSING else None)
        if deferred and f.name in deferred:
            default = UNSET
        meta, kind = f.metadata, str(f.type)
        help_text = meta.get("help", "")
        flag = flag_of(f)
        if kind.startswith("bool"):
            if flag.startswith("--no-"):
                target.add_argument(flag, dest=f.name, action="store_false", default=default, help=help_text)
            else:
                target.add_argument(flag, dest=f.name, action="store_true", default=default, help=help_text)
            continue
        if meta.get("kind") == "duration":
            convert: Callable[[str], Any] = duration
        elif kind.startswith("int"):
            convert = positive_int if meta.get("positive") else non_negative_int if meta.get("non_negative") \
                else _plain(int)
        elif kind.startswith("float"):
            convert = positive_float if meta.get("positive") else non_negative_float if meta.get("non_negative") \
                else _plain(float)
        else:
            convert = str
        shown = f" (default: {default})" if default is not None and not isinstance(default, bool) else ""
        if deferred and f.name in deferred:
            shown = f" ({deferred[f.name]})"
        target.add_argument(flag, dest=f.name, type=convert, default=default, choices=meta.get("choices"),
                            metavar=meta.get("metavar"), help=help_text + shown)


def dataclass_from_args(cls: type, args: argparse.Namespace, **extra: Any) -> Any:
    """An instance of `cls` from the parsed flags (fields without a flag come from `extra` or their default)."""
    values = {f.name: getattr(args, f.name) for f in fields(cls) if hasattr(args, f.name)}
    values.update(extra)
    return cls(**{k: v for k, v in values.items() if k in {f.name for f in fields(cls)}})

"""Command-line flags derived from an options dataclass, so a setting is declared once: its field (type,
default, help, range) becomes the flag `--field-name`, checked when the command line is parsed."""
from __future__ import annotations

import argparse
from dataclasses import MISSING, fields
from typing import Any, Callable, Iterable


def _number(kind: type, name: str, positive: bool, non_negative: bool) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, "
                                             f"got {text!r}") from None
        if positive and not value > 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        if non_negative and value < 0:
            raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
        return value
    parse.__name__ = name
    return parse


positive_int = _number(int, "positive_int", True, False)
non_negative_int = _number(int, "non_negative_int", False, True)
positive_float = _number(float, "positive_float", True, False)


def _duration(text: str) -> float:
    from bertforge.training.pretrain import parse_duration
    try:
        value = parse_duration(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def flag_of(f) -> str:
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def add_dataclass_arguments(parser: argparse.ArgumentParser, cls: type, *, defaults: Any = None,
                            exclude: Iterable[str] = (), include: Iterable[str] | None = None,
                            title: str | None = None) -> None:
    """One flag per field of `cls` (help from `metadata["help"]`; `positive`/`non_negative`/`choices`/
    `kind="duration"` from the metadata); `defaults` (an instance) overrides the class defaults; `include` /
    `exclude` pick the fields."""
    target = parser.add_argument_group(title) if title else parser
    skip = set(exclude)
    only = set(include) if include is not None else None
    for f in fields(cls):
        if f.name in skip or (only is not None and f.name not in only):
            continue
        default = getattr(defaults, f.name) if defaults is not None else \
            (f.default if f.default is not MISSING else None)
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
            convert: Callable[[str], Any] = _duration
        elif kind.startswith("int"):
            convert = _number(int, "int", meta.get("positive", False), meta.get("non_negative", False))
        elif kind.startswith("float"):
            convert = _number(float, "float", meta.get("positive", False), meta.get("non_negative", False))
        else:
            convert = str
        shown = f" (default: {default})" if default is not None and not isinstance(default, bool) else ""
        target.add_argument(flag, dest=f.name, type=convert, default=default, choices=meta.get("choices"),
                            metavar=meta.get("metavar"), help=help_text + shown)


def dataclass_from_args(cls: type, args: argparse.Namespace, **extra: Any) -> Any:
    """An instance of `cls` from the parsed flags (fields without a flag come from `extra` or their default)."""
    values = {f.name: getattr(args, f.name) for f in fields(cls) if hasattr(args, f.name)}
    values.update(extra)
    return cls(**{k: v for k, v in values.items() if k in {f.name for f in fields(cls)}})

"""Command-line flags derived from settings dataclasses (`bertforge.settings`): one generator for every verb.

A field becomes the flag `--field-name` (or its `flag`), with its type, range and choices checked when the
command line is parsed, its help followed by the verb's default, and its value under the field's name in the
parsed namespace. A part (the engine's `TrainOptions`, a task's `DataOptions`) becomes a group of flags, less
the fields the verb derives itself; `settings_from_args` builds the verb's settings back from the namespace.
"""
from __future__ import annotations

import argparse
import re
import typing
from dataclasses import MISSING, fields, replace
from typing import Any, Callable, Iterable, Mapping

from bertforge.commands.options import (at_most, bound_text, bounded_float, bounded_int, duration, existing_dir,
                                        existing_file, non_negative_float, non_negative_int, path_or_glob,
                                        positive_float, positive_int, probability)
from bertforge.settings import field_flag

UNSET = argparse.SUPPRESS  # a deferred flag the user did not give is absent from the parsed namespace

__all__ = ["UNSET", "add_data_arguments", "add_settings_arguments", "data_options_from_args", "flat_args",
           "settings_from_args"]


def _existing_file(text: str) -> str:
    return str(existing_file(text))


def _existing_dir(text: str) -> str:
    return str(existing_dir(text))


# value shapes a field's `kind` names (argparse's messages and the doc tests, which skip path values, read each
# converter's name)
KINDS: dict[str, Callable[[str], Any]] = {
    "duration": duration,
    "probability": probability,
    "existing_file": _existing_file,
    "existing_dir": _existing_dir,
    "path_or_glob": path_or_glob,
}


def add_settings_arguments(parser: argparse.ArgumentParser, cls: type, defaults: Any = None, *,
                           title: str | None = None, hide: Iterable[str] = (), include: Iterable[str] = (),
                           help: Mapping[str, str] | None = None, deferred: Mapping[str, str] | None = None) -> None:
    """One flag per field of the settings class `cls`, a group of flags per part. `defaults` (an instance) is
    the verb's; without it, each field's own default. `hide`, `help` and `deferred` do for `cls` what a part's
    metadata does for its fields; `include` adds fields marked `cli=False`."""
    target = parser.add_argument_group(title) if title else parser
    hints = typing.get_type_hints(cls)
    hide, include, help, deferred = set(hide), set(include), dict(help or {}), dict(deferred or {})
    for f in fields(cls):
        meta = f.metadata
        if meta.get("part"):
            part_defaults = getattr(defaults, f.name) if defaults is not None else _default(f)
            add_settings_arguments(parser, meta["part"], None if part_defaults is MISSING else part_defaults,
                                   title=meta["title"], hide=meta["hide"], help=meta["help"], deferred=meta["deferred"])
            continue
        if f.name in hide or (not meta.get("cli", True) and f.name not in include):
            continue
        default = getattr(defaults, f.name) if defaults is not None else _default(f)
        _add_flag(target, f, hints[f.name], default, help.get(f.name, meta.get("help", "")),
                  deferred.get(f.name, meta.get("deferred")))


def _default(f) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return MISSING


def _add_flag(target, f, kind: Any, default: Any, help_text: str, deferred: str | None) -> None:
    meta = f.metadata
    flag = field_flag(f)
    help_text = help_text.replace("%", "%%")  # argparse formats help with %
    if kind is bool:
        action = "store_false" if flag.startswith("--no-") else "store_true"
        target.add_argument(flag, dest=f.name, action=action, default=default, help=help_text)
        return
    if kind == (bool | None):
        target.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, default=default, help=help_text)
        return
    kwargs: dict[str, Any] = {"type": _converter(f, kind), "choices": meta.get("choices"),
                              "metavar": meta.get("metavar"), "nargs": meta.get("nargs")}
    if meta.get("repeatable"):  # --text a --text b means --text a b; --source a --source b, two sources
        kwargs["action"] = "extend" if meta.get("nargs") else "append"
    notes = []
    if deferred:
        kwargs["default"] = UNSET
        notes.append(deferred)
    elif default is MISSING:
        kwargs["required"] = True
    else:
        kwargs["default"] = default
        if default is not None and default != [] and default != "":  # an empty default is "none given"
            shown = _duration_text(default) if meta.get("kind") == "duration" else _shown(default)
            notes.append(f"default: {shown}")
    bound = _bound_note(f, help_text)
    notes += [bound] if bound else []
    if notes:
        help_text = _with_notes(help_text, notes)
    if meta.get("positional"):
        kwargs.pop("required", None)
        target.add_argument(f.name, help=help_text, **kwargs)
        return
    target.add_argument(flag, dest=f.name, help=help_text, **kwargs)


def _with_notes(help_text: str, notes: list[str]) -> str:
    """`help_text` with `notes` (the default, the bound) in one parenthetical: a help text that ends in one
    ("(0: none)") takes them inside it ("(0: none; default: 20)"), else a new one is added."""
    text = "; ".join(notes).replace("%", "%%")
    opening = _last_parenthetical(help_text)
    if opening is not None:
        return f"{help_text[:-1]}; {text})"
    return f"{help_text} ({text})"


def _last_parenthetical(text: str) -> int | None:
    """Where the parenthetical that ends `text` opens, or None when `text` does not end in a balanced one."""
    if not text.endswith(")"):
        return None
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(text[i], 0)
        if depth == 0:
            return i
    return None


def _bound_note(f, help_text: str) -> str | None:
    """What --help says of the field's range ("at most 1,000", "from 1 to 1,000"), unless its help says it."""
    high = f.metadata.get("maximum")
    if high is None:
        return None
    shown = _duration_text(high) if f.metadata.get("kind") == "duration" else bound_text(high)
    if re.search(rf"(at most |\d-|to ){re.escape(shown)}(?![\d./]|,\d)", help_text):
        return None
    if f.metadata.get("kind") == "range":
        return f"from {bound_text(_low(f))} to {shown}"
    return f"at most {shown}"


def _low(f) -> float:
    """The smallest value of a "range" field: its `minimum`, else 1 when `positive`, else 0."""
    low = f.metadata.get("minimum")
    return low if low is not None else 1 if f.metadata.get("positive") else 0


def _shown(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return str(value)


def _converter(f, kind: Any) -> Callable[[str], Any]:
    """What turns the flag's text into the field's value, refusing what the field's metadata does not allow
    (its `maximum` included, which the converter carries for --help as `upper_bound`)."""
    high = f.metadata.get("maximum")
    if high is None:
        return _unbounded(f, kind)
    if f.metadata.get("kind") == "range":  # the message names the whole range
        low = _low(f)
        return bounded_int(int(low), int(high)) if _scalar(kind, f.name) is int else bounded_float(low, high)
    shown = _duration_text(high) if f.metadata.get("kind") == "duration" else None
    return at_most(_unbounded(f, kind), high, shown)


def _duration_text(seconds: float) -> str:
    """A duration bound as the duration flags are written: 720h, 90m, 45s."""
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def _unbounded(f, kind: Any) -> Callable[[str], Any]:
    meta = f.metadata
    if meta.get("parse"):
        return _parsing(meta["parse"])
    if meta.get("kind"):
        return KINDS[meta["kind"]]
    scalar = _scalar(kind, f.name)
    non_negative = meta.get("non_negative") or meta.get("minimum") == 0
    if scalar is int:
        return positive_int if meta.get("positive") else non_negative_int if non_negative else int
    if scalar is float:
        return positive_float if meta.get("positive") else non_negative_float if non_negative else float
    return str


def _parsing(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
    convert.__name__ = parse.__name__
    return convert


def _scalar(kind: Any, name: str) -> type:
    """`str | None` -> str, `Sequence[str]` -> str, `float` -> float: the type one value of the flag has."""
    args = [a for a in typing.get_args(kind) if a is not type(None)] or [kind]
    if len(args) == 1 and typing.get_origin(args[0]) is not None:  # Sequence[str]: nargs gives the list
        args = list(typing.get_args(args[0]))
    if len(args) != 1 or args[0] not in (str, int, float):
        raise TypeError(f"setting {name}: type {kind} has no flag form")
    return args[0]


def settings_from_args(cls: type, args: argparse.Namespace, defaults: Any = None, hide: Iterable[str] = ()) -> Any:
    """The settings `cls` the parsed flags ask for: each field from its flag when the verb has one, else from
    `defaults` (or the field's own default); parts likewise, less the fields the verb derives (`hide`)."""
    values: dict[str, Any] = {}
    for f in fields(cls):
        if f.metadata.get("part"):
            base = getattr(defaults, f.name) if defaults is not None else _default(f)
            values[f.name] = settings_from_args(f.metadata["part"], args, None if base is MISSING else base,
                                                f.metadata["hide"])
        elif f.name not in hide and hasattr(args, f.name):
            values[f.name] = getattr(args, f.name)
    return replace(defaults, **values) if defaults is not None else cls(**values)


def flat_args(cls: type, args: argparse.Namespace) -> dict[str, Any]:
    """The settings of `cls` and of its parts that the command line gave, by their own names (deferred flags
    the user left out are absent)."""
    names = {f.name for f in fields(cls)}
    for f in fields(cls):
        if f.metadata.get("part"):
            names |= {g.name for g in fields(f.metadata["part"]) if g.name not in f.metadata["hide"]}
    return {k: v for k, v in vars(args).items() if k in names}


# ---- the data flags of the task verbs ---------------------------------------------------------------------------
def add_data_arguments(parser: argparse.ArgumentParser, *, include: Iterable[str] = (),
                       exclude: Iterable[str] = (), task_required: bool = True) -> None:
    """The `DataOptions` flags in a "data" group, for a verb that reads task data without training on it:
    `include` adds fields marked `cli=False` (`eval_split` -> `--split`), `exclude` leaves some out, and
    `task_required=False` makes `--task` optional (the verb may take it from a saved predictor)."""
    from bertforge.tasks.task_data import DataOptions
    include, exclude = set(include), set(exclude)
    unknown = (include | exclude) - {f.name for f in fields(DataOptions)}
    if unknown:
        raise ValueError(f"not DataOptions fields: {sorted(unknown)}")
    defaults = None if task_required else DataOptions(task=None)  # type: ignore[arg-type]
    add_settings_arguments(parser, DataOptions, defaults, title="data", hide=exclude, include=include)


def data_options_from_args(args: argparse.Namespace, **overrides: Any):
    """The `DataOptions` a parsed command line asks for; flags a verb did not add keep their defaults.
    `overrides` win over the flags (e.g. `task=` from a saved predictor when `--task` was not given)."""
    from bertforge.tasks.task_data import DataOptions
    values = {f.name: getattr(args, f.name) for f in fields(DataOptions) if hasattr(args, f.name)}
    values.update(overrides)
    if not values.get("task"):
        raise ValueError("--task is required")
    return DataOptions(**values)

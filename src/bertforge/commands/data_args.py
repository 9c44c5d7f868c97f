"""The data flags every task verb shares (`--task`, `--data`, `--train`, `--eval`, columns, split, bad rows).

They are generated from `DataOptions` (types from its annotations, help from its field metadata), so
a data option is declared once and every verb that reads task data gets the same flag, spelled and
checked the same way.
"""
from __future__ import annotations

import argparse
import math
import typing
from dataclasses import MISSING, fields
from typing import Any, Iterable

from bertforge.tasks.task_data import DataOptions


def _task_name(value: str) -> str:
    """Any usual spelling (`SST-2`, `CoNLL-2003`) -> the registry name; unknown names list the known ones."""
    from bertforge.tasks.registry import get_task
    try:
        return get_task(value).name
    except KeyError as exc:
        raise argparse.ArgumentTypeError(str(exc.args[0])) from None


def _fraction(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not 0.0 <= number < 1.0:
        raise argparse.ArgumentTypeError(f"expected a fraction at least 0 and below 1 (e.g. 0.1), got {value!r}")
    return number


_SPECIAL_TYPES = {"task": _task_name, "eval_fraction": _fraction}


def add_data_arguments(parser: argparse.ArgumentParser, *, include: Iterable[str] = (),
                       exclude: Iterable[str] = (), task_required: bool = True) -> argparse._ArgumentGroup:
    """Add one flag per `DataOptions` field to `parser` (in a "data" group) and return the group.

    Fields marked `cli=False` in their metadata (`eval_split` -> `--split`) are added only when named
    in `include`; fields named in `exclude` are left out (e.g. a verb that never trains excludes
    `train_file` and `eval_fraction`). `task_required=False` makes `--task` optional (default None),
    for verbs that can take the task from a saved predictor. Each flag's `dest` is the field name.
    """
    include, exclude = set(include), set(exclude)
    unknown = (include | exclude) - {f.name for f in fields(DataOptions)}
    if unknown:
        raise ValueError(f"not DataOptions fields: {sorted(unknown)}")
    hints = typing.get_type_hints(DataOptions)
    group = parser.add_argument_group("data")
    for f in fields(DataOptions):
        meta = f.metadata
        if f.name in exclude or (not meta.get("cli", True) and f.name not in include):
            continue
        flag = meta.get("flag") or "--" + f.name.replace("_", "-")
        kwargs: dict[str, Any] = {"dest": f.name, "help": meta.get("help")}
        default = None if f.default is MISSING else f.default
        kind = hints[f.name]
        if kind is bool:
            kwargs.update(action="store_true", default=bool(default))
        elif kind == (bool | None):
            kwargs.update(action=argparse.BooleanOptionalAction, default=default)
        else:
            kwargs.update(type=_SPECIAL_TYPES.get(f.name) or _scalar(kind), default=default,
                          metavar=meta.get("metavar") or f.name.upper())
            if meta.get("choices"):
                kwargs.update(choices=meta["choices"], metavar=None)
            if f.default is MISSING:
                kwargs["required"] = task_required if f.name == "task" else True
            elif default is not None:
                kwargs["help"] = f"{kwargs['help']} (default: {default})"
        group.add_argument(flag, **kwargs)
    return group


def _scalar(kind: Any) -> type:
    """`str | None` -> str, `float` -> float: the type argparse converts a flag's text with."""
    args = [a for a in typing.get_args(kind) if a is not type(None)] or [kind]
    if len(args) != 1 or args[0] not in (str, int, float):
        raise TypeError(f"DataOptions field type {kind} has no flag form")
    return args[0]


def data_options_from_args(args: argparse.Namespace, **overrides: Any) -> DataOptions:
    """The `DataOptions` a parsed command line asks for; flags a verb did not add keep their defaults.

    `overrides` win over the flags (e.g. `task=` from a saved predictor when `--task` was not given).
    Inconsistent values raise ValueError with the flag's name.
    """
    values = {f.name: getattr(args, f.name) for f in fields(DataOptions) if hasattr(args, f.name)}
    values.update(overrides)
    if not values.get("task"):
        raise ValueError("--task is required")
    return DataOptions(**values)

"""Typed JSON records: a run's result files as dataclasses, read by attribute rather than by key.

`JsonRecord` is the shared part (the way `transformers`' `TrainerState.save_to_json` pairs a dataclass with its
file): `to_json` writes atomically, `from_json` checks each key's type and answers a missing or mistyped one in a
line naming the file and the key. Keys the dataclass does not know are kept (and written back) in `extra`, so a
file written by a newer bertforge or another tool still reads. Each format's own module defines its record:
`TrainingSummary` here, `FinetuneReport` (tasks), `GlueResult` (evaluation), `DistillReport` (pretraining).
"""
from __future__ import annotations

import dataclasses
import json
import numbers
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, TypeVar

from bertforge.atomic import atomic_write_text

R = TypeVar("R", bound="JsonRecord")
NUMBER = (numbers.Real,)  # numpy's scalars too (a report's values may come from numpy), not a bool
_NAMES = {dict: "an object", list: "a list", str: "a string", int: "an integer", float: "a number",
          numbers.Real: "a number", bool: "true or false", type(None): "null"}


def key(kinds: type | tuple[type, ...], default: Any = dataclasses.MISSING, *,
        factory: Callable[[], Any] | None = None) -> Any:
    """A record field: the JSON types its key may hold; with a default (or factory) the key may be missing."""
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    if factory is not None:
        return field(default_factory=factory, metadata={"kinds": kinds})
    return field(default=default, metadata={"kinds": kinds})


def check_kind(value: Any, kinds: tuple[type, ...], where: str) -> Any:
    """`value` if it is one of `kinds` (a bool is no number), else ValueError naming `where`."""
    if isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds):
        return value
    wanted = " or ".join(dict.fromkeys(_NAMES.get(k, k.__name__) for k in kinds))
    raise ValueError(f"{where} must be {wanted}, got {json.dumps(value, default=str)[:60]}")


@dataclass(kw_only=True)
class JsonRecord:
    """A dataclass whose fields (declared with `key`) are a JSON object's keys, in the file's order."""

    FILE: ClassVar[str] = "record.json"

    def _keys(self) -> list[dataclasses.Field]:
        return [f for f in dataclasses.fields(self) if "kinds" in f.metadata]

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in self._keys() if not self._omit(f.name)}
        data.update(getattr(self, "extra", None) or {})
        return data

    def _omit(self, name: str) -> bool:
        """Keys left out of the file when they hold nothing (a record's optional sections)."""
        return False

    @classmethod
    def from_dict(cls: type[R], data: Any, source: str | Path | None = None, prefix: str = "") -> R:
        """The record from a parsed JSON object; ValueError naming `source` and the key when one is wrong
        (`prefix`: where the object sits in its file, for a record nested in another, such as "tasks.sst2.")."""
        where = f"{source}: " if source is not None else ""
        if not isinstance(data, dict):
            what = f"key {prefix[:-1]!r}" if prefix else f"expected a JSON object ({cls.FILE}), got"
            raise ValueError(f"{where}{what} {'must be an object, got ' if prefix else ''}{type(data).__name__}")
        values: dict[str, Any] = {}
        known = set()
        for f in dataclasses.fields(cls):
            if "kinds" not in f.metadata:
                continue
            known.add(f.name)
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            if f.name not in data:
                if required:
                    raise ValueError(f"{where}key {prefix + f.name!r} is missing")
                continue
            values[f.name] = check_kind(data[f.name], f.metadata["kinds"], f"{where}key {prefix + f.name!r}")
        record = cls(**values)
        if "extra" in {f.name for f in dataclasses.fields(cls)}:
            record.extra = {k: v for k, v in data.items() if k not in known}  # type: ignore[attr-defined]
        record._check(where, prefix)
        return record

    def _check(self, where: str, prefix: str) -> None:
        """Checks inside the keys (a record with nested objects overrides this)."""

    def to_json(self, path: str | Path, default: Callable[[Any], Any] | None = None) -> Path:
        """Write the record to `path` atomically (a kill leaves the old file or the new one)."""
        path = Path(path)
        atomic_write_text(path, json.dumps(self.to_dict(), indent=2, default=default) + "\n")
        return path

    @classmethod
    def from_json(cls: type[R], path: str | Path) -> R:
        """The record in `path`; FileNotFoundError or ValueError in one line naming the file (and the key)."""
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise FileNotFoundError(f"{path}: no such {cls.FILE}") from None
        except (UnicodeDecodeError, ValueError) as err:
            raise ValueError(f"{path}: not valid JSON ({err})") from None
        return cls.from_dict(data, path)


@dataclass(kw_only=True)
class TrainingSummary(JsonRecord):
    """training_summary.json: how the engine's run ended (written once, when it finishes)."""

    FILE: ClassVar[str] = "training_summary.json"
    step: int = key(int, 0)
    stopped_by: str = key(str, "max-steps")             # "max-steps", "time-budget" or "early-stopping"
    skipped_steps: int = key(int, 0)                    # steps whose loss or gradient was not finite
    elapsed_seconds: float = key(NUMBER, 0.0)
    tokens_seen: int = key(int, 0)
    precision: str | None = key((str, type(None)), None)
    world_size: int = key(int, 1)
    final_eval: dict[str, Any] = key(dict, factory=dict)
    best: dict[str, Any] | None = key((dict, type(None)), None)  # {"step", "score", "metrics"} when scored
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def _check(self, where: str, prefix: str) -> None:
        if self.best is not None:
            check_kind(self.best.get("step"), (int,), f"{where}key 'best.step'")
            check_kind(self.best.get("metrics", {}), (dict,), f"{where}key 'best.metrics'")
            check_kind(self.best.get("score", 0.0), NUMBER + (type(None),), f"{where}key 'best.score'")

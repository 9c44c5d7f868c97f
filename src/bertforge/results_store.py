"""The results store: every number the docs publish is a record in docs/results/<group>.json.

The script that measures a number writes its record here (`write_records`); tools/gen_results.py renders the
docs' tables and cited numbers from the store (`read_store`, `render`), so a page cannot drift from what was
measured and two pages cannot give one measurement two values. A store file has a top-level "records" list;
other JSON files in the folder are raw data a record may name as its `source`. The module imports nothing
heavy of its own (the standard library only). A script records what it measured with `Record.measured(...)`
and `write_records(group, records)`.
"""
from __future__ import annotations

import dataclasses
import datetime
import json
import os
import platform
import re
import shlex
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Record", "Store", "StoreError", "write_records", "read_store", "render", "this_machine", "today",
           "RESULTS_DIR"]

RESULTS_DIR = Path("docs/results")
REQUIRED = ("id", "value", "unit", "what", "command", "cpu", "threads", "date", "seeds", "data")
_ID = re.compile(r"^[a-z0-9][a-z0-9._-]*(?:/[a-z0-9._-]+)+$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
STYLES = ("", "bare", "range", "full")


class StoreError(ValueError):
    """A store file or a record in it is malformed; the message names the file and the field."""


@dataclass(frozen=True)
class Record:
    """One published measurement, with what a reader needs to reproduce it."""
    id: str
    value: float
    unit: str
    what: str
    command: str
    cpu: str
    threads: int
    date: str
    seeds: int
    data: str
    digits: int = 2
    spread: tuple[float, float] | None = None
    source: str = ""
    note: str = ""

    def check(self, where: str) -> None:
        """Raise StoreError naming `where` and the field if the record cannot be published as it is."""
        problems = []
        if not _ID.match(self.id):
            problems.append(f"id {self.id!r} is not <group>/<name> in lower case")
        if not isinstance(self.value, (int, float)) or isinstance(self.value, bool):
            problems.append(f"value must be a number, got {self.value!r}")
        if not _DATE.match(self.date):
            problems.append(f"date must be YYYY-MM-DD, got {self.date!r}")
        if not isinstance(self.threads, int) or self.threads < 1:
            problems.append(f"threads must be a positive integer, got {self.threads!r}")
        if not isinstance(self.seeds, int) or self.seeds < 1:
            problems.append(f"seeds must be a positive integer (1: one run), got {self.seeds!r}")
        if not isinstance(self.digits, int) or not 0 <= self.digits <= 6:
            problems.append(f"digits must be an integer 0-6, got {self.digits!r}")
        if self.spread is not None and (len(self.spread) != 2 or not self.spread[0] <= self.spread[1]):
            problems.append(f"spread must be [low, high] with low <= high, got {self.spread!r}")
        for name in ("what", "command", "cpu", "data"):
            if not str(getattr(self, name)).strip():
                problems.append(f"{name} is empty")
        if problems:
            raise StoreError(f"{where}: record {self.id!r}: " + "; ".join(problems))

    @classmethod
    def measured(cls, id: str, value: float, unit: str, what: str, data: str, *, seeds: int = 1,
                 command: str | None = None, **extra: Any) -> Record:
        """A record of a measurement this process just made: CPU, threads and today's date filled in, and the
        command that is running (`python <script> <args>`) unless another is given."""
        cpu, threads = this_machine()
        if command is None:
            command = " ".join(["python", *(shlex.quote(arg) for arg in sys.argv)])
        return cls(id=id, value=value, unit=unit, what=what, command=command, cpu=cpu, threads=threads,
                   date=today(), seeds=seeds, data=data, **extra)

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["spread"] = list(self.spread) if self.spread is not None else None
        return {k: v for k, v in out.items() if v not in ("", None) or k in REQUIRED}


@dataclass
class Store:
    """Every record and table spec of a results folder, by id and by name."""
    records: dict[str, Record] = field(default_factory=dict)
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    files: dict[str, Path] = field(default_factory=dict)  # record id or table name -> the file that holds it


def _record(raw: Mapping[str, Any], where: str) -> Record:
    if not isinstance(raw, Mapping):
        raise StoreError(f"{where}: a record must be an object, got {type(raw).__name__}")
    missing = [name for name in REQUIRED if name not in raw]
    unknown = sorted(set(raw) - {f.name for f in dataclasses.fields(Record)})
    if missing or unknown:
        raise StoreError(f"{where}: record {raw.get('id', '?')!r}: "
                         + "; ".join([f"missing {', '.join(missing)}"] * bool(missing)
                                     + [f"unknown field {', '.join(unknown)}"] * bool(unknown)))
    values = dict(raw)
    if values.get("spread") is not None:
        values["spread"] = tuple(values["spread"])
    record = Record(**values)
    record.check(where)
    return record


def _read_file(path: Path) -> dict[str, Any] | None:
    """The parsed store file, or None for a raw-data JSON file (no top-level "records")."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise StoreError(f"{path}: not JSON ({err})") from None
    if not isinstance(data, dict) or "records" not in data:
        return None
    if not isinstance(data["records"], list):
        raise StoreError(f"{path}: records must be a list")
    return data


def read_store(folder: str | Path = RESULTS_DIR) -> Store:
    """Every record of `folder`'s store files; an id or a table name in two places is an error."""
    store = Store()
    for path in sorted(Path(folder).glob("*.json")):
        data = _read_file(path)
        if data is None:
            continue
        group = data.get("group", path.stem)
        for raw in data["records"]:
            record = _record(raw, str(path))
            if not record.id.startswith(f"{group}/"):
                raise StoreError(f"{path}: record {record.id!r} does not start with its group {group!r}/")
            if record.id in store.files:
                raise StoreError(f"{path}: record {record.id!r} is also in {store.files[record.id]}")
            store.records[record.id], store.files[record.id] = record, path
        for name, spec in (data.get("tables") or {}).items():
            if name in store.tables:
                raise StoreError(f"{path}: table {name!r} is also in {store.files['table:' + name]}")
            if not isinstance(spec, dict) or not isinstance(spec.get("header"), list) or not isinstance(
                    spec.get("rows"), list):
                raise StoreError(f"{path}: table {name!r} needs a 'header' list and a 'rows' list")
            store.tables[name], store.files["table:" + name] = spec, path
    return store


def write_records(group: str, records: Iterable[Record], folder: str | Path = RESULTS_DIR,
                  tables: Mapping[str, Any] | None = None, replace: str | None = None) -> Path:
    """Merge `records` (by id) and `tables` (by name) into `folder`/`group`.json; returns the file's path.

    A script re-measuring one number replaces that record and leaves the group's other records as they are;
    `replace` (an id prefix) drops the group's records under it first, for a measurement whose set of records
    changes with its settings (a record per round, say).
    """
    path = Path(folder) / f"{group}.json"
    data = _read_file(path) if path.exists() else {"group": group, "records": []}
    if data is None:
        raise StoreError(f"{path} is a raw-data file (no \"records\"), not group {group!r}'s records: pick another group")
    merged = {raw["id"]: raw for raw in data["records"] if not (replace and raw["id"].startswith(replace))}
    for record in records:
        record.check(str(path))
        if not record.id.startswith(f"{group}/"):
            raise StoreError(f"{path}: record {record.id!r} does not start with its group {group!r}/")
        merged[record.id] = record.to_json()
    data["records"] = sorted(merged.values(), key=lambda raw: raw["id"])
    if tables:
        data["tables"] = {**(data.get("tables") or {}), **tables}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def _number(value: float, digits: int) -> str:
    return f"{value:,.{digits}f}"


def _with_unit(text: str, unit: str) -> str:
    if unit == "%":
        return f"{text} %"
    if unit == "x":
        return f"{text}x"
    if unit in ("", "loss"):
        return text
    return f"{text} {unit}"


def render(store: Store, spec: str) -> str:
    """The text a page shows for `spec`: `ID`, `ID|bare`, `ID|range` or `ID|full` (the page syntax: tools/gen_results.py)."""
    rid, _, style = spec.strip().partition("|")
    record = store.records.get(rid)
    if record is None:
        raise StoreError(f"no record {rid!r} in the results store")
    if style not in STYLES:
        raise StoreError(f"{spec!r}: style must be one of {', '.join(s or '(none)' for s in STYLES)}")
    value = _number(record.value, record.digits)
    if style == "bare":
        return value
    if style in ("range", "full"):
        if record.spread is None:
            raise StoreError(f"{spec!r}: record {rid!r} has no spread to show")
        low, high = (_number(v, record.digits) for v in record.spread)
        span = _with_unit(f"{low}-{high}", record.unit)
        return span if style == "range" else f"{_with_unit(value, record.unit)} ({span})"
    return _with_unit(value, record.unit)


def this_machine() -> tuple[str, int]:
    """(CPU model name, threads a run gets) for a record, without importing torch."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    threads = os.environ.get("OMP_NUM_THREADS", "")
    return cpu, int(threads) if threads.isdigit() and int(threads) > 0 else cores


def today() -> str:
    """Today's UTC date as a record's `date`."""
    return datetime.datetime.now(datetime.timezone.utc).date().isoformat()

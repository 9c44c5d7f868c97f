"""Rows out of the files users keep data in: JSON Lines, CSV/TSV, Parquet, Arrow and `datasets` folders.

Every reader streams: JSON Lines and CSV a line at a time, Parquet and Arrow a record batch at a time, so
memory does not grow with the file. Parquet and Arrow need pyarrow (the `[data]` extra); a folder written by
`datasets`' `save_to_disk` is read through its Arrow files with pyarrow alone.

A row comes back as (place, values) where place is "line N" for the line formats and "row N" for the
columnar ones, so a message can point at it; a row that cannot be read comes back as a `RecordError` for the
caller to raise or to skip and count.
"""
from __future__ import annotations

import csv
import glob
import json
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from bertforge.textio import COMPRESSED_SUFFIXES, iter_lines

RECORD_KINDS = ("jsonl", "csv", "tsv", "parquet", "arrow", "datasets")
_SUFFIX_KINDS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv", ".tsv": "tsv",
                 ".parquet": "parquet", ".arrow": "arrow", ".feather": "arrow"}
# what `datasets`' save_to_disk writes next to its Arrow files
DATASETS_STATE, DATASETS_INFO, DATASETS_DICT = "state.json", "dataset_info.json", "dataset_dict.json"
BATCH_ROWS = 1024  # rows per Arrow record batch read: a few MB of text at most

Progress = Callable[[int], object]


class RecordError(ValueError):
    """A file, or one row of it, that does not hold what was asked; the message names file, row and field."""

    def __init__(self, path: str | Path, place: str | None, field: str | None, expected: str,
                 got: str | None = None) -> None:
        self.path, self.place, self.field, self.expected, self.got = str(path), place, field, expected, got
        parts = [self.path] + ([place] if place else []) + ([f"field {field!r}"] if field else [])
        super().__init__(", ".join(parts) + f": expected {expected}" + (f", got {got}" if got is not None else ""))


def show(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def input_kind(path: str | Path) -> str:
    """"text" for plain (possibly compressed) text, else one of `RECORD_KINDS`, decided by the suffix (or, for a
    folder, by the files `datasets` writes)."""
    path = Path(path)
    if path.is_dir():
        if (path / DATASETS_DICT).is_file():
            splits = _dataset_dict_splits(path / DATASETS_DICT)
            example = path / (splits or ["train"])[0]
            raise RecordError(path, None, None, "one split of a `datasets` folder",
                              f"a DatasetDict with splits {splits}: give one of them, e.g. {example}")
        return "datasets" if (path / DATASETS_STATE).is_file() else "folder"
    name = path.name.lower()
    for suffix in COMPRESSED_SUFFIXES:
        name = name.removesuffix(suffix)
    return _SUFFIX_KINDS.get(Path(name).suffix, "text")


def _dataset_dict_splits(file: Path) -> list[str]:
    """The split names a DatasetDict's dataset_dict.json lists ({"splits": [...]})."""
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise RecordError(file, None, None, "the JSON `datasets` writes", f"unreadable ({exc})") from None
    if not isinstance(data, dict):
        raise RecordError(file, None, None, 'a JSON object {"splits": [...]}', type(data).__name__)
    splits = data.get("splits", [])
    if not isinstance(splits, list) or not all(isinstance(name, str) and name for name in splits):
        raise RecordError(file, None, "splits", "a list of split names", show(splits))
    return splits


def expand_inputs(inputs: str | Path | Iterable[str | Path]) -> list[tuple[Path, str]]:
    """(path, kind) for every input: files as given, folders walked in sorted order (a `datasets` folder inside
    one is one input), glob patterns (`*`, `?`, `[...]`, `**`) expanded and sorted. Hidden files are skipped."""
    if isinstance(inputs, (str, Path)):
        inputs = [inputs]
    found: list[tuple[Path, str]] = []
    for item in inputs:
        path = Path(item)
        if path.exists():
            matches = [path]
        elif glob.has_magic(str(item)):
            matches = [Path(p) for p in sorted(glob.glob(str(item), recursive=True))]
            if not matches:
                raise FileNotFoundError(f"corpus input {item}: no file matches this pattern")
        else:
            raise FileNotFoundError(f"corpus input not found: {path}")
        for match in matches:
            found.extend(_walk(match))
    if not found:
        raise FileNotFoundError(f"no corpus input files in {[str(i) for i in inputs]}")
    return found


def _walk(path: Path) -> Iterator[tuple[Path, str]]:
    kind = input_kind(path)
    if kind != "folder":
        if path.is_file() or kind == "datasets":
            yield path, kind
        return
    for child in sorted(path.iterdir()):
        if not child.name.startswith("."):
            yield from _walk(child)


def iter_rows(path: str | Path, kind: str, columns: Sequence[str] | None = None,
              progress: Progress | None = None) -> Iterator[tuple[str, dict[str, Any] | RecordError]]:
    """(place, {column: value}) per row of a record file; `columns` (all when None) must exist in a CSV header or
    an Arrow schema, else the whole file is refused. JSON objects missing a key give None for it. `progress`
    receives on-disk byte counts that add up to the file's size."""
    path = Path(path)
    if kind == "jsonl":
        return _jsonl_rows(path, progress)
    if kind in ("csv", "tsv"):
        return _delimited_rows(path, kind, columns, progress)
    if kind in ("parquet", "arrow", "datasets"):
        return _arrow_rows(path, kind, columns, progress)
    raise ValueError(f"{path}: not a record file (kind {kind!r}; expected one of {', '.join(RECORD_KINDS)})")


def _jsonl_rows(path: Path, progress: Progress | None) -> Iterator[tuple[str, dict[str, Any] | RecordError]]:
    for lineno, line in enumerate(iter_lines(path, errors="surrogateescape", progress=progress), start=1):
        if not line.strip():
            continue
        place = f"line {lineno}"
        try:
            obj = json.loads(line.lstrip("\ufeff") if lineno == 1 else line, object_pairs_hook=_unique_keys)
        except json.JSONDecodeError as exc:
            yield place, RecordError(path, place, None, "one JSON object per line", f"invalid JSON ({exc.msg})")
            continue
        except _DuplicateKey as exc:
            yield place, RecordError(path, place, exc.key, "each key once in an object", f"{exc.key!r} twice")
            continue
        if not isinstance(obj, dict):
            yield place, RecordError(path, place, None, "a JSON object", type(obj).__name__)
            continue
        yield place, obj


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object as a dict, refusing a key given twice (json.loads would keep the last one silently)."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return obj


def _delimited_rows(path: Path, kind: str, columns: Sequence[str] | None,
                    progress: Progress | None) -> Iterator[tuple[str, dict[str, Any] | RecordError]]:
    """CSV with real quoting (a field may span lines: rows are numbered by the line they start on); TSV split on
    tab without quoting, as GLUE writes it."""
    lines = iter_lines(path, errors="surrogateescape", progress=progress)
    if kind == "tsv":
        rows: Iterator[tuple[int, list[str]]] = ((n, line.split("\t")) for n, line in enumerate(lines, 1) if line)
    else:
        rows = csv_rows(path, (line + "\n" for line in lines))
    header: list[str] | None = None
    for lineno, fields in rows:
        if header is None:
            header = [name.strip().lstrip("\ufeff") for name in fields]
            _check_columns(path, f"line {lineno}", header, columns, "header")
            continue
        place = f"line {lineno}"
        if len(fields) != len(header):
            yield place, RecordError(path, place, None, f"{len(header)} fields ({', '.join(header)})",
                                     str(len(fields)))
            continue
        yield place, dict(zip(header, fields))


def csv_rows(path: str | Path, lines: Iterable[str], delimiter: str = ",") -> Iterator[tuple[int, list[str]]]:
    """CSV rows (from lines that keep their ends) with the line each starts on: a quoted field may span lines.
    `delimiter` separates the fields (`;` for tables written with it, as the ktrain emotion files are)."""
    reader = csv.reader(lines, delimiter=delimiter)
    start = 1
    try:
        for fields in reader:
            if fields:
                yield start, fields
            start = reader.line_num + 1
    except csv.Error as exc:
        raise RecordError(path, f"line {reader.line_num}", None, "well-formed CSV", str(exc)) from exc


def _check_columns(path: Path, place: str | None, names: Sequence[str], columns: Sequence[str] | None,
                   what: str) -> None:
    """The wanted `columns` are in `names`, and no name is there twice (which of two `text` columns holds the
    text? taking either silently reads the wrong one)."""
    seen: dict[str, int] = {}
    for number, name in enumerate(names, start=1):
        if name and name in seen:
            raise RecordError(path, place, name, f"each column name once in the {what}",
                              f"{name!r} as columns {seen[name]} and {number} (rename one of them)")
        seen.setdefault(name, number)
    for column in columns or ():
        if column not in names:
            shown = ", ".join(names) if len(names) <= 12 else ", ".join(names[:12]) + ", ..."
            raise RecordError(path, place, column, f"a column {column!r} in the {what}", f"columns {shown}")


def record_columns(path: str | Path, kind: str) -> list[str]:
    """The column names of a Parquet, Arrow or `datasets` input, from its schema (no row is read)."""
    return list(_schema(Path(path), kind).names)


def class_label_names(path: str | Path, kind: str) -> dict[str, list[str]]:
    """{column: label names} for the columns `datasets` stores as ClassLabel ids (or lists of them, as
    conll2003's `ner_tags`), read from the `huggingface` metadata `datasets` writes into the schema of its
    Parquet and Arrow files; empty for a file without it."""
    raw = (_schema(Path(path), kind).metadata or {}).get(b"huggingface")
    try:
        features = json.loads(raw)["info"]["features"] if raw else {}
    except (ValueError, KeyError, TypeError):
        return {}
    names = {column: _label_names(feature) for column, feature in features.items()} if isinstance(features, dict) \
        else {}
    return {column: found for column, found in names.items() if found is not None}


def _label_names(feature: Any) -> list[str] | None:
    """The names of a ClassLabel feature, looking through the list types (`Sequence`, `List`) around it."""
    while isinstance(feature, dict) and feature.get("_type") in ("Sequence", "List", "LargeList"):
        feature = feature.get("feature")
    if not isinstance(feature, dict) or feature.get("_type") != "ClassLabel":
        return None
    names = feature.get("names")
    if isinstance(names, list) and all(isinstance(name, str) for name in names):
        return names
    return None


def _schema(path: Path, kind: str) -> Any:
    """The Arrow schema of a Parquet, Arrow or `datasets` input (its first file's), with its metadata."""
    file = arrow_files(path)[0] if kind == "datasets" else path
    pa = require_pyarrow(file)
    try:
        if kind == "parquet":
            import pyarrow.parquet as pq
            return pq.read_schema(file)
        with pa.OSFile(str(file), "rb") as source:
            try:
                return pa.ipc.open_file(source).schema
            except pa.ArrowInvalid:
                source.seek(0)
                return pa.ipc.open_stream(source).schema
    except (pa.ArrowException, OSError) as exc:
        what = "a readable Parquet file" if kind == "parquet" else "a readable Arrow file"
        raise RecordError(file, None, None, what, f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}") from None


def require_pyarrow(path: str | Path) -> Any:
    try:
        import pyarrow
    except ImportError:
        raise RecordError(path, None, None, "pyarrow to read Parquet and Arrow files",
                          "no pyarrow (pip install 'bertforge[data]')") from None
    return pyarrow


def arrow_files(path: Path) -> list[Path]:
    """The Arrow files of a `datasets` save_to_disk folder, in its order (state.json lists them)."""
    try:
        state = json.loads((path / DATASETS_STATE).read_text(encoding="utf-8"))
        files = [path / item["filename"] for item in state["_data_files"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RecordError(path / DATASETS_STATE, None, "_data_files", "the list of Arrow files `datasets` writes",
                          f"unreadable ({exc})") from None
    for file in files:
        if not file.is_file():
            raise RecordError(path / DATASETS_STATE, None, "_data_files", "files that exist", f"missing {file.name}")
    return files


def _arrow_rows(path: Path, kind: str, columns: Sequence[str] | None,
                progress: Progress | None) -> Iterator[tuple[str, dict[str, Any] | RecordError]]:
    row = 0
    for file in arrow_files(path) if kind == "datasets" else [path]:
        for batch in _record_batches(file, "parquet" if kind == "parquet" else "arrow", columns, progress):
            values = {name: batch.column(name).to_pylist() for name in (columns or batch.schema.names)}
            for i in range(batch.num_rows):
                row += 1
                yield f"row {row}", {name: column[i] for name, column in values.items()}


def _record_batches(file: Path, kind: str, columns: Sequence[str] | None, progress: Progress | None) -> Iterator[Any]:
    """Record batches of one Parquet or Arrow (IPC file or stream) file, read a batch at a time; a file pyarrow
    cannot read is refused naming it, and where in it reading failed."""
    pa = require_pyarrow(file)
    size, done, rows = file.stat().st_size, 0, 0
    try:
        batches, position, names = _open_batches(pa, file, kind, columns)
        _check_columns(file, None, names, columns, "schema")
        for batch in batches:
            rows += batch.num_rows
            if progress is not None:
                now = min(size, position(rows))
                progress(now - done)
                done = now
            yield batch
    except (pa.ArrowException, OSError) as exc:
        what = "a readable Parquet file" if kind == "parquet" else "a readable Arrow file"
        place = f"after row {rows}" if rows else None
        raise RecordError(file, place, None, what, f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}") from None
    if progress is not None:
        progress(size - done)


def _open_batches(pa: Any, file: Path, kind: str,
                  columns: Sequence[str] | None) -> tuple[Iterator[Any], Callable[[int], int], list[str]]:
    """(batches, rows read -> on-disk bytes read, column names) for a Parquet file or an Arrow IPC file/stream."""
    if kind == "parquet":
        import pyarrow.parquet as pq
        # a buffered stream and no pre-buffering: memory stays at a batch, not a whole row group
        handle = pq.ParquetFile(file, buffer_size=1 << 20, pre_buffer=False)
        names = handle.schema_arrow.names
        selected = [c for c in columns if c in names] if columns else None
        size, total = file.stat().st_size, max(handle.metadata.num_rows, 1)
        return (handle.iter_batches(batch_size=BATCH_ROWS, columns=selected),
                lambda rows: size * rows // total, names)
    source = pa.OSFile(str(file), "rb")  # read, not memory-mapped: pages do not pile up in the RSS
    try:
        reader = pa.ipc.open_file(source)
        batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
    except pa.ArrowInvalid:
        source.seek(0)
        reader = pa.ipc.open_stream(source)
        batches = iter(reader)
    names = reader.schema.names
    if columns:
        batches = (batch.select([c for c in columns if c in names]) for batch in batches)
    return _small_batches(batches), lambda rows: source.tell(), names


def _small_batches(batches: Iterator[Any]) -> Iterator[Any]:
    """Arrow files may hold one batch for millions of rows: hand them on in slices of `BATCH_ROWS`."""
    for batch in batches:
        for start in range(0, batch.num_rows, BATCH_ROWS):
            yield batch.slice(start, BATCH_ROWS)

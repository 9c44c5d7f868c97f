"""The one record source of every task reader: rows of CSV, TSV, JSON Lines, Parquet, Arrow or a `datasets` folder.

Classification, NER, QA and multiple-choice files in any of these formats come through `read_records`, so a
column flag, a bad-row message and the `--skip-bad-rows` count mean the same thing whatever the format. CSV has
real quoting (and may be split on another character: `;` tables such as the ktrain emotion files, read from a
`.txt` whose header names the columns, see `sniff_delimiter`); TSV is split on tab with no quoting, like GLUE;
Parquet, Arrow (`.arrow`/`.feather`) and `datasets` save_to_disk folders are read a record batch at a time
through pyarrow (`bertforge.data.records`), their rows numbered from 1 in messages.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Iterator, Sequence

from bertforge.data.records import (RecordError, class_label_names, csv_rows, input_kind, iter_rows,
                                    record_columns)
from bertforge.settings import SettingError
from bertforge.tasks.readers.base import iter_decoded, iter_lines
from bertforge.tasks.readers.errors import DataError, show
from bertforge.tasks.readers.labels import check_header

FORMATS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl", ".parquet": "parquet",
           ".arrow": "arrow", ".feather": "arrow"}
COLUMNAR = ("parquet", "arrow", "datasets")
RECORD_FORMATS = ("csv", "tsv", "jsonl") + COLUMNAR
#: The separators a `.txt` table's header is tried with (`sniff_delimiter`).
DELIMITERS = (",", ";", "\t", "|")

Row = tuple[int, "dict[str, Any] | DataError"]


def file_format(path: str | Path) -> str | None:
    """The record format of a file name (a `.gz` suffix is looked through), "datasets" for a folder written by
    `datasets`' save_to_disk, None when neither."""
    path = Path(path)
    if path.is_dir():
        return "datasets" if input_kind(path) == "datasets" else None
    return FORMATS.get(Path(path.name.removesuffix(".gz")).suffix.lower())


@dataclass
class Records:
    """The rows of one record file, and what its header or schema says about them.

    `columns` are the header's (CSV/TSV) or schema's (columnar) names, None for JSON Lines, whose objects name
    their own keys (and for an empty file); `header_line` is the header's line (None for a schema: a column
    missing from it is the file's fault, not a row's). `class_names` maps a column stored as integer class ids
    to its label names, as `datasets` records them (ClassLabel features). A row that cannot be read is a
    DataError for the reader to raise or to skip and count.
    """

    path: Path
    fmt: str
    columns: list[str] | None
    header_line: int | None
    rows: Iterator[Row]
    class_names: dict[str, list[str]] = field(default_factory=dict)

    def require(self, wanted: str, names: list[str]) -> list[str]:
        """The names a row's field is looked up by: the first of `names` the header or schema has (the file is
        refused, naming the first of `names`, when it has none of them); for JSON Lines, which has no header,
        all of `names`, each object being checked as it comes."""
        if self.columns is None:
            return names
        found = next((name for name in names if name in self.columns), None)
        if found is None:
            expected = f"a column {names[0]!r}" if len(names) == 1 else f"a column named one of {names}"
            raise DataError(self.path, self.header_line, names[0], f"{expected} ({wanted})", show(self.columns))
        return [found]


def is_text_file(path: str | Path) -> bool:
    """A `.txt` (or `.txt.gz`) name: one input per line, or a table whose header says it is (`sniff_delimiter`)."""
    return str(path) != "-" and Path(str(path).removesuffix(".gz")).suffix.lower() == ".txt"


def parse_delimiter(value: str) -> str:
    """The `--delimiter` value: one character (`;`, `|`, ...), or `tab` / `\\t` for a tab."""
    text = "\t" if value.lower() in ("tab", "\\t") else value
    if len(text) != 1 or text in "\"\r\n" or text.isalnum():
        raise ValueError(f"expected one separator character such as ';' or '|' (or 'tab'), got {value!r}")
    return text


def sniff_delimiter(path: str | Path, text_names: Sequence[str]) -> str | None:
    """The field separator of a `.txt` table, from its first non-blank line; None for one input per line.

    The rule: the line is a header when one of `,` `;` TAB `|` splits it into two or more column names (each
    non-empty, at most 40 characters, no spaces inside) and one of them is a text column (`text_names`); of
    several such separators the one giving the most columns wins. A sentence (`i feel great; really`) names no
    text column, so a file of texts stays a file of texts, whatever punctuation it has."""
    first = next((line for _, line in iter_lines(path) if line.strip()), "")
    best: tuple[int, str] | None = None
    for sep in DELIMITERS:
        names = [name.strip().lstrip("\ufeff") for name in first.split(sep)]
        header = len(names) >= 2 and all(0 < len(n) <= 40 and " " not in n for n in names)
        if header and any(n in text_names for n in names) and (best is None or len(names) > best[0]):
            best = (len(names), sep)
    return best[1] if best else None


def table_format(path: str | Path, fmt: str | None, delimiter: str | None,
                 text_names: Sequence[str]) -> tuple[str | None, str | None]:
    """(format, delimiter) to read `path` with: `delimiter` (the `--delimiter` setting) makes a .csv, .tsv or
    .txt file a table split on it (CSV quoting; a .tsv split on tab stays unquoted, as GLUE's are); a `.txt` whose
    header passes `sniff_delimiter` is a table too; anything else keeps `fmt` (None: not a table)."""
    if delimiter is not None:
        if fmt not in (None, "csv", "tsv") or Path(path).is_dir():
            raise SettingError("{delimiter} splits .csv, .tsv and .txt tables; {path} is a {fmt} input",
                               path=path, fmt=fmt or "folder")
        return ("tsv", None) if fmt == "tsv" and delimiter == "\t" else ("csv", delimiter)
    if fmt is None and is_text_file(path) and Path(path).is_file():
        found = sniff_delimiter(path, text_names)
        if found is not None:
            return "csv", found
    return fmt, None


def read_records(path: str | Path, fmt: str, delimiter: str = ",") -> Records:
    """Open a record file of format `fmt` (one of `RECORD_FORMATS`; a "csv" file's fields split on `delimiter`).
    A file pyarrow cannot read raises `RecordError` (a ValueError) naming it, and the row reading stopped after;
    a header naming a column twice raises DataError."""
    path = Path(path)
    if fmt in COLUMNAR:
        return Records(path, fmt, record_columns(path, fmt), None, _columnar_rows(path, fmt),
                       class_label_names(path, fmt))
    if fmt == "jsonl":
        return Records(path, fmt, None, None, _jsonl_rows(path))
    rows = _delimited_rows(path, fmt, delimiter)
    header = next(rows, None)
    if header is None:
        return Records(path, fmt, None, None, iter(()))
    return Records(path, fmt, list(header[1]), header[0], rows)


def _columnar_rows(path: Path, fmt: str) -> Iterator[Row]:
    """(row number, values) per row; a file that breaks part way raises `RecordError` naming it and the row."""
    for place, row in iter_rows(path, fmt):
        assert not isinstance(row, RecordError)  # columnar rows are whole, or the file is refused
        yield int(place.split()[-1]), row


def _jsonl_rows(path: Path) -> Iterator[Row]:
    for lineno, line in iter_lines(path):
        if not line.strip():
            continue
        try:
            obj = json.loads(line, object_pairs_hook=partial(_object, path, lineno))
        except json.JSONDecodeError as exc:
            yield lineno, DataError(path, lineno, None, "one JSON object per line", f"invalid JSON ({exc.msg})")
            continue
        except DataError as err:  # a key written twice
            yield lineno, err
            continue
        if not isinstance(obj, dict):
            yield lineno, DataError(path, lineno, None, "a JSON object", type(obj).__name__)
            continue
        yield lineno, obj


def _delimited_rows(path: Path, fmt: str, delimiter: str = ",") -> Iterator[tuple[int, Any]]:
    """The header (line, names) first, then (line, row) per data row."""
    if fmt == "tsv":
        rows: Iterator[tuple[int, list[str]]] = ((n, line.split("\t")) for n, line in iter_lines(path) if line)
    else:
        rows = _csv_rows(path, delimiter)
    header: list[str] | None = None
    for lineno, fields in rows:
        if header is None:
            header = [h.strip() for h in fields]
            check_header(path, lineno, header)
            yield lineno, header
            continue
        if len(fields) != len(header):
            missing = header[len(fields)] if len(fields) < len(header) else f"column {len(header) + 1}"
            yield lineno, DataError(path, lineno, missing, f"{len(header)} fields ({', '.join(header)})",
                                    str(len(fields)))
            continue
        yield lineno, dict(zip(header, fields))


def _object(path: Path, line: int, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refused when it names a key twice (a dict would silently keep the last value)."""
    check_header(path, line, [key for key, _ in pairs], unit="key")
    return dict(pairs)


def _csv_rows(path: Path, delimiter: str = ",") -> Iterator[tuple[int, list[str]]]:
    """CSV rows with the line each starts on; a bad byte is blamed on its own line (`iter_decoded`)."""
    try:
        yield from csv_rows(path, iter_decoded(path), delimiter)
    except RecordError as err:
        raise DataError(path, int((err.place or "line 0").split()[-1]), None, err.expected, err.got) from None

"""Inputs of `bertforge predict` from the files fine-tuning reads, and its records out as JSON lines or CSV.

`.csv` / `.tsv` (header row), `.jsonl`, `.parquet`, `.arrow` and `datasets` folders come from the same record source
as fine-tuning data (`readers.rows`), so a dev file can be predicted as it is (its labels are ignored): texts and
pairs as classification reads them, questions and contexts from `question`/`context`, a sentence to tag from a
`tokens` or `words` list or a `text`, multiple choice from `context`/`start`/`endings` or SWAG's `sent1`/`sent2`/
`ending0`... `.txt` (or stdin) holds one input per line: a text, two parts split by a tab (text<TAB>text_pair,
question<TAB>context, context<TAB>ending<TAB>...), or a JSON object; but a `.txt` whose first line is a header
naming the columns (`text;label_name`, split on one of , ; TAB |: `readers.rows.sniff_delimiter`) is a table.
Every problem is reported as one line naming the file, the line or row, and the field.
"""
from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path
from typing import Any, Iterable, Sequence, TextIO

from bertforge.settings import SettingError
from bertforge.tasks.heads import HEADS
from bertforge.tasks.readers import BadRowsError, DataError, read_classification
from bertforge.tasks.readers.generic import TEXT_ALIASES
from bertforge.tasks.readers.rows import file_format, is_text_file, read_records, table_format

TABLE_SUFFIXES = (".csv", ".tsv", ".jsonl", ".json", ".parquet", ".arrow", ".feather")


def input_format(path: str | Path) -> str:
    """"csv", "tsv", "jsonl", "parquet", "arrow", "datasets" or "txt", from the name (a `.gz` suffix is looked
    through)."""
    return "txt" if str(path) == "-" else file_format(path) or "txt"


def read_inputs(path: str | Path, head: str, *, text_column: str | None = None,
                text_pair_column: str | None = None) -> list[Any]:
    """What `Predictor.predict` takes for `head`, one item per example of the file, in file order."""
    kind = HEADS[head].inputs
    fmt, sep = _sniffed_format(path, head, text_column)
    if fmt == "txt":
        if text_column or text_pair_column:
            raise SettingError("{path}: {text_column}/{text_pair_column} need a .csv, .tsv, .jsonl, .parquet or "
                               ".arrow input", path=path)
        with open_input(path) as handle:
            return parse_lines(handle, head, str(path))
    if kind in ("words", "choices"):
        if text_pair_column:
            raise SettingError("{text_pair_column} does not apply to a {head} predictor", head=head)
        return _record_inputs(path, fmt, head, text_column, sep)
    if kind == "question":
        text_column, text_pair_column = text_column or "question", text_pair_column or "context"
    try:
        result = read_classification(path, text_column=text_column, text_pair_column=text_pair_column,
                                     labeled=False, format=fmt, delimiter=sep)
    except BadRowsError as err:  # predict answers every input in order: there is no skipping to suggest
        raise ValueError(err.without_hint()) from None
    if kind == "question":
        return [(ex.text, ex.text_pair) for ex in result.examples]
    return [ex.text if ex.text_pair is None else (ex.text, ex.text_pair) for ex in result.examples]


def _sniffed_format(path: str | Path, head: str, text_column: str | None) -> tuple[str, str | None]:
    """(format, delimiter): a `.txt` whose header line names the columns (`text;label_name`) is a table split
    on what `readers.rows.sniff_delimiter` finds; any other `.txt` holds one input per line."""
    fmt = input_format(path)
    if fmt != "txt" or not is_text_file(path):
        return fmt, None
    kind = HEADS[head].inputs
    names = [text_column] if text_column else ["question"] if kind == "question" else (
        ["context", "sent1"] if kind == "choices" else list(TEXT_ALIASES) + ["tokens", "words"])
    found, sep = table_format(path, None, None, names)
    return found or "txt", sep


def _record_inputs(path: str | Path, fmt: str, head: str, text_column: str | None,
                   delimiter: str | None = None) -> list[Any]:
    """Inputs of a token_classification or multiple_choice predictor: each record read as the JSON object of a
    .txt line would be (`text_column`: where the words or text to tag are)."""
    out = []
    for line, record in read_records(path, fmt, delimiter or ",").rows:
        if isinstance(record, DataError):
            raise record
        try:
            out.append(_from_object(record, head, text_column))
        except _LineError as err:
            raise DataError(path, line, err.field, err.expected, err.got) from None
    return out


def open_input(path: str | Path) -> TextIO:
    if str(path) == "-":
        return io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="strict", newline="\n")
    from bertforge.textio import open_text
    return open_text(path)


def parse_lines(lines: Iterable[str], head: str, source: str = "<input>") -> list[Any]:
    """Parse non-blank lines (see the module docstring); errors name `source` and the line."""
    out = []
    for lineno, line in enumerate(lines, start=1):
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        try:
            out.append(parse_line(line, head))
        except UnicodeDecodeError as err:
            raise DataError(source, lineno, None, "UTF-8 text", err.reason) from None
        except _LineError as err:
            raise DataError(source, lineno, err.field, err.expected, err.got) from None
    return out


class _LineError(Exception):
    def __init__(self, field: str | None, expected: str, got: str | None = None) -> None:
        super().__init__(expected)
        self.field, self.expected, self.got = field, expected, got


def parse_line(line: str, head: str) -> Any:
    """One input line -> what `Predictor.predict` takes for this head."""
    if line.lstrip().startswith("{"):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            raise _LineError(None, "one JSON object per line", f"invalid JSON ({err.msg})") from None
        if not isinstance(obj, dict):
            raise _LineError(None, "a JSON object", type(obj).__name__)
        return _from_object(obj, head)
    kind = HEADS[head].inputs
    if kind == "question":
        if "\t" not in line:
            raise _LineError(None, "question<TAB>context", repr(line[:60]))
        return tuple(line.split("\t", 1))
    if kind == "choices":
        parts = line.split("\t")
        if len(parts) < 2:
            raise _LineError(None, "context<TAB>ending<TAB>ending...", repr(line[:60]))
        return parts[0], parts[1:]
    if "\t" in line and kind != "words":
        return tuple(line.split("\t", 1))
    return line


def _field(obj: dict[str, Any], key: str, kind: type | tuple[type, ...] = str) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind):
        name = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise _LineError(key, f"a {name}", "nothing" if value is None else type(value).__name__)
    return value


def _from_object(obj: dict[str, Any], head: str, text_column: str | None = None) -> Any:
    kind = HEADS[head].inputs
    if kind == "question":
        return _field(obj, "question"), _field(obj, "context")
    if kind == "choices":
        if "endings" not in obj and "ending0" in obj:  # SWAG's columns
            count = next(i for i in range(len(obj) + 1) if f"ending{i}" not in obj)
            return _field(obj, "sent1"), obj.get("sent2") or "", [_field(obj, f"ending{i}") for i in range(count)]
        endings = _field(obj, "endings", list)
        return _field(obj, "context"), obj.get("start") or "", endings
    if kind == "words":
        if text_column:
            return _field(obj, text_column, (list, str))
        key = next((k for k in ("words", "tokens") if k in obj), None)
        if key:
            return _field(obj, key, list)
        return _field(obj, next((k for k in TEXT_ALIASES if k in obj), "text"))
    text = _field(obj, "text")
    return (text, _field(obj, "text_pair")) if obj.get("text_pair") is not None else text


# ---- records out ----------------------------------------------------------------------------------------------
def write_records(records: Sequence[dict[str, Any]], handle: TextIO, fmt: str = "jsonl") -> None:
    """JSON lines, or CSV with nested dicts flattened to `key.sub` columns and lists as JSON."""
    if fmt == "jsonl":
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        return
    if fmt != "csv":
        raise ValueError(f"unknown output format {fmt!r}; choose jsonl or csv")
    rows = [_flatten(r) for r in records]
    columns = list(dict.fromkeys(k for row in rows for k in row))
    writer = csv.DictWriter(handle, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)


def _flatten(record: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, name + "."))
        elif isinstance(value, (list, tuple)):
            out[name] = json.dumps(value, ensure_ascii=False)
        else:
            out[name] = value
    return out


def output_format(path: str | Path) -> str:
    return "csv" if str(path).lower().endswith(".csv") else "jsonl"

"""Reader for a user's own classification/regression data: CSV, TSV, JSON Lines, Parquet or Arrow.

Columns: `text` (aliases `sentence`, `sentence1`), optional `text_pair` (alias `sentence2`),
`label` (or `label_name`). CSV uses real CSV quoting; TSV is split on tab with no quoting, like GLUE; a `.txt`
table (`text;label_name`, the ktrain emotion files) or `delimiter` gives CSV split on another character. Parquet, Arrow
(`.arrow`/`.feather`) and `datasets` save_to_disk folders are read a record batch at a time through pyarrow;
their rows are numbered from 1 in messages.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

from bertforge.tasks.readers.base import BadRows, ReadResult, finish, split_name
from bertforge.tasks.readers.errors import DataError, show
from bertforge.tasks.readers.examples import TextExample
from bertforge.tasks.readers.labels import clean_label, refuse_case_variants, unknown_label
from bertforge.tasks.readers.rows import RECORD_FORMATS, file_format, is_text_file, read_records, table_format

TEXT_ALIASES = ("text", "sentence", "sentence1")
PAIR_ALIASES = ("text_pair", "sentence2")
LABEL_ALIASES = ("label", "label_name")  # label_name: the ktrain emotion files' header
def infer_label_list(labels: Sequence[str | None]) -> list[str]:
    """Sorted distinct label names; numerically when all are integers (so "10" comes after "2")."""
    names = sorted({lab for lab in labels if lab is not None})
    if names and all(_is_int(n) for n in names):
        return sorted(names, key=int)
    return names


def read_classification(
    path: str | Path,
    *,
    label_list: Sequence[str] | None = None,
    text_column: str | None = None,
    text_pair_column: str | None = None,
    label_column: str | None = None,
    regression: bool = False,
    labeled: bool | None = None,
    format: str | None = None,
    skip_bad_rows: bool = False,
    label_source: str | None = None,
    delimiter: str | None = None,
) -> ReadResult[TextExample]:
    """Read a CSV/TSV/JSONL/Parquet/Arrow file of (text[, text_pair], label) rows into TextExamples.

    `label_list` fixes the label names (read train first and pass its `.labels` to dev so both
    share one id mapping); without it the names are inferred from this file, sorted. Labels given
    as JSON numbers become strings. `regression=True` parses labels as floats. `label_source` names
    where `label_list` came from (the train file) in the message for a label outside it. Empty or
    blank texts are bad rows. `labeled=None` decides from the first row/header whether labels are
    present; `labeled=True` (data to train or score on) refuses a file without the label column; a
    file that is labeled must have a label on every row. Labels follow `readers.labels`: surrounding
    whitespace is dropped, spellings that differ only by case are refused. A header or JSON object
    naming a column twice is refused. The format comes from the suffix (`.json` is read as JSON
    Lines) unless `format` says "csv", "tsv", "jsonl", "parquet", "arrow" or "datasets". `delimiter` splits
    a .csv/.tsv/.txt table on that character instead (CSV quoting); a `.txt` whose header line names the columns
    is read as a table split on what `readers.rows.sniff_delimiter` finds (`text;label_name`: the ktrain emotion
    files). Without `label_column` the column is `label` (or `label_name`, when only that one is there).
    """
    path = Path(path)
    names = [text_column] if text_column else list(TEXT_ALIASES)
    fmt, sep = table_format(path, format or file_format(path), delimiter, names)
    if fmt not in RECORD_FORMATS:
        got = (f"its first line is no header naming a {' / '.join(names)} column (split on , ; TAB or |)"
               if is_text_file(path) else f"got a {path.suffix or 'suffix-less'} "
               f"{'folder' if path.is_dir() else 'file'}")
        raise ValueError(f"{path}: expected a .csv, .tsv, .jsonl, .parquet or .arrow file, a `datasets` folder or a "
                         ".txt table (with a header row, JSON keys or columns naming the text and label); " + got)
    bad = BadRows(skip_bad_rows)
    examples: list[TextExample] = []
    known = list(label_list) if label_list is not None else None
    split = split_name(path)
    columns: tuple[str, str | None, str | None] | None = None
    saw_rows = False
    records = read_records(path, fmt, sep or ",")
    if records.columns is not None:  # a header or schema: the columns are chosen from it
        columns = _pick_columns(dict.fromkeys(records.columns), path, records.header_line, text_column,
                                text_pair_column, label_column, labeled, header=True)
    for lineno, record in records.rows:
        saw_rows = True
        try:
            if isinstance(record, DataError):
                raise record
            if columns is None:
                columns = _pick_columns(record, path, lineno, text_column, text_pair_column, label_column,
                                        labeled, header=False)
            text_key, pair_key, label_key = columns
            text = _text(record, text_key, path, lineno)
            pair = _text(record, pair_key, path, lineno) if pair_key else None
            label = _label(record, label_key, path, lineno, regression, known, label_source) if label_key else None
        except DataError as err:
            bad.handle(err)
            continue
        examples.append(TextExample(f"{split}-{len(examples) + bad.count}", text, pair, label, lineno))
    if not regression and columns is not None and columns[2] is not None:
        refuse_case_variants(path, columns[2], ((ex.label, ex.line) for ex in examples))  # type: ignore[misc]
        if known is None:
            known = infer_label_list([ex.label for ex in examples])  # type: ignore[misc]
    return finish(path, examples, None if regression else known, bad, saw_rows=saw_rows)


def _pick_columns(record: dict[str, Any], path: Path, line: int | None, text: str | None, pair: str | None,
                  label: str | None, labeled: bool | None, *, header: bool) -> tuple[str, str | None, str | None]:
    """Choose the text/pair/label keys from the header (CSV/TSV) or the first object (JSONL)."""
    keys = list(record)
    label = label or next((k for k in LABEL_ALIASES if k in record), LABEL_ALIASES[0])
    text_key = text or next((k for k in TEXT_ALIASES if k in record), None)
    if text_key is None or text_key not in record:
        raise DataError(path, line, text or "text", f"a {'column' if header else 'key'} named one of "
                        f"{[text] if text else list(TEXT_ALIASES)}", show(keys))
    pair_key = pair or next((k for k in PAIR_ALIASES if k in record), None)
    if pair_key is not None and pair_key not in record:
        raise DataError(path, line, pair_key, f"a {'column' if header else 'key'} {pair_key!r}", show(keys))
    has_label = label in record and labeled is not False
    if labeled and not has_label:
        kind = "column" if header else "key"
        raise DataError(path, line, label, f"a label {kind} {label!r} (data to train or score on needs a label on "
                        f"every row; --label-column names another {kind})", f"{kind}s {show(keys)}")
    return text_key, pair_key, label if has_label else None


def _text(record: dict[str, Any], key: str, path: Path, line: int) -> str:
    value = record.get(key)
    if not isinstance(value, str):
        raise DataError(path, line, key, "a string", "nothing" if value is None else show(value))
    if not value.strip():
        raise DataError(path, line, key, "non-empty text", show(value))
    return value


def _label(record: dict[str, Any], key: str, path: Path, line: int, regression: bool,
           known: list[str] | None, source: str | None = None) -> str | float:
    value = record.get(key)
    if regression:
        try:
            score = float(value) if not isinstance(value, bool) else math.nan  # type: ignore[arg-type]
        except (TypeError, ValueError):
            score = math.nan
        if not math.isfinite(score):
            raise DataError(path, line, key, "a finite number", "nothing" if value is None else show(value))
        return score
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        value = str(value)  # JSON 3 -> "3", 3.5 -> "3.5": class names, or numbers for regression detection
    if not isinstance(value, str) or not value.strip():
        raise DataError(path, line, key, "a label name (string or number)",
                        "nothing" if value is None or value == "" else show(value))
    value = clean_label(value)
    if known is not None and value not in known:
        raise unknown_label(path, line, key, value, known, source)
    return value


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def numeric_labels(labels: Sequence[str | float | None]) -> tuple[bool, bool]:
    """(every label is a finite number, every label is written as an integer).

    Used to decide regression: all-numeric labels with a fraction among them ("3.8") are scores;
    all-integer labels ("0"/"1", star ratings) are more often class ids, so they stay classes unless
    the user asks for regression.
    """
    values = [lab for lab in labels if lab is not None]
    if not values:
        return False, False
    for lab in values:
        try:
            number = float(lab)
        except (TypeError, ValueError):
            return False, False
        if not math.isfinite(number):
            return False, False
    return True, all(isinstance(lab, str) and _is_int(lab.strip()) for lab in values)

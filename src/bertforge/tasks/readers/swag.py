"""Reader for SWAG: the rowanz/swagaf `train.csv` / `val.csv` / `test.csv` files, or the same columns as records.

Header: `,video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0..ending3,label`
(the first, unnamed column is a row index; test.csv has no `label`). Unlike GLUE this is a
real CSV with quoted fields. The same columns in Parquet, Arrow or a `datasets` save_to_disk folder (the
layout of `datasets`' swag, whose `label` is an integer) come through the same record source
(`readers.rows`).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertforge.tasks.readers.base import BadRows, ReadResult, finish, split_name
from bertforge.tasks.readers.errors import DataError, show
from bertforge.tasks.readers.rows import COLUMNAR, file_format, read_records

NUM_CHOICES = 4
REQUIRED = ("sent1", "sent2") + tuple(f"ending{i}" for i in range(NUM_CHOICES))
RECORD_FORMATS = ("csv",) + COLUMNAR


@dataclass(frozen=True)
class SwagExample:
    """A context sentence, the start of the next one, and four candidate endings for it.

    The model scores `context` paired with `start + " " + ending_i` for each i.
    """

    guid: str
    context: str
    start: str
    endings: tuple[str, str, str, str]
    label: int | None
    line: int
    video_id: str = ""


def read_swag(
    path: str | Path,
    *,
    labeled: bool | None = None,
    skip_bad_rows: bool = False,
    format: str | None = None,
) -> ReadResult[SwagExample]:
    """Read SWAG (CSV, or `.parquet`/`.arrow`/a `datasets` folder); the label is the index (0-3) of the true
    ending, None for a test file without labels."""
    path = Path(path)
    fmt = format or file_format(path) or "csv"
    if fmt not in RECORD_FORMATS:
        raise ValueError(f"SWAG format must be one of {', '.join(RECORD_FORMATS)}; got {fmt!r}")
    records = read_records(path, fmt)
    if records.columns is None:
        raise DataError(path, None, None, "a SWAG CSV header and rows", "an empty file")
    for name in REQUIRED:
        records.require(f"SWAG's columns {list(REQUIRED) + ['label']}", [name])
    has_label = "label" in records.columns and labeled is not False
    if labeled and not has_label:
        raise DataError(path, records.header_line, "label", "a labeled file (a 'label' column)",
                        show(records.columns))
    bad = BadRows(skip_bad_rows)
    examples: list[SwagExample] = []
    split = split_name(path)
    saw_rows = False
    for line, record in records.rows:
        saw_rows = True
        try:
            if isinstance(record, DataError):
                raise record
            examples.append(_example(record, has_label, path, line, f"{split}-{len(examples) + bad.count}"))
        except DataError as err:
            bad.handle(err)
    return finish(path, examples, [str(i) for i in range(NUM_CHOICES)], bad, saw_rows=saw_rows)


def _example(record: dict[str, Any], has_label: bool, path: Path, line: int, guid: str) -> SwagExample:
    label = None
    if has_label:
        raw = record["label"]
        if isinstance(raw, str) and raw.strip() in {str(i) for i in range(NUM_CHOICES)}:
            label = int(raw)
        elif isinstance(raw, int) and not isinstance(raw, bool) and 0 <= raw < NUM_CHOICES:
            label = raw
        else:
            raise DataError(path, line, "label", f"an ending index 0-{NUM_CHOICES - 1}", show(raw))
    texts = {}
    for name in REQUIRED:
        value = record[name]
        if not isinstance(value, str):
            raise DataError(path, line, name, "a string", "nothing" if value is None else show(value))
        texts[name] = value
    endings = tuple(texts[f"ending{i}"] for i in range(NUM_CHOICES))
    video = record.get("video-id")
    return SwagExample(guid, texts["sent1"], texts["sent2"], endings, label, line,  # type: ignore[arg-type]
                       video if isinstance(video, str) else "")

"""Reader for SWAG in the rowanz/swagaf `train.csv` / `val.csv` / `test.csv` layout.

Header: `,video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0..ending3,label`
(the first, unnamed column is a row index; test.csv has no `label`). Unlike GLUE this is a
real CSV with quoted fields, so the csv module reads it.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from bertforge.tasks.readers.base import BadRows, ReadResult, finish, iter_decoded, split_name
from bertforge.tasks.readers.errors import DataError, show
from bertforge.tasks.readers.labels import check_header

NUM_CHOICES = 4
REQUIRED = ("sent1", "sent2") + tuple(f"ending{i}" for i in range(NUM_CHOICES))


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
) -> ReadResult[SwagExample]:
    """Read a SWAG CSV; the label is the index (0-3) of the true ending, None for test.csv."""
    path = Path(path)
    bad = BadRows(skip_bad_rows)
    examples: list[SwagExample] = []
    split = split_name(path)
    saw_rows = False
    reader = csv.reader(iter_decoded(path))
    try:
        header = next(reader, None)
        if header is None:
            raise DataError(path, None, None, "a SWAG CSV header and rows", "an empty file")
        check_header(path, 1, header)
        missing = [c for c in REQUIRED if c not in header]
        if missing:
            raise DataError(path, 1, missing[0], f"a header with columns {list(REQUIRED) + ['label']}",
                            show(",".join(header)))
        has_label = "label" in header and labeled is not False
        if labeled and not has_label:
            raise DataError(path, 1, "label", "a labeled file (a 'label' column)", show(",".join(header)))
        col = {name: header.index(name) for name in header}
        start = reader.line_num + 1
        for fields in reader:
            row_line, start = start, reader.line_num + 1
            if not fields:
                continue
            saw_rows = True
            try:
                ex = _example(fields, header, col, has_label, path, row_line, split,
                              len(examples) + bad.count)
            except DataError as err:
                bad.handle(err)
                continue
            examples.append(ex)
    except csv.Error as exc:
        raise DataError(path, reader.line_num, None, "well-formed CSV", str(exc)) from exc
    return finish(path, examples, [str(i) for i in range(NUM_CHOICES)], bad, saw_rows=saw_rows)


def _example(fields: list[str], header: list[str], col: dict[str, int], has_label: bool, path: Path,
             line: int, split: str, row: int) -> SwagExample:
    if len(fields) != len(header):
        name = header[len(fields)] if len(fields) < len(header) else f"column {len(header) + 1}"
        raise DataError(path, line, name, f"{len(header)} comma-separated fields", str(len(fields)))
    label = None
    if has_label:
        raw = fields[col["label"]]
        if raw.strip() not in {str(i) for i in range(NUM_CHOICES)}:
            raise DataError(path, line, "label", f"an ending index 0-{NUM_CHOICES - 1}", show(raw))
        label = int(raw)
    endings = tuple(fields[col[f"ending{i}"]] for i in range(NUM_CHOICES))
    return SwagExample(f"{split}-{row}", fields[col["sent1"]], fields[col["sent2"]],
                       endings, label, line, fields[col["video-id"]] if "video-id" in col else "")  # type: ignore[arg-type]

"""Readers for the nine GLUE tasks, in the `glue_data` TSV layout written by GLUE's download script.

Lines are split on tab by hand: GLUE texts contain unbalanced quotes (MRPC, SST-2, QQP) that a
CSV parser with quoting on would use to swallow several rows into one.
"""
from __future__ import annotations

import math
from pathlib import Path

from bertforge.tasks.glue_tasks import GLUE, GlueFormat, glue_task
from bertforge.tasks.glue_tasks import normalize_task_name as normalize_task_name  # re-exported: readers API
from bertforge.tasks.readers.base import BadRows, ReadResult, finish, iter_lines, split_name
from bertforge.tasks.readers.errors import DataError, show
from bertforge.tasks.readers.examples import TextExample
from bertforge.tasks.readers.labels import check_header, clean_label, unknown_label


#: Each task's columns and labels, from its row of the GLUE table.
GLUE_FORMATS: dict[str, GlueFormat] = {name: row.format for name, row in GLUE.items()}


def glue_labels(task: str) -> list[str] | None:
    """The task's label list in canonical order (None for the STS-B regression task)."""
    fmt = _format(task)
    return list(fmt.labels) if fmt.labels is not None else None


def _format(task: str) -> GlueFormat:
    return glue_task(task).format


def parse_label(value: str, fmt: GlueFormat, path: Path, line: int, column: str) -> str | float:
    """Check a label against the task: a known class name, or a finite score inside the range."""
    if fmt.labels is not None:
        value = clean_label(value)
        if value not in fmt.labels:
            raise unknown_label(path, line, column, value, fmt.labels, None)
        return value
    try:
        score = float(value)
    except ValueError:
        score = math.nan
    lo, hi = fmt.score_range or (-math.inf, math.inf)
    if not (math.isfinite(score) and lo <= score <= hi):
        raise DataError(path, line, column, f"a number between {lo:g} and {hi:g}", show(value))
    return score


def read_glue(
    task: str,
    path: str | Path,
    *,
    labeled: bool | None = None,
    skip_bad_rows: bool = False,
) -> ReadResult[TextExample]:
    """Read one GLUE split (train/dev/test) of `task` into TextExamples.

    `labeled=None` takes labels when the header has the label column (train/dev) and none when it
    has not (test); pass True to make a missing label column an error. Bad rows raise DataError,
    or with `skip_bad_rows=True` are skipped and counted in the result.
    """
    fmt = _format(task)
    path = Path(path)
    bad = BadRows(skip_bad_rows)
    examples: list[TextExample] = []
    split = split_name(path)
    header: list[str] | None = None
    saw_rows = False
    text_i = pair_i = label_i = id_i = -1
    for lineno, line in iter_lines(path):
        if header is None:
            first = line.split("\t")
            if fmt.headerless is not None and first[0] not in fmt.ids:
                header = list(fmt.headerless)  # CoLA train/dev: this line is already data
            else:
                header = first
                text_i, pair_i, label_i, id_i = _columns(fmt, header, path, labeled)
                continue
            text_i, pair_i, label_i, id_i = _columns(fmt, header, path, labeled)
        if not line:
            continue  # a trailing blank line is not a row
        saw_rows = True
        fields = line.split("\t")
        try:
            if len(fields) != len(header):
                missing = header[len(fields)] if len(fields) < len(header) else None
                raise DataError(path, lineno, missing or f"column {len(header) + 1}",
                                f"{len(header)} tab-separated fields ({', '.join(header)})",
                                f"{len(fields)}")
            label = parse_label(fields[label_i], fmt, path, lineno, header[label_i]) if label_i >= 0 else None
        except DataError as err:
            bad.handle(err)
            continue
        ident = fields[id_i] if id_i >= 0 else str(len(examples) + bad.count)
        examples.append(TextExample(
            guid=f"{split}-{ident}",
            text=fields[text_i],
            text_pair=fields[pair_i] if pair_i >= 0 else None,
            label=label,
            line=lineno,
        ))
    if header is None:
        raise DataError(path, None, None, "a header row and data rows", "an empty file")
    return finish(path, examples, glue_labels(task), bad, saw_rows=saw_rows)


def _columns(fmt: GlueFormat, header: list[str], path: Path, labeled: bool | None) -> tuple[int, int, int, int]:
    """Column indices of text, pair, label, id (-1 = absent); a missing text column is fatal."""
    check_header(path, 1, header)
    wanted = [fmt.text] + ([fmt.pair] if fmt.pair else [])
    for name in wanted:
        if name not in header:
            raise DataError(path, 1, name, f"a header containing {wanted + [fmt.label]} (the GLUE task's columns; "
                            "for your own data use --task classification or regression)", show("\t".join(header)))
    has_label = fmt.label in header and labeled is not False
    if labeled and not has_label:
        raise DataError(path, 1, fmt.label, "a labeled file (label column in the header)", show("\t".join(header)))
    ident = next((header.index(c) for c in fmt.ids if c in header), -1)
    return (header.index(fmt.text), header.index(fmt.pair) if fmt.pair else -1,
            header.index(fmt.label) if has_label else -1, ident)

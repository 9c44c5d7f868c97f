"""What every reader shares: opening (possibly gzipped) text, the result type, the bad-row policy."""
from __future__ import annotations

import gzip
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, Iterator, TextIO, TypeVar

from bertforge.tasks.readers.errors import BadRowsError, DataError

logger = logging.getLogger(__name__)

E = TypeVar("E")

#: How many skipped rows a result keeps as examples (the count is always exact).
MAX_SKIP_SAMPLES = 5


def open_text(path: str | Path) -> TextIO:
    """Open a whole-document UTF-8 file (JSON), gunzipping ``*.gz``; ``utf-8-sig`` drops a leading BOM."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"data file not found: {path}")
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8-sig")
    return open(path, encoding="utf-8-sig")


def iter_decoded(path: str | Path) -> Iterator[str]:
    """Lines with their line ends kept, decoded one at a time so a bad byte is blamed on its own line.

    (Decoding through a text stream reads ahead in blocks and would name an earlier line.)
    Splits on LF only; feed this to csv.reader for quoted formats.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"data file not found: {path}")
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataError(path, lineno, None, "UTF-8 text",
                                f"undecodable byte {raw[exc.start:exc.start + 1]!r} at column {exc.start + 1}") from exc
            yield text.removeprefix("\ufeff") if lineno == 1 else text


def iter_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield (1-based line number, line without its end-of-line)."""
    for lineno, text in enumerate(iter_decoded(path), start=1):
        yield lineno, text.rstrip("\r\n")


def split_name(path: str | Path) -> str:
    """`dev_matched.tsv.gz` -> `dev_matched`: the split name used in example guids."""
    return Path(path).name.split(".")[0]


class BadRows:
    """Collect bad rows: without ``skip`` the read fails at the end, naming the first and counting all
    (a user fixing a file wants to know whether it is one row or ten thousand); with ``skip=True`` they
    are counted and a few kept for the report."""

    def __init__(self, skip: bool, unit: str = "rows") -> None:
        self.skip = skip
        self.unit = unit
        self.count = 0
        self.samples: list[DataError] = []

    def handle(self, error: DataError, units: int = 1) -> None:
        self.count += units
        if len(self.samples) < MAX_SKIP_SAMPLES:
            self.samples.append(error)

    def raise_if_failing(self, every: bool = False) -> None:
        """Without ``skip``, any bad row fails the read: one line, the first bad row plus the count (``every``:
        no row was good, which says more about the file than about its rows)."""
        if self.skip or not self.count:
            return
        raise BadRowsError(self.samples[0], self.count, self.unit, self.samples[1:], every=every)


@dataclass
class ReadResult(Generic[E]):
    """Examples read from one file, the task's label list, and what was skipped on the way.

    Behaves like a read-only list of examples (len, iteration, indexing).
    """

    path: Path
    examples: list[E]
    labels: list[str] | None
    skipped: int = 0
    skipped_samples: list[DataError] = field(default_factory=list)
    unit: str = "rows"  # what one skipped item is: rows, sentences, questions

    def __len__(self) -> int:
        return len(self.examples)

    def __iter__(self) -> Iterator[E]:
        return iter(self.examples)

    def __getitem__(self, index: int) -> E:
        return self.examples[index]

    def summary(self) -> str:
        """One line for logs: how many examples, how many bad rows skipped and why (first one)."""
        text = f"{self.path}: {len(self.examples)} examples"
        if self.skipped:
            text += f", skipped {self.skipped} bad {self.unit} (first: {self.skipped_samples[0]})"
        return text


def finish(path: str | Path, examples: list[E], labels: list[str] | None, bad: BadRows,
           *, saw_rows: bool, result_type: type = ReadResult, **extra: object) -> ReadResult[E]:
    """Build the result; an empty file or a file whose every row was bad is an error, not an empty dataset."""
    path = Path(path)
    bad.raise_if_failing(every=not examples)
    if not examples:
        if not saw_rows:
            raise DataError(path, None, None, "at least one data row", "an empty file")
        if not bad.count:
            raise DataError(path, None, None, "at least one data row", "none (only headers or markers)")
        raise DataError(path, None, None, "at least one usable data row",
                        f"all {bad.count} {bad.unit} were bad (first: {bad.samples[0] if bad.samples else '?'})")
    if bad.count:
        logger.warning("%s: skipped %d bad %s; first: %s", path, bad.count, bad.unit, bad.samples[0])
    return result_type(path=path, examples=examples, labels=labels, skipped=bad.count,
                       skipped_samples=list(bad.samples), unit=bad.unit, **extra)

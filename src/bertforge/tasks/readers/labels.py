"""One rule for label spellings and column names, shared by every reader (train, eval, predict, evaluate).

- Surrounding whitespace is never part of a label: `"pos "` is `"pos"` (a trailing space in a spreadsheet
  export would otherwise be a class of its own, and no prediction would ever match it).
- Labels of one file that differ only by case (`"pos"` and `"Pos"`) are refused, naming both spellings and
  their lines. Merging them would pick one spelling behind the user's back; keeping both makes two classes
  that split one class's examples. Which one is right is the user's call, and a one-line fix.
- A header that names one column twice is refused: a row read by column name would silently take one of the
  two.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from bertforge.tasks.readers.errors import DataError, show


def clean_label(value: str) -> str:
    """A label as it is compared and stored: without surrounding whitespace."""
    return value.strip()


def check_header(path: str | Path, line: int, names: Sequence[str], unit: str = "column") -> None:
    """Refuse a header (or JSON object) that names one column twice; unnamed columns are not compared."""
    first: dict[str, int] = {}
    for number, name in enumerate(names, start=1):
        if not name:
            continue
        if name in first:
            raise DataError(path, line, name, f"each {unit} name once",
                            f"{name!r} as {unit}s {first[name]} and {number} (rename one of them)")
        first[name] = number


def refuse_case_variants(path: str | Path, field: str, labels: Iterable[tuple[str, int]],
                         what: str = "label") -> None:
    """Refuse labels that differ only by case; `labels` are (label, line) pairs in file order."""
    spellings: dict[str, tuple[str, int]] = {}
    for label, line in labels:
        seen = spellings.setdefault(label.casefold(), (label, line))
        if seen[0] != label:
            raise DataError(path, line, field, f"one spelling per {what}",
                            f"{label!r} here and {seen[0]!r} on line {seen[1]}: {what}s that differ only by case "
                            "would be two classes; write them alike")


def unknown_label(path: str | Path, line: int, field: str, value: str, known: Sequence[str],
                  source: str | None, what: str = "label") -> DataError:
    """The error for a label outside the train file's set; names the known spelling of a case variant."""
    origin = f" (the {what}s of {source})" if source else ""
    twin = next((k for k in known if k.casefold() == value.casefold()), None)
    got = show(value) + (f", which differs only by case from {twin!r}" if twin is not None else "")
    return DataError(path, line, field, f"one of {list(known)}{origin}", got)

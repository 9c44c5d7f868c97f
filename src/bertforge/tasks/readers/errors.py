"""The one exception every reader raises for bad input data."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


class DataError(ValueError):
    """A data file does not have the shape its format promises.

    The message always names the file, the place (line number, or a JSON path such as
    ``data[3].paragraphs[0].qas[2]`` for formats without meaningful lines), the field and
    what was expected, so a broken row in a 400k-line file can be found without a debugger.
    Subclassing ValueError lets callers that only know "bad value" still catch it.
    """

    def __init__(
        self,
        path: str | Path,
        line: int | None,
        field: str | None,
        expected: str,
        got: str | None = None,
        *,
        where: str | None = None,
    ) -> None:
        self.path = str(path)
        self.line = line
        self.field = field
        self.expected = expected
        self.got = got
        self.where = where
        place = [self.path]
        if line is not None:
            place.append(f"{_unit(self.path)} {line}" + (f" ({where})" if where else ""))
        elif where:
            place.append(f"at {where}")
        if field is not None:
            place.append(f"field {field!r}")
        self.place = ", ".join(place[1:2])  # "line 7" or "at data[0]...": where, without the file
        msg = ", ".join(place) + f": expected {expected}"
        if got is not None:
            msg += f", got {got}"
        super().__init__(msg)


def _unit(path: str) -> str:
    """Columnar files (Parquet, Arrow, a `datasets` folder) have rows, not lines."""
    name = Path(path).name.lower()
    return "row" if name.endswith((".parquet", ".arrow", ".feather")) or Path(path).is_dir() else "line"


def show(value: object, limit: int = 60) -> str:
    """repr() cut to a readable length, for the `got` part of a DataError."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class BadRowsError(DataError):
    """A file has bad rows and skipping was not asked for: the first one in full, where the next few
    are, and how many there are in all.

    Keeps the first row's path/line/field so callers can point at it; the message suggests
    `--skip-bad-rows` because that is how a user proceeds with the rest of the file.
    """

    def __init__(self, first: DataError, count: int, unit: str = "rows",
                 others: Sequence[DataError] = (), *, every: bool = False) -> None:
        super().__init__(first.path, first.line, first.field, first.expected, first.got, where=first.where)
        self.first = first
        self.count = count
        self.unit = unit
        self.every = every
        self.places = ""
        if count > 1:
            places = ["this one"] + [e.place for e in others]
            rest = count - len(places)
            self.places = (f"{count} bad {unit} in this file: {', '.join(places)}"
                           + (f" and {rest} more" if rest > 0 else ""))
        if every:  # skipping would leave nothing: the file, the task or the column flags are what is wrong
            hint = f"no good {unit} in this file ({count} bad): is it the right file for this task, with these columns?"
        else:
            hint = (self.places + "; " if self.places else "") + "--skip-bad-rows skips and counts them"
        self.args = (f"{first} [{hint}]",)

    def without_hint(self) -> str:
        """The message for a reader that cannot skip rows (`predict` answers every input, in order)."""
        return f"{self.first}" + (f" [{self.places}]" if self.places else "")

    def __str__(self) -> str:
        return str(self.args[0])

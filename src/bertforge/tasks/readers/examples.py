"""The example type shared by all sentence(-pair) classification and regression readers."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TextExample:
    """One sentence or sentence pair.

    `label` is the label *name* (str) for classification, a float for regression, and None
    for unlabeled (test) files; `line` is the 1-based source line, so any example can be
    traced back to the file.
    """

    guid: str
    text: str
    text_pair: str | None
    label: str | float | None
    line: int

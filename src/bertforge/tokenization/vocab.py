"""Reading and writing BERT's ``vocab.txt`` (one token per line, id = line number)."""

from __future__ import annotations

import os
from pathlib import Path

from ..folder_files import VOCAB_MAX_BYTES, read_folder_text

__all__ = ["read_vocab_lines", "load_vocab", "save_vocab"]


def read_vocab_lines(path: str | os.PathLike[str]) -> list[str]:
    """The tokens of a ``vocab.txt`` in line order, read the way the original BERT reads it.

    Lines end at ``"\\n"``, ``"\\r\\n"`` or ``"\\r"`` (Python's universal newlines), only
    that ending is removed (a token may contain other whitespace), and if a
    token appears twice the later line wins: ids match the original tokenizer on
    any file it accepts. The file is read as a file of its folder (:mod:`bertforge.folder_files`).
    """
    p = Path(path)
    text = read_folder_text(p.parent, p.name, VOCAB_MAX_BYTES)
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline ends the last line, it does not start a new token
    if not lines:
        raise ValueError(f"vocabulary file {p} is empty")
    return lines


def load_vocab(path: str | os.PathLike[str]) -> dict[str, int]:
    """Token -> id of a ``vocab.txt`` (see :func:`read_vocab_lines`)."""
    return {token: i for i, token in enumerate(read_vocab_lines(path))}


def save_vocab(tokens_in_id_order: list[str], path: str | os.PathLike[str]) -> Path:
    """Write ``vocab.txt``; refuses tokens that would break the one-token-per-line format."""
    bad = [t for t in tokens_in_id_order if "\n" in t or "\r" in t]
    if bad:
        raise ValueError(f"cannot write tokens containing a line break to {path}: {bad[:5]!r}")
    p = Path(path)
    with open(p, "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(t + "\n" for t in tokens_in_id_order))
    return p

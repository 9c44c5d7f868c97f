"""Reading UTF-8 text corpora that may be compressed.

Corpora and benchmark files come as plain text or as ``.gz`` / ``.xz`` / ``.bz2``
archives. Every stage (vocabulary training, pre-training data, fine-tuning readers)
opens them through this module so that the suffix decides the codec in one place
and a missing or unreadable file fails early with its name in the message.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, TextIO

__all__ = ["open_text", "open_binary", "iter_lines", "total_bytes", "COMPRESSED_SUFFIXES"]

PathLike = str | os.PathLike[str]

_OPENERS: dict[str, Callable[[BinaryIO], BinaryIO]] = {
    ".gz": lambda raw: gzip.GzipFile(fileobj=raw, mode="rb"),
    ".xz": lambda raw: lzma.LZMAFile(raw, mode="rb"),
    ".bz2": lambda raw: bz2.BZ2File(raw, mode="rb"),
}
COMPRESSED_SUFFIXES = tuple(_OPENERS)

# How many lines pass between two progress reports: reporting every line would cost
# more than reading it, while 4096 lines are still well under a second of reading.
_REPORT_EVERY = 4096


def _check_file(path: Path) -> None:
    if not path.exists():
        raise FileNotFoundError(f"text file not found: {path}")
    if not path.is_file():
        raise ValueError(f"expected a text file but {path} is a directory or special file")


def _open_layers(path: PathLike, errors: str) -> tuple[BinaryIO, TextIO]:
    """Open ``path`` and return (the on-disk binary file, the decoded text stream).

    The decompressors do not own ``raw``: the caller closes both.
    """
    p = Path(path)
    _check_file(p)
    raw: BinaryIO = open(p, "rb")  # noqa: SIM115 - closed by the caller
    try:
        opener = _OPENERS.get(p.suffix.lower())
        binary = opener(raw) if opener is not None else raw
        # newline="\n": split lines on "\n" only and translate nothing, so a stray
        # "\r" inside a line stays part of that line.
        text = io.TextIOWrapper(binary, encoding="utf-8", errors=errors, newline="\n")
    except Exception:
        raw.close()
        raise
    return raw, text


class _ReadErrors:
    """A decompressed stream whose read errors name the file, as `iter_lines`' do."""

    def __init__(self, stream: BinaryIO, path: PathLike) -> None:
        self._stream, self._path = stream, path

    def read(self, size: int = -1) -> bytes:
        try:
            return self._stream.read(size)
        except (OSError, EOFError, lzma.LZMAError) as exc:
            raise ValueError(f"could not read {self._path}: {exc}") from exc


@contextmanager
def open_binary(path: PathLike) -> Iterator[tuple[BinaryIO, BinaryIO]]:
    """(the on-disk file, its decompressed bytes) of ``path``, decompressing by suffix as `open_text` does:
    for readers that split bytes themselves. ``raw.tell()`` gives the on-disk bytes consumed."""
    p = Path(path)
    _check_file(p)
    with open(p, "rb") as raw:
        opener = _OPENERS.get(p.suffix.lower())
        binary = opener(raw) if opener is not None else raw
        try:
            yield raw, _ReadErrors(binary, p)  # type: ignore[misc]
        finally:
            if binary is not raw:
                binary.close()


def open_text(path: PathLike, errors: str = "strict") -> TextIO:
    """Open a UTF-8 text file for reading, decompressing ``.gz``/``.xz``/``.bz2`` by suffix.

    ``errors`` is passed to the UTF-8 decoder ("strict" raises on bad bytes,
    "replace" maps them to U+FFFD). Lines keep their terminators, as with
    ``open``. Raises FileNotFoundError naming the file if it does not exist and
    ValueError if the path is not a regular file. Closing the returned stream
    closes the file.
    """
    p = Path(path)
    _check_file(p)
    suffix = p.suffix.lower()
    if suffix == ".gz":
        return gzip.open(p, "rt", encoding="utf-8", errors=errors, newline="\n")
    if suffix == ".xz":
        return lzma.open(p, "rt", encoding="utf-8", errors=errors, newline="\n")
    if suffix == ".bz2":
        return bz2.open(p, "rt", encoding="utf-8", errors=errors, newline="\n")
    return open(p, encoding="utf-8", errors=errors, newline="\n")


def total_bytes(paths: PathLike | Iterable[PathLike]) -> int:
    """Total on-disk size of ``paths`` in bytes (compressed size for archives).

    This is the unit :func:`iter_lines` reports progress in, so a progress bar with
    this total reaches 100% exactly when the last file has been read.
    """
    total = 0
    for p in _as_path_list(paths):
        path = Path(p)
        _check_file(path)
        total += path.stat().st_size
    return total


def iter_lines(
    paths: PathLike | Iterable[PathLike],
    errors: str = "strict",
    progress: Callable[[int], object] | None = None,
) -> Iterator[str]:
    """Yield the lines of one or more text files in order, without line terminators.

    Blank lines are yielded as ``""`` because corpora use them as document
    separators. ``progress``, if given, is called now and then with the number of
    on-disk bytes consumed since its previous call (e.g. ``tqdm.update``); the
    calls add up to :func:`total_bytes` of the same paths. All files are checked
    before the first line is produced, so a typo in the last path fails at once.
    """
    path_list = _as_path_list(paths)
    for p in path_list:
        _check_file(Path(p))
    for p in path_list:
        raw, text = _open_layers(p, errors)
        reported = 0
        with raw, text:
            try:
                for n, line in enumerate(text, 1):
                    if line.endswith("\n"):
                        line = line[:-2] if line.endswith("\r\n") else line[:-1]
                    yield line
                    if progress is not None and n % _REPORT_EVERY == 0:
                        pos = raw.tell()
                        progress(pos - reported)
                        reported = pos
            except UnicodeDecodeError as exc:
                raise ValueError(f"{p} is not valid UTF-8 ({exc.reason} at byte {exc.start} of a chunk)") from exc
            except (OSError, EOFError, lzma.LZMAError) as exc:
                raise ValueError(f"could not read {p}: {exc}") from exc
            if progress is not None:
                progress(Path(p).stat().st_size - reported)


def _as_path_list(paths: PathLike | Iterable[PathLike]) -> list[PathLike]:
    if isinstance(paths, (str, os.PathLike)):
        return [paths]
    if isinstance(paths, bytes):
        raise TypeError("paths must be str or os.PathLike, not bytes")
    return list(paths)

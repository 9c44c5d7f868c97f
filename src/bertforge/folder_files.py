"""Reading the files of a model or tokenizer folder, which may come from anyone.

A folder is untrusted input: a file in it may be a link to a file elsewhere (which a loader would then read,
and `export` copy), a FIFO that blocks the reader forever, a link to a device such as /dev/zero that never
ends, or simply far too large (a 200 MB vocab.txt exhausts memory inside the Rust tokenizer). One rule for
every loader:

    a file of a folder is read only if it is a regular file that lies inside the folder (symlinks resolved),
    and only up to a size bound for its kind.

The checks run on `os.stat` before anything is opened (opening a FIFO for reading blocks until a writer comes),
and again on the opened file, which is read no further than its bound. Each refusal is a
:class:`FolderFileError` (a ValueError) whose message is one line naming the file and what was expected; a
missing file is a FileNotFoundError that names it.

The one exception to "inside the folder" is the Hugging Face hub cache, whose snapshot folders hold links to
the repository's shared ``blobs`` folder (``models--org--name/snapshots/<revision>/vocab.txt ->
../../blobs/<hash>``).
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any, BinaryIO

__all__ = [
    "FolderFileError",
    "SETTINGS_MAX_BYTES",
    "SPIECE_MODEL_MAX_BYTES",
    "TOKENIZER_JSON_MAX_BYTES",
    "VOCAB_MAX_BYTES",
    "WEIGHTS_MAX_BYTES",
    "check_folder_dir",
    "check_folder_file",
    "copy_folder_file",
    "folder_has",
    "open_folder_file",
    "read_folder_bytes",
    "read_folder_json",
    "read_folder_text",
]

MiB = 1 << 20
# vocab.txt, vocab.json, merges.txt: a 250k-token vocabulary is a few MB; 32 MB still loads (in minutes, ~4 GB).
VOCAB_MAX_BYTES = 32 * MiB
# spiece.model: multilingual SentencePiece models of 250k pieces are ~5 MB.
SPIECE_MODEL_MAX_BYTES = 32 * MiB
# tokenizer.json holds the vocabulary, merges and added tokens as JSON: the largest public ones are tens of MB.
TOKENIZER_JSON_MAX_BYTES = 128 * MiB
# tokenizer_config.json, special_tokens_map.json, config.json: a few kB, about 1 MB with many added tokens.
SETTINGS_MAX_BYTES = 16 * MiB
# model.safetensors (or one shard): a 10B-parameter encoder in fp32 is 40 GB. The file is memory-mapped and its
# tensors' shapes are checked against config.json before anything is allocated; this only refuses the absurd.
WEIGHTS_MAX_BYTES = 256 * 1024 * MiB

_HF_CACHE_SNAPSHOTS, _HF_CACHE_BLOBS = "snapshots", "blobs"
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO swapped in after the check still cannot block the open


class FolderFileError(ValueError):
    """A file of a model or tokenizer folder that bertforge refuses to read; the message names it and says why."""


def folder_has(folder: str | os.PathLike[str], name: str) -> bool:
    """Whether the folder has an entry called `name`, whatever it is (a FIFO or a broken link counts: a loader
    that finds one reads it, and the read says what is wrong with it instead of "no such file")."""
    return os.path.lexists(Path(folder) / name)


def check_folder_file(folder: str | os.PathLike[str], name: str, max_bytes: int) -> Path:
    """The real path of `folder/name` once it passes the rule (a regular file inside the folder, at most
    `max_bytes`); raises FolderFileError (or FileNotFoundError) otherwise. Nothing is opened."""
    path = Path(folder) / name
    target = Path(os.path.realpath(path))
    try:
        info = os.stat(target)
    except OSError as exc:
        raise _stat_error(path, target, exc) from None
    _check_kind_and_size(path, target, info, max_bytes)
    if not _inside(target, folder):
        raise FolderFileError(f"{path} is a link to {target}, outside the folder {Path(os.path.realpath(folder))}; "
                              "expected a file inside the folder")
    return target


def check_folder_dir(folder: str | os.PathLike[str], name: str) -> Path:
    """The real path of the subfolder `folder/name` once it is a folder inside `folder` (not a link out)."""
    path = Path(folder) / name
    target = Path(os.path.realpath(path))
    if not target.is_relative_to(Path(os.path.realpath(folder))):
        raise FolderFileError(f"{path} is a link to {target}, outside the folder {Path(os.path.realpath(folder))}; "
                              "expected a folder inside it")
    if not target.is_dir():
        raise FolderFileError(f"{path} is not a folder")
    return target


def open_folder_file(folder: str | os.PathLike[str], name: str, max_bytes: int) -> BinaryIO:
    """`folder/name` opened for reading in binary, after :func:`check_folder_file`; the caller reads at most
    `max_bytes` (or uses :func:`read_folder_bytes`, which does)."""
    path = Path(folder) / name
    target = check_folder_file(folder, name, max_bytes)
    try:
        fd = os.open(target, os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise _stat_error(path, target, exc) from None
    try:
        _check_kind_and_size(path, target, os.fstat(fd), max_bytes)  # the file may have changed since the check
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def read_folder_bytes(folder: str | os.PathLike[str], name: str, max_bytes: int) -> bytes:
    """The content of `folder/name` (see :func:`check_folder_file`), never more than `max_bytes`."""
    with open_folder_file(folder, name, max_bytes) as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:  # it grew after the check
        raise _too_large(Path(folder) / name, len(data), max_bytes)
    return data


def read_folder_text(folder: str | os.PathLike[str], name: str, max_bytes: int) -> str:
    """The UTF-8 text of `folder/name` (see :func:`check_folder_file`); line endings are left as they are.
    Text that is not UTF-8 is refused naming the line."""
    data = read_folder_bytes(folder, name, max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise FolderFileError(f"{Path(folder) / name}: not valid UTF-8 at line {line} "
                              f"(byte 0x{data[exc.start:exc.start + 1].hex()}: {exc.reason})") from None


def copy_folder_file(folder: str | os.PathLike[str], name: str, target: str | os.PathLike[str],
                     max_bytes: int) -> None:
    """Copy `folder/name` (see :func:`check_folder_file`) to the file `target`, never more than `max_bytes`:
    what is copied is what a loader would read, never a file outside the folder."""
    with open_folder_file(folder, name, max_bytes) as source, open(target, "wb") as out:
        copied = 0
        while block := source.read(min(MiB, max_bytes + 1 - copied)):
            copied += len(block)
            if copied > max_bytes:  # it grew after the check
                raise _too_large(Path(folder) / name, copied, max_bytes)
            out.write(block)


def read_folder_json(folder: str | os.PathLike[str], name: str, max_bytes: int = SETTINGS_MAX_BYTES) -> Any:
    """The parsed JSON of `folder/name` (see :func:`check_folder_file`); bad JSON is refused naming the line."""
    text = read_folder_text(folder, name, max_bytes)
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise FolderFileError(f"{Path(folder) / name}: not valid JSON (line {err.lineno}, column {err.colno}: "
                              f"{err.msg})") from None
    except RecursionError:
        raise FolderFileError(f"{Path(folder) / name}: JSON nested too deeply") from None


# ---- the checks ------------------------------------------------------------------------------------------------
def _check_kind_and_size(path: Path, target: Path, info: os.stat_result, max_bytes: int) -> None:
    if not stat.S_ISREG(info.st_mode):
        via = f" (a link to {target})" if os.path.islink(path) else ""
        raise FolderFileError(f"{path} is {_kind(info.st_mode)}{via}; expected a regular file")
    if info.st_size > max_bytes:
        raise _too_large(path, info.st_size, max_bytes)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def _too_large(path: Path, size: int, max_bytes: int) -> FolderFileError:
    return FolderFileError(f"{path} has {_size(size)}; expected at most {_size(max_bytes)} for this file "
                           "(is it the right file?)")


def _size(n: int) -> str:
    return f"{n:,} bytes" if n < MiB else f"{n / MiB:,.1f} MB"


def _stat_error(path: Path, target: Path, exc: OSError) -> Exception:
    if exc.errno == errno.ELOOP:
        return FolderFileError(f"{path} is a symbolic link that loops; expected a regular file")
    if isinstance(exc, FileNotFoundError):
        if os.path.islink(path):
            return FolderFileError(f"{path} is a link to {target}, which does not exist; expected a regular file")
        return FileNotFoundError(f"{path}: no such file")
    return exc


def _inside(target: Path, folder: str | os.PathLike[str]) -> bool:
    root = Path(os.path.realpath(folder))
    if target.is_relative_to(root):
        return True
    # a snapshot of the Hugging Face hub cache links to the repository's blobs
    unresolved = Path(os.path.abspath(folder))
    for snapshot in (root, unresolved):
        if snapshot.parent.name == _HF_CACHE_SNAPSHOTS:
            blobs = Path(os.path.realpath(snapshot.parent.parent / _HF_CACHE_BLOBS))
            if target.parent == blobs:
                return True
    return False

"""Turn any exception a verb raises into the one line `bertforge <verb>: error: ...` prints.

Library errors (ValueError and its kin, RuntimeError) are written for users and are shown as they are; a
`SettingError` names settings, and each is shown as the flag the verb has for it (`verb_flags`). What
the operating system, `json`, the UTF-8 decoder or `tokenizers` raise is reworded so that it names the file and
what went wrong. Anything else is a bug: it is still one line, marked "internal error", with a hint to rerun
with --debug for the traceback.
"""
from __future__ import annotations

import errno
import json
import os
import re
import argparse
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from bertforge.settings import SettingError, flag_of

__all__ = ["Described", "describe", "verb_flags"]

# how ENOSPC reads once a Rust or C++ layer (safetensors, torch.save, tokenizers) has turned it into text
_NO_SPACE = re.compile(r"No space left on device|os error 28|StorageFull|ENOSPC|errno 28", re.IGNORECASE)
_READ_ONLY = re.compile(r"Read-only file system|os error 30|EROFS", re.IGNORECASE)
# a temporary file of bertforge.atomic: ".<name>.<random>.tmp" stands for <name>
_ATOMIC_TMP = re.compile(r"^\.(.+)\.[^.]+\.tmp$")
_USER_FILE_SUFFIXES = (".json", ".jsonl", ".txt", ".tsv", ".csv", ".conll", ".model", ".gz", ".xz", ".bz2")


@dataclass(frozen=True)
class Described:
    message: str
    internal: bool = False  # a bug in bertforge, not something the user did


def describe(exc: BaseException, output: str | None = None, flags: Mapping[str, str] | None = None) -> Described:
    """The one-line message for `exc`. `output` (the verb's --output, if any) names where a failed write went;
    `flags` (setting -> the verb's flag, `verb_flags`) names the settings a `SettingError` is about."""
    if isinstance(exc, SettingError):
        flags = flags or {}
        return Described(_one_line(exc.render(lambda name: flags.get(name) or flag_of(exc.owner, name))))
    if isinstance(exc, OSError):
        return Described(_one_line(_os_error(exc, output)))
    text = str(exc)
    if _NO_SPACE.search(text):
        return Described(_no_space(_traceback_path(exc, must_exist=False), output))
    if _READ_ONLY.search(text):
        where = _traceback_path(exc, must_exist=False) or output
        return Described(f"cannot write {where}: read-only file system" if where else "read-only file system")
    if isinstance(exc, json.JSONDecodeError):
        where = _traceback_path(exc, must_exist=True)
        return Described(f"{where or 'a JSON input'}: not valid JSON (line {exc.lineno}, column {exc.colno}: "
                         f"{exc.msg})")
    if isinstance(exc, UnicodeDecodeError):
        return Described(_unicode(exc))
    if isinstance(exc, MemoryError):
        return Described("out of memory; use a smaller --batch-size, model or input")
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        package = exc.name.split(".")[0]
        return Described(f"this needs the Python package '{package}', which is not installed "
                         f"(pip install {package})")
    if type(exc).__name__ == "OutOfMemoryError":  # torch.OutOfMemoryError, a RuntimeError
        return Described(_one_line(f"out of memory on the device; use a smaller --batch-size or model ({text})"))
    if type(exc) is Exception:  # what Rust extensions (tokenizers) raise: a message about the input
        where = _traceback_path(exc, must_exist=True)
        label = "tokenizer" if _from_tokenizers(exc) else "error"
        return Described(_one_line(f"{where}: {text}" if where else f"{label}: {text}"))
    if isinstance(exc, (KeyError, TypeError)):
        where = _traceback_path(exc, must_exist=True, user_files=True)
        if where is not None:
            what = f"missing field {exc.args[0]!r}" if isinstance(exc, KeyError) and exc.args else text
            return Described(_one_line(f"{where}: {what} (a field is missing or has the wrong type)"))
        return _internal(exc)
    if isinstance(exc, (ValueError, RuntimeError, NotImplementedError)) and text:
        return Described(_one_line(text))
    return _internal(exc)


def verb_flags(parser: argparse.ArgumentParser, argv: list[str]) -> dict[str, str]:
    """setting -> flag for the verb (and sub-command) `argv` runs: the flag each parsed setting comes from. The
    training verbs' flags are generated from their settings' field metadata, so a setting and its flag agree."""
    path, words = [parser], [a for a in argv if not a.startswith("-")]
    while True:
        subcommands = next((a for a in path[-1]._actions if isinstance(a, argparse._SubParsersAction)), None)
        chosen = next((w for w in words if subcommands is not None and w in subcommands.choices), None)
        if chosen is None:
            break
        path.append(subcommands.choices[chosen])
        words = words[words.index(chosen) + 1:]
    flags: dict[str, str] = {}
    for each in reversed(path):  # the innermost parser's flag wins
        for action in each._actions:
            if action.option_strings and action.dest != argparse.SUPPRESS:
                long = [s for s in action.option_strings if s.startswith("--")] or action.option_strings
                flags.setdefault(action.dest, long[0])
    return flags


def _internal(exc: BaseException) -> Described:
    detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return Described(_one_line(f"internal error ({detail}); this is a bug in bertforge, rerun with --debug for the "
                               "traceback and report it"), internal=True)


def _one_line(text: str, limit: int = 600) -> str:
    """Collapse a multi-line message (torch's, for instance) and cap it: the boundary prints exactly one line."""
    text = " ".join(part.strip() for part in str(text).splitlines() if part.strip())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _os_error(exc: OSError, output: str | None) -> str:
    name = exc.filename
    if name is None and exc.errno is None:
        return str(exc)  # raised by bertforge with its own message
    path = _display(name) if name is not None else None
    code = exc.errno
    if code == errno.ENOSPC or _NO_SPACE.search(str(exc)):
        return _no_space(path or _traceback_path(exc, must_exist=False), output)
    if code == errno.EROFS:
        return f"cannot write {path or output or 'the output'}: read-only file system"
    if isinstance(exc, PermissionError):
        if path is None:
            return f"permission denied: {exc.strerror or exc}"
        p = Path(str(name))
        reading = p.exists() and not os.access(p, os.R_OK)
        return f"cannot {'read' if reading else 'write'} {path}: permission denied"
    if isinstance(exc, IsADirectoryError):
        return f"{path} is a folder; expected a file"
    if isinstance(exc, NotADirectoryError):
        return f"{path}: a part of this path is a file; expected a folder"
    if isinstance(exc, FileNotFoundError):
        if path is None:
            return str(exc)
        return f"{path}: no such file or folder"
    if isinstance(exc, FileExistsError):
        return f"{path} already exists"
    reason = exc.strerror or str(exc)
    return f"{path}: {reason}" if path else reason


def _no_space(path: str | None, output: str | None) -> str:
    if path:
        return f"no space left on device while writing {path}"
    return f"no space left on device while writing into {output}" if output else "no space left on device"


def _display(name: object) -> str:
    """A path as the user knows it: a temporary file of an atomic write is shown as the file it replaces."""
    p = Path(os.fsdecode(name)) if isinstance(name, (str, bytes, os.PathLike)) else Path(str(name))
    match = _ATOMIC_TMP.match(p.name)
    return str(p.with_name(match.group(1))) if match else str(p)


def _unicode(exc: UnicodeDecodeError) -> str:
    where = _traceback_path(exc, must_exist=True)
    byte = exc.object[exc.start: exc.start + 1].hex() if isinstance(exc.object, bytes) else "?"
    if where is None:
        return f"input is not valid UTF-8 (byte 0x{byte}: {exc.reason})"
    line = _first_bad_line(Path(where))
    at = f" at line {line}" if line else ""
    return f"{where}: not valid UTF-8{at} (byte 0x{byte}: {exc.reason})"


def _first_bad_line(path: Path, limit: int = 1 << 30) -> int | None:
    """The 1-based number of the first line of an uncompressed file that is not UTF-8 (None if unknown)."""
    try:
        if path.suffix.lower() in (".gz", ".xz", ".bz2") or path.stat().st_size > limit:
            return None
        with open(path, "rb") as handle:
            for number, raw in enumerate(handle, 1):
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError:
                    return number
    except OSError:
        return None
    return None


def _from_tokenizers(exc: BaseException) -> bool:
    """`tokenizers` (Rust) raises a bare `Exception`; tell it apart by where it was raised."""
    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and "tokeniz" in frames[-1].filename


def _traceback_path(exc: BaseException, *, must_exist: bool, user_files: bool = False) -> str | None:
    """The file the failing code was working on: the innermost frame's local that is a path.

    Exceptions from `json`, the UTF-8 decoder or a Rust writer do not say which file they were reading or
    writing; the code that called them does, in its local variables.
    """
    frames = [frame for frame, _ in traceback.walk_tb(exc.__traceback__)]
    for frame in reversed(frames):
        candidates = sorted(frame.f_locals.items(), key=lambda item: item[0] not in ("path", "file", "filename"))
        for _, value in candidates:
            if isinstance(value, Path):
                text = str(value)
            elif isinstance(value, str) and 0 < len(value) < 4096 and "\n" not in value and (
                    os.sep in value or value.lower().endswith(_USER_FILE_SUFFIXES)):
                text = value
            else:
                continue
            p = Path(text)
            try:
                if must_exist and not p.is_file():
                    continue  # (a file being written may be gone already: a failed verb cleans up)
            except (OSError, ValueError):
                continue
            if user_files and not p.name.lower().endswith(_USER_FILE_SUFFIXES):
                continue
            if not must_exist and p.is_dir():
                continue
            return _display(text)
    return None

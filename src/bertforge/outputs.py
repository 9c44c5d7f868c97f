"""Output folders: claim one safely before a verb writes into it.

A mistyped `--output` must not mix a new run's files into an unrelated folder (or a previous run of another
verb), and a read-only or impossible path should fail before hours of work, not at the first checkpoint.
`claim_output` decides once, at the start of a verb: a new or empty folder is used, this verb's own resumable
run is continued, anything else is refused unless `--overwrite` asks to empty it.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["RUN_CONFIG", "OutputError", "claim_output", "fresh_output", "read_run_config", "write_run_config"]

RUN_CONFIG = "run_config.json"


class OutputError(ValueError):
    """An --output folder that cannot or may not be used; the message is one line for the user."""


def read_run_config(path: str | Path) -> dict[str, Any] | None:
    """The run_config.json of a folder, or None when it is missing or unreadable (then it is not a run)."""
    try:
        data = json.loads((Path(path) / RUN_CONFIG).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _is_own_run(path: Path, verb: str) -> bool:
    config = read_run_config(path)
    return config is not None and config.get("verb") == verb


def _protected(path: Path) -> str | None:
    """Why emptying `path` would be a disaster, or None. --overwrite must never wipe a home or a working tree."""
    resolved = path.resolve()
    if resolved == Path(resolved.anchor):
        return "it is the file-system root"
    if resolved == Path.home().resolve():
        return "it is your home folder"
    cwd = Path.cwd().resolve()
    if cwd == resolved or resolved in cwd.parents:
        return "it holds the current working folder"
    return None


def _empty(path: Path) -> None:
    for child in path.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def _check_writable(path: Path) -> None:
    """Create and remove a probe file: catches permissions and read-only mounts alike (os.access misses ACLs)."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".bertforge-probe.", dir=path)
    except PermissionError:
        raise OutputError(f"cannot write {path}: permission denied") from None
    except OSError as err:
        reason = "read-only file system" if err.errno == errno.EROFS else (err.strerror or str(err))
        raise OutputError(f"cannot write {path}: {reason}") from None
    os.close(fd)
    os.unlink(probe)


def claim_output(path: str | Path, *, verb: str, overwrite: bool, resumable: bool = False) -> Path:
    """Make `path` ready for `verb` to write into and return it.

    - missing: created (with parents);
    - an empty folder: used;
    - a non-empty folder: used only when `resumable` and it is this verb's own run (its run_config.json has
      "verb": `verb`); emptied first when `overwrite`; refused otherwise;
    - a file, a folder that cannot be created or written: refused.
    Raises OutputError (a ValueError) with a one-line message naming the folder.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputError(f"output {path} is a file; expected a folder (choose another --output)")
    if path.is_dir():
        nonempty = any(path.iterdir())
        if nonempty and overwrite:
            reason = _protected(path)
            if reason:
                raise OutputError(f"refusing to empty output folder {path} with --overwrite: {reason}")
            _check_writable(path)
            try:
                _empty(path)
            except PermissionError as err:
                raise OutputError(f"cannot empty {path} for --overwrite: permission denied on "
                                  f"{err.filename or path}") from None
        elif nonempty and not (resumable and _is_own_run(path, verb)):
            raise OutputError(f"output folder {path} is not empty and is not a {verb} run that can be continued; "
                              "use --overwrite, or choose another --output")
    created = not path.exists()
    if created:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except PermissionError:
            raise OutputError(f"cannot create output folder {path}: permission denied") from None
        except (FileExistsError, NotADirectoryError):
            raise OutputError(f"cannot create output folder {path}: a part of that path is a file") from None
        except OSError as err:
            raise OutputError(f"cannot create output folder {path}: {err.strerror or err}") from None
    try:
        _check_writable(path)
    except OutputError:
        if created:
            path.rmdir()  # leave nothing behind for a run that never started
        raise
    return path


@contextmanager
def fresh_output(path: str | Path, *, verb: str, overwrite: bool) -> Iterator[Path]:
    """`claim_output` for a verb that cannot resume: if the verb fails, what it wrote is removed again.

    The folder was new or empty when claimed, so removing its contents on failure takes nothing of the user's
    and leaves no half-written output behind (a folder this call created is removed as well).
    """
    path = Path(path)
    created = not path.exists()
    out = claim_output(path, verb=verb, overwrite=overwrite, resumable=False)
    try:
        yield out
    except BaseException:
        if out.is_dir():
            try:
                _empty(out)
                if created:
                    out.rmdir()
            except OSError:
                pass  # the original error matters more than the clean-up
        raise


def write_run_config(path: str | Path, verb: str, settings: dict[str, Any]) -> Path:
    """Write `path`/run_config.json atomically: `settings` plus "verb", which marks the folder as this verb's run.

    Paths and other non-JSON values are stored as strings.
    """
    from bertforge.atomic import atomic_write_text
    target = Path(path) / RUN_CONFIG
    data = {"verb": verb, **{k: v for k, v in settings.items() if k != "verb"}}
    atomic_write_text(target, json.dumps(data, indent=2, default=str) + "\n")
    return target


def claim_output_file(path: str | Path, *, overwrite: bool, inputs: tuple[str | Path | None, ...] = ()) -> Path:
    """Check, before any work, that a verb may write the file `path`: not a folder, not one of its own
    `inputs`, and not an existing file unless `overwrite` (so a finished result is never replaced silently)."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"output {path} is a folder; expected a file name")
    for source in inputs:
        if source is not None and Path(source).exists() and path.exists() and path.samefile(source):
            raise OutputError(f"output {path} is also the input; choose another --output")
    if path.exists() and not overwrite:
        raise OutputError(f"output file {path} exists; use --overwrite to replace it, or choose another --output")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise OutputError(f"cannot write {path}: the folder {parent} does not exist")
    _check_writable(parent)
    return path

"""Output folders: claim one safely before a verb writes into it.

A mistyped `--output` must not mix a new run's files into an unrelated folder (or a previous run of another
verb), must never replace finished work, and a read-only or impossible path should fail before hours of work,
not at the first checkpoint. `claim_output` decides once, at the start of a verb:
- a new or empty folder is used;
- this verb's own run with the same settings is continued (or, when it finished, left as it is: the verb has
  nothing to do, `RunAlreadyFinished`); the same verb with other settings is refused, naming the differences;
- anything else (another verb's run, a model, a predictor, the user's files) is refused unless `--overwrite`
  asks to empty it — and `--overwrite` never empties a folder that is, holds or lies inside one of the
  verb's inputs.
A run folder records its settings in `run_config.json`; `mark_finished` adds `"status": "finished"` once the
verb has written everything.
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
from typing import Any, Iterable, Mapping

from bertforge.settings import SettingError

from bertforge.settings import flatten

__all__ = ["RUN_CONFIG", "OutputError", "RunAlreadyFinished", "claim_output", "claim_output_file", "fresh_output",
           "is_finished", "mark_finished", "read_run_config", "settings_differences", "write_run_config"]

RUN_CONFIG = "run_config.json"
FINISHED = "finished"
# settings that change where a run is, how it shows progress or keeps checkpoints, never what it computes: a
# re-run may differ in them (or a run folder may have moved) and still be the same run
PRESENTATION = frozenset({"output", "progress", "show_progress", "no_progress", "overwrite", "tensorboard",
                          "log_every", "save_every", "keep_checkpoints", "keep_checkpoints_at_end", "device",
                          "workers", "jobs", "debug", "status", "verb", "dist_timeout"})


class OutputError(SettingError):
    """An output folder or file that cannot or may not be used: one line naming it and the settings that would
    change the outcome (`{output}`, `{overwrite}`: the command line shows its verb's flags). A ValueError."""


class RunAlreadyFinished(Exception):
    """--output holds this very run (same verb, same settings), finished: there is nothing to do. Not an error:
    the CLI says so in one line and exits 0; the training verbs return the finished run's result instead."""

    def __init__(self, path: Path, verb: str) -> None:
        super().__init__(f"{path} already holds this finished {verb} run (same settings); nothing to do "
                         "(use --overwrite to run it again, or choose another --output)")
        self.path, self.verb = path, verb


def read_run_config(path: str | Path) -> dict[str, Any] | None:
    """The run_config.json of a folder, or None when it is missing or unreadable (then it is not a run)."""
    try:
        data = json.loads((Path(path) / RUN_CONFIG).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def is_finished(path: str | Path) -> bool:
    """Whether the folder holds a run that wrote everything it writes (`mark_finished`)."""
    config = read_run_config(path)
    return config is not None and config.get("status") == FINISHED


def mark_finished(path: str | Path) -> None:
    """Record in run_config.json that the run in `path` is complete: a re-run of it has nothing to do."""
    config = read_run_config(path)
    if config is not None and config.get("status") != FINISHED:
        _write_json(Path(path) / RUN_CONFIG, {**config, "status": FINISHED})


def settings_differences(stored: Mapping[str, Any], given: Mapping[str, Any]) -> list[str]:
    """`name: X there, Y now` for each setting that changes what a run computes (not `PRESENTATION`), compared
    after a JSON round trip (tuples become lists, paths strings); nested settings (a run's engine options) by
    their own names. Two paths to the same existing file or folder are the same setting."""
    skip = PRESENTATION
    a, b = flatten(_json_round_trip(stored)), flatten(_json_round_trip(given))
    # settings one side does not record (a field a later version added, a verb's own bookkeeping) are not compared
    return [f"{name}: {a[name]!r} there, {b[name]!r} now" for name in sorted(set(a) & set(b))
            if name not in skip and _differs(a[name], b[name])]


def _json_round_trip(value: Mapping[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(dict(value), default=str))


def _differs(a: Any, b: Any) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) != len(b) or any(_differs(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return float(a) != float(b)
    if isinstance(a, str) and isinstance(b, str) and a != b:
        return not _same_path(a, b)
    return a != b


def _same_path(a: str, b: str) -> bool:
    try:
        return Path(a).exists() and Path(b).exists() and os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def _what_it_holds(path: Path) -> str:
    """A few words on what a non-empty folder holds, for a refusal message."""
    config = read_run_config(path)
    if config is not None and isinstance(config.get("verb"), str):
        return f"holds a {config['verb']} run"
    for name, what in (("task.json", "a fine-tuned predictor"), ("model.onnx", "an ONNX export"),
                       ("config.json", "a model"), ("manifest.json", "prepared pre-training data"),
                       ("vocab.txt", "a tokenizer"), ("tokenizer.json", "a tokenizer"),
                       ("metrics.json", "evaluation results")):
        if (path / name).exists():
            return f"holds {what}"
    return "is not empty"


def _inside(child: Path, parent: Path) -> bool:
    return child == parent or parent in child.parents


def _check_inputs(path: Path, inputs: Iterable[str | Path | None], overwrite: bool) -> None:
    """An output that is one of the verb's inputs, or holds one, would destroy what the verb reads; with
    --overwrite, one that lies inside an input would empty part of it."""
    target = path.resolve()
    for given in inputs:
        if given is None or str(given) in ("", "-"):
            continue
        source = Path(given).resolve()
        if not source.exists():
            continue  # a preset name, or a file the verb will say is missing
        if _inside(source, target):
            what = "is" if source == target else "holds"
            raise OutputError("output folder {path} {what} the input {given}; choose another {output}", path=path,
                              what=what, given=given)
        if overwrite and _inside(target, source) and path.exists() and any(path.iterdir()):
            raise OutputError("refusing to empty output folder {path} with {overwrite}: it lies inside the input "
                              "{given}; choose another {output}", path=path, given=given)


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
        raise OutputError("cannot write {path}: permission denied", path=path) from None
    except OSError as err:
        reason = "read-only file system" if err.errno == errno.EROFS else (err.strerror or str(err))
        raise OutputError("cannot write {path}: {reason}", path=path, reason=reason) from None
    os.close(fd)
    os.unlink(probe)


def claim_output(path: str | Path, *, verb: str, overwrite: bool, resumable: bool = False,
                 settings: Mapping[str, Any] | None = None, inputs: Iterable[str | Path | None] = ()) -> Path:
    """Make `path` ready for `verb` to write into and return it.

    - missing: created (with parents);
    - an empty folder: used;
    - a non-empty folder holding this verb's run (its run_config.json has "verb": `verb`): when `settings` are
      given and differ from the recorded ones (`settings_differences`), refused naming them; when that run
      finished, `RunAlreadyFinished`; else continued when `resumable`, emptied and started again when not;
    - any other non-empty folder: emptied first when `overwrite`, refused otherwise;
    - a folder that is or holds one of `inputs` (or, with `overwrite`, lies inside one), a file, a folder that
      cannot be created or written: refused.
    Raises OutputError (a ValueError) with a one-line message naming the folder.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputError("output {path} is a file; expected a folder (choose another {output})", path=path)
    _check_inputs(path, inputs, overwrite)
    if path.is_dir() and any(path.iterdir()):
        if overwrite:
            _empty_for_overwrite(path)
        else:
            _continue_own_run(path, verb, resumable, settings)
    created = not path.exists()
    if created:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except PermissionError:
            raise OutputError("cannot create output folder {path}: permission denied", path=path) from None
        except (FileExistsError, NotADirectoryError):
            raise OutputError("cannot create output folder {path}: a part of that path is a file", path=path) from None
        except OSError as err:
            raise OutputError("cannot create output folder {path}: {reason}", path=path,
                              reason=err.strerror or err) from None
    try:
        _check_writable(path)
    except OutputError:
        if created:
            path.rmdir()  # leave nothing behind for a run that never started
        raise
    return path


def _empty_for_overwrite(path: Path) -> None:
    reason = _protected(path)
    if reason:
        raise OutputError("refusing to empty output folder {path} with {overwrite}: {reason}", path=path, reason=reason)
    _check_writable(path)
    try:
        _empty(path)
    except PermissionError as err:
        raise OutputError("cannot empty {path} for {overwrite}: permission denied on {file}", path=path,
                          file=err.filename or path) from None


def _continue_own_run(path: Path, verb: str, resumable: bool, settings: Mapping[str, Any] | None) -> None:
    """A non-empty folder without --overwrite: only this verb's own run of the same settings may go on."""
    config = read_run_config(path)
    if config is None or config.get("verb") != verb:
        raise OutputError("output folder {path} {holds}, not a `bertforge {verb}` run of these settings; use "
                          "{overwrite}, or choose another {output}", path=path, holds=_what_it_holds(path), verb=verb)
    if settings is not None:
        changed = settings_differences(config, settings)
        if changed:
            raise OutputError("{path} holds a `bertforge {verb}` run with other settings ({changed}); run it with the "
                              "same settings, start again with {overwrite}, or choose another {output}", path=path,
                              verb=verb, changed="; ".join(changed))
        if config.get("status") == FINISHED:
            raise RunAlreadyFinished(path, verb)
    if not resumable:
        if settings is None:
            raise OutputError("output folder {path} holds a `bertforge {verb}` run that cannot be continued; use "
                              "{overwrite} to replace it, or choose another {output}", path=path, verb=verb)
        _check_writable(path)
        _empty(path)  # this verb's own interrupted run of the same settings: start it again


@contextmanager
def fresh_output(path: str | Path, *, verb: str, overwrite: bool, settings: Mapping[str, Any] | None = None,
                 inputs: Iterable[str | Path | None] = ()) -> Iterator[Path]:
    """`claim_output` for a verb that cannot resume: if the verb fails, what it wrote is removed again; when it
    succeeds and `settings` were given, they are recorded and the folder is marked finished, so the same command
    run again has nothing to do and another one is refused.

    The folder was new or empty when claimed, so removing its contents on failure takes nothing of the user's
    and leaves no half-written output behind (a folder this call created is removed as well).
    """
    path = Path(path)
    created = not path.exists()
    out = claim_output(path, verb=verb, overwrite=overwrite, resumable=False, settings=settings, inputs=inputs)
    try:
        if settings is not None:  # first, so that a killed run is known as this verb's own unfinished one
            write_run_config(out, verb, dict(settings))
        yield out
        if settings is not None:
            mark_finished(out)
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
    target = Path(path) / RUN_CONFIG
    _write_json(target, {"verb": verb, **{k: v for k, v in settings.items() if k not in ("verb", "status")}})
    return target


def _write_json(target: Path, data: dict[str, Any]) -> None:
    from bertforge.atomic import atomic_write_text
    atomic_write_text(target, json.dumps(data, indent=2, default=str) + "\n")


def claim_output_file(path: str | Path, *, overwrite: bool, inputs: tuple[str | Path | None, ...] = ()) -> Path:
    """Check, before any work, that a verb may write the file `path`: not a folder, not one of its own
    `inputs`, and not an existing file unless `overwrite` (so a finished result is never replaced silently)."""
    path = Path(path)
    if path.is_dir():
        raise OutputError("output {path} is a folder; expected a file name", path=path)
    for source in inputs:
        if source is not None and Path(source).exists() and path.exists() and path.samefile(source):
            raise OutputError("output {path} is also the input; choose another {output}", path=path)
    if path.exists() and not overwrite:
        raise OutputError("output file {path} exists; use {overwrite} to replace it, or choose another {output}",
                          path=path)
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise OutputError("cannot write {path}: the folder {parent} does not exist", path=path, parent=parent)
    _check_writable(parent)
    return path

"""What a run's inputs held: a content digest per input file or folder, so that the same command run again on
changed data is a different run, not "nothing to do".

Settings name inputs by path, and a path can hold other data tomorrow. A run records, beside its settings in
run_config.json, a sha256 of each input's bytes (a folder: of its files' relative names and bytes); the same
command run again compares them and refuses an input whose content changed, naming it, unless --overwrite.
Size and mtime would not do: a copy with `cp -p` or `touch -r` keeps both. Reading gigabytes of model on every
resume would not do either, so an input of at least `REHASH_BELOW` bytes whose files all still have the
(size, mtime, ctime, inode) recorded reuses the recorded digest: ctime cannot be set back from user space, so
any write to a file, or a file put in its place, changes its key and the input is read again.
"""
from __future__ import annotations

import glob
import hashlib
from pathlib import Path
from typing import Any, Iterable

from bertforge.outputs import OutputError, read_run_config

INPUT_CONTENT = "input_content"  # the run_config.json key: a list of [input path, "sha256:…", stat key]
REHASH_BELOW = 16 << 20  # inputs smaller than this are read again every time: cheaper than being wrong
# a run folder given as an input (a model to fine-tune) keeps its checkpoints and logs beside the model: they
# change when that run continues, and then its model changes too; hidden files are locks and probes
SKIPPED_FOLDERS = frozenset({"checkpoints", "__pycache__"})
_BLOCK = 1 << 20


def input_files(path: Path, exclude: Path | None = None) -> list[Path]:
    """The files whose bytes make up an input: the file itself, or a folder's files below it (sorted), without
    hidden files, training checkpoints and the files under `exclude` (the run's own output, when it lies inside
    the input folder)."""
    if path.is_file():
        return [path]
    found = []
    for child in sorted(path.rglob("*")):
        parts = child.relative_to(path).parts
        if any(p.startswith(".") or p in SKIPPED_FOLDERS for p in parts) or not child.is_file():
            continue
        if exclude is not None and (child == exclude or exclude in child.parents):
            continue
        found.append(child)
    return found


def _stat_key(files: list[Path], base: Path) -> str:
    digest = hashlib.sha256()
    for file in files:
        st = file.stat()
        name = file.name if file == base else str(file.relative_to(base))
        digest.update(f"{name}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}\0".encode())
    return digest.hexdigest()[:32]


def content_digest(path: Path, files: list[Path]) -> str:
    """sha256 of a file's bytes (what `sha256sum` prints), or over a folder's files: each one's relative name,
    length and bytes."""
    digest = hashlib.sha256()
    for file in files:
        if file != path:  # name and length first: two files' bytes cannot be read as one
            digest.update(f"{file.relative_to(path)}\0{file.stat().st_size}\0".encode())
        with open(file, "rb") as handle:
            while block := handle.read(_BLOCK):
                digest.update(block)
    return "sha256:" + digest.hexdigest()


def expand(inputs: Iterable[str | Path | None]) -> list[Path]:
    """The existing files and folders the inputs name, resolved (a glob pattern: the paths it matches; a preset
    name or a missing path: nothing — the verb itself says what is wrong with it)."""
    out: list[Path] = []
    for given in inputs:
        if given is None or str(given) in ("", "-"):
            continue
        path = Path(given)
        matches = [path] if path.exists() else [Path(m) for m in sorted(glob.glob(str(given)))]
        out.extend(m.resolve() for m in matches if m.exists() and m.resolve() not in out)
    return out


def content_identity(inputs: Iterable[str | Path | None], previous: list[Any] | None = None,
                     exclude: str | Path | None = None) -> list[list[str]]:
    """[path, digest, stat key] per existing input; `previous` (a recorded identity) lends its digest to a large
    input whose stat key is unchanged; `exclude` (the output folder) is no part of any input."""
    skip = Path(exclude).resolve() if exclude is not None else None
    known = {row[0]: row for row in previous or () if isinstance(row, list) and len(row) == 3}
    identity = []
    for path in expand(inputs):
        files = input_files(path, skip)
        key = _stat_key(files, path)
        was = known.get(str(path))
        size = sum(f.stat().st_size for f in files)
        if was is not None and was[2] == key and size >= REHASH_BELOW and isinstance(was[1], str):
            identity.append([str(path), was[1], key])
        else:
            identity.append([str(path), content_digest(path, files), key])
    return identity


def check_input_content(output: str | Path, verb: str, inputs: Iterable[str | Path | None],
                        overwrite: bool) -> list[list[str]]:
    """The inputs' identity now, to record in OUTPUT's run_config.json (`record_input_content`); when OUTPUT
    holds a `verb` run that recorded other content for one of the same inputs, refused naming that input
    (--overwrite starts again instead). Call it before the output is claimed: a finished run of the same
    settings would otherwise be reported as nothing to do."""
    config = read_run_config(output) if Path(output).is_dir() else None
    ours = config is not None and config.get("verb") == verb and not overwrite
    recorded = config.get(INPUT_CONTENT) if ours and isinstance(config.get(INPUT_CONTENT), list) else None
    identity = content_identity(inputs, recorded, exclude=output)
    was = {row[0]: row[1] for row in recorded or () if isinstance(row, list) and len(row) == 3}
    for path, digest, _ in identity:
        if path in was and was[path] != digest:
            raise OutputError("{output_path} holds a `bertforge {verb}` run of other input data: {changed} changed "
                              "since that run ({was}… then, {now}… now); start again with {overwrite}, or choose "
                              "another {output}", output_path=output, verb=verb, changed=path,
                              was=str(was[path])[:19], now=digest[:19])
    return identity


def record_input_content(output: str | Path, identity: list[list[str]]) -> None:
    """Add the inputs' identity to OUTPUT's run_config.json (written by the claim), keeping what it holds."""
    from bertforge.outputs import write_run_config
    config = read_run_config(output)
    if config is None or not isinstance(config.get("verb"), str):
        return
    verb = config.pop("verb")
    status = config.get("status")
    write_run_config(output, verb, {**config, INPUT_CONTENT: identity})
    if status is not None:
        from bertforge.outputs import mark_finished
        mark_finished(output)

"""Atomic writes: temp file in the same folder, fsync, rename. A crash leaves the old file or the new one.

mkstemp/mkdtemp create their temporaries private (0600/0700) for safety while they are being written;
before the rename they get the mode a plain `open`/`mkdir` would have given (0666/0777 less the umask), so
a shared model folder stays as readable as the user's umask says.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import torch


def _umask() -> int:
    """The process umask: from /proc on Linux (read-only, thread-safe); elsewhere POSIX only lets you read
    it by setting it, so it is set straight back."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _honour_umask(path: Path, directory: bool) -> None:
    os.chmod(path, (0o777 if directory else 0o666) & ~_umask())


def fsync_dir(path: Path) -> None:
    """Make a rename inside `path` durable (POSIX needs the directory itself synced)."""
    try:
        fd = os.open(str(path), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def atomic_path(target: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `target`; on success it is fsynced and renamed onto `target`."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        with open(tmp_path, "rb+") as handle:
            os.fsync(handle.fileno())
        _honour_umask(tmp_path, directory=False)
        os.replace(tmp_path, target)
        fsync_dir(target.parent)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def atomic_write_text(target: str | Path, text: str) -> None:
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")


def atomic_write_bytes(target: str | Path, data: bytes) -> None:
    with atomic_path(target) as tmp:
        tmp.write_bytes(data)


def atomic_save_safetensors(tensors: dict[str, torch.Tensor], target: str | Path,
                            metadata: dict[str, str] | None = None) -> None:
    from safetensors.torch import save_file
    with atomic_path(target) as tmp:
        save_file({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, str(tmp), metadata=metadata)


def atomic_torch_save(obj: object, target: str | Path) -> None:
    with atomic_path(target) as tmp:
        torch.save(obj, str(tmp))


@contextmanager
def atomic_directory(target: str | Path) -> Iterator[Path]:
    """Build a whole folder under a temporary name, then rename it into place (replacing an older one)."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        yield tmp
        for path in tmp.rglob("*"):
            if path.is_file():
                with open(path, "rb+") as handle:
                    os.fsync(handle.fileno())
        fsync_dir(tmp)
        _honour_umask(tmp, directory=True)
        if target.exists():
            old = target.with_name(f".{target.name}.old")
            if old.exists():
                shutil.rmtree(old)
            os.replace(target, old)
            os.replace(tmp, target)
            shutil.rmtree(old)
        else:
            os.replace(tmp, target)
        fsync_dir(target.parent)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)

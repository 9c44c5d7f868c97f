"""Atomic writes: temp file in the same folder, fsync, rename. A crash leaves the old file or the new one."""
from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import torch


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

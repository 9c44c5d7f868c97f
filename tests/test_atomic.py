"""Atomic writes leave files and folders with the permissions the umask allows, like a plain open/mkdir."""
from __future__ import annotations

import os
import stat

import pytest
import torch

from bertforge.atomic import (atomic_directory, atomic_save_safetensors, atomic_torch_save, atomic_write_bytes,
                              atomic_write_text)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture(params=[0o022, 0o077, 0o002])
def umask(request):
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def test_atomic_files_and_folders_honour_the_umask(tmp_path, umask):
    # what the OS gives a plain file / folder under this umask is the reference
    plain_file, plain_dir = tmp_path / "plain.txt", tmp_path / "plain"
    plain_file.write_text("x")
    plain_dir.mkdir()
    file_mode, dir_mode = _mode(plain_file), _mode(plain_dir)
    assert file_mode == 0o666 & ~umask and dir_mode == 0o777 & ~umask

    atomic_write_text(tmp_path / "a.txt", "hello")
    atomic_write_bytes(tmp_path / "b.bin", b"\x00\x01")
    atomic_save_safetensors({"w": torch.ones(2)}, tmp_path / "c.safetensors")
    atomic_torch_save({"w": torch.ones(2)}, tmp_path / "d.pt")
    for name in ("a.txt", "b.bin", "c.safetensors", "d.pt"):
        assert _mode(tmp_path / name) == file_mode, name
    assert (tmp_path / "a.txt").read_text() == "hello"

    with atomic_directory(tmp_path / "folder") as tmp:
        (tmp / "inside.txt").write_text("y")
        atomic_write_text(tmp / "atomic_inside.txt", "z")
    assert _mode(tmp_path / "folder") == dir_mode
    assert _mode(tmp_path / "folder" / "inside.txt") == file_mode
    assert _mode(tmp_path / "folder" / "atomic_inside.txt") == file_mode
    # replacing an existing folder gives the new one the same mode
    with atomic_directory(tmp_path / "folder") as tmp:
        (tmp / "again.txt").write_text("y")
    assert _mode(tmp_path / "folder") == dir_mode and [p.name for p in (tmp_path / "folder").iterdir()] == ["again.txt"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == [], "no temporaries left"

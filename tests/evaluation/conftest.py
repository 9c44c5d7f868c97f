"""Fixtures of the GLUE suite tests: a GLUE folder made of links to some of the real task folders (the tiny
model is tests/conftest.py's)."""
from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture()
def glue_folder(shared_data):
    """`glue_folder(root, "RTE", "WNLI", ...)`: `root` holding links to those folders of ../shared/data/glue."""
    def make(root: Path, *tasks: str) -> Path:
        root.mkdir(parents=True, exist_ok=True)
        for task in tasks:
            (root / task).symlink_to(shared_data / "glue" / task, target_is_directory=True)
        return root
    return make

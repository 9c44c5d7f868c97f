"""Embedding fixtures: the tiny random encoder as a sentence-transformers folder, and a synthetic pair task."""
from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

WORDS = ("apple river stone cloud tiger piano garden window silver orange candle forest bridge mountain rabbit "
         "engine castle ocean pencil violin desert planet mirror rocket dragon island ladder market shadow thunder")


@pytest.fixture(scope="session")
def tiny_st_folder(tiny_model, tmp_path_factory) -> Path:
    """The tiny random encoder with mean pooling and normalisation declared (sentence-transformers layout)."""
    from bertforge.tasks.embedding.pooling import Pooling
    out = tmp_path_factory.mktemp("tiny-st") / "model"
    shutil.copytree(tiny_model, out)
    Pooling("mean", True, 64).save(out, 32)
    return out


def association_pairs() -> list[tuple[str, str]]:
    """15 arbitrary word associations ("the apple" -> "a violin"): nothing lexical links a pair, so an encoder
    ranks each anchor's positive first only once it has learned the pairing."""
    words = WORDS.split()
    left, right = words[:15], words[15:]
    random.Random(0).shuffle(right)
    return [(f"the {a}", f"a {b}") for a, b in zip(left, right)]


@pytest.fixture
def pairs_file(tmp_path) -> Path:
    path = tmp_path / "pairs.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for _ in range(4):
            for anchor, positive in association_pairs():
                out.write(json.dumps({"anchor": anchor, "positive": positive}) + "\n")
    return path

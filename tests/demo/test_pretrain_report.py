"""demo/pretrain_report.py: the plateau is the corpus's most frequent tokens, and only other words leave it."""
from __future__ import annotations

import importlib.util
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("pretrain_report", REPO_ROOT / "demo" / "pretrain_report.py")
report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(report)


def test_frequent_tokens_are_the_most_common_words_and_marks(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("The film , the plot\nthe actors , a film .\n", encoding="utf-8")
    assert report.frequent_tokens(corpus, n=3) == {"the", ",", "film"}


def test_only_whole_words_outside_the_frequent_tokens_leave_the_plateau():
    frequent = {"the", ",", ".", "a", "of"}
    assert report.off_plateau(["the", ",", ".", "a", "of"], frequent) == []
    assert report.off_plateau(["the", "##ing", "!", "story", "a"], frequent) == ["story"]

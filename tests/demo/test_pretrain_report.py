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


def test_a_missed_mark_is_answered_with_a_step_count_not_a_longer_budget():
    """A budget buys fewer steps on a busy machine, so the advice is a step count: the count that left the
    plateau (docs/RESULTS.md) after a shorter run, twice the run's own after a longer one that still missed."""
    short = report.more_training(563)
    assert f"DEMO_PRETRAIN_STEPS={report.LEFT_PLATEAU_STEPS} make demo" in short and "BUDGET" not in short
    assert "DEMO_PRETRAIN_STEPS=6078 make demo" in report.more_training(3039)
    run_sh = (REPO_ROOT / "demo" / "run.sh").read_text(encoding="utf-8")
    assert "DEMO_PRETRAIN_STEPS" in run_sh

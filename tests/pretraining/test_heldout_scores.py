"""`heldout_scores` of a saved checkpoint equals the held-out evaluation its run made at its last step."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bertforge.cli import main as cli_main
from bertforge.pretraining.pretrain import heldout_scores
from bertforge.settings import SettingError


@pytest.mark.parametrize("objective,key", [("mdlm", "nelbo"), ("ltr", "mlm_loss"), ("mlm", "mlm_loss")])
def test_heldout_scores_of_a_checkpoint_are_its_runs_own_last_evaluation(train_data: Path, tmp_path: Path,
                                                                         objective: str, key: str) -> None:
    """The run evaluates through its stage (its held-out dataset, corrupting step and forward pass); the
    function rebuilds all of them from the folder: a different objective's batches, mask rate or step, or
    another set of held-out sequences, gives other numbers."""
    out = tmp_path / objective
    assert cli_main(["pretrain", "--recipe", "fast", "--model", "tiny", "--objective", objective, "--data",
                     str(train_data), "--output", str(out), "--max-steps", "2", "--eval-batches", "3",
                     "--mask-rate", "0.15", "--seed", "0", "--no-progress"]) == 0
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    last = [r for r in lines if r["split"] == "eval"][-1]
    got = heldout_scores(out, train_data, objective, 3, mask_rate=0.15)
    assert got[key] == pytest.approx(last[key], rel=1e-5, abs=1e-6)
    if objective == "mdlm":
        assert got["perplexity_bound"] == pytest.approx(last["perplexity_bound"], rel=1e-5)


def test_an_objective_it_cannot_score_is_refused_by_name(train_data: Path) -> None:
    with pytest.raises(SettingError, match="plm"):
        heldout_scores(train_data, train_data, "plm")

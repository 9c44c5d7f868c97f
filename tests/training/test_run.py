"""`train`: the run skeleton the training verbs share (OUTPUT claimed, the stage built in it, fit, the result)."""
from __future__ import annotations

from dataclasses import dataclass, field

import pytest
import torch

from training.test_engine import ToyStage, weights
from bertforge.outputs import is_finished
from bertforge.training.options import TrainOptions
from bertforge.training.run import Built, train


@dataclass
class ToySettings:
    output: str
    overwrite: bool = False
    train: TrainOptions = field(default_factory=lambda: TrainOptions(max_steps=4, lr=0.05, progress=False,
                                                                     device="cpu", save_every=0))


def test_train_claims_output_builds_the_stage_in_it_and_records_a_finished_run(tmp_path):
    settings, seen = ToySettings(str(tmp_path / "run")), []

    def build(session, out):
        seen.append(out)
        return Built(ToyStage(), options=TrainOptions(max_steps=3, lr=0.05, progress=False, device="cpu",
                                                      save_every=0), notes=["before"], notes_after=["after"])

    result = train(settings, build, verb="toy")
    assert seen == [tmp_path / "run"] and result.step == 3  # the stage's options, not settings.train's 4 steps
    assert result.notes[0] == "before" and result.notes[-1] == "after"
    assert is_finished(tmp_path / "run")
    assert not torch.equal(weights(tmp_path / "run")["1.weight"], ToyStage().model[1].weight.detach())  # trained
    again = train(settings, lambda session, out: ToyStage(), verb="toy")  # finished: not trained again
    assert again.step == 3 and any("already holds this finished run" in n for n in again.notes)


def test_a_stage_that_fails_to_build_leaves_no_output_behind(tmp_path):
    def build(session, out):
        raise ValueError("no data")

    with pytest.raises(ValueError, match="no data"):
        train(ToySettings(str(tmp_path / "run")), build, verb="toy")
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())

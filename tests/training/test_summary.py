"""training_summary.json as a TrainingSummary: a real run's file reads into it and back byte for byte, a damaged
key is one line naming the file and the key, and a file from before a key was recorded still loads."""
from __future__ import annotations

import json

import pytest

from bertforge.training.run_output import TRAINING_SUMMARY, read_training_summary
from bertforge.training.summary import TrainingSummary
from training.test_engine import ToyStage, run


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    out = tmp_path_factory.mktemp("summary") / "run"
    result = run(ToyStage(), out, max_steps=4, eval_every=2)
    return out, result


def test_a_real_runs_summary_reads_into_the_type_and_writes_back_the_same_bytes(finished, tmp_path):
    out, result = finished
    text = (out / TRAINING_SUMMARY).read_text()
    summary = read_training_summary(out)
    assert isinstance(summary, TrainingSummary)
    assert (summary.step, summary.stopped_by, summary.world_size) == (4, "max-steps", 1)
    assert summary.final_eval == result.final_eval and summary.best == result.best
    assert summary.elapsed_seconds == pytest.approx(result.elapsed, abs=1e-3) and summary.precision == "fp32"
    assert TrainingSummary.from_json(summary.to_json(tmp_path / "copy.json", default=str)) == summary
    assert (tmp_path / "copy.json").read_text() == text  # the same keys in the same order: old folders still read


def test_round_trip_keeps_unknown_keys():
    data = {"step": 7, "stopped_by": "time-budget", "skipped_steps": 1, "elapsed_seconds": 2.5, "tokens_seen": 99,
            "precision": "bf16", "world_size": 2, "final_eval": {"loss": 0.5}, "best": None, "written_by": "x"}
    summary = TrainingSummary.from_dict(data)
    assert summary.extra == {"written_by": "x"} and summary.tokens_seen == 99
    assert summary.to_dict() == data and list(summary.to_dict()) == list(data)


@pytest.mark.parametrize("key, value, named", [("step", "6", "'step'"), ("final_eval", [1], "'final_eval'"),
                                               ("stopped_by", None, "'stopped_by'"), ("best", {"step": "2"},
                                                                                      "'best.step'")])
def test_a_mistyped_key_is_one_line_naming_the_file_and_key(tmp_path, key, value, named):
    path = tmp_path / TRAINING_SUMMARY
    path.write_text(json.dumps({**TrainingSummary(step=3).to_dict(), key: value}))
    with pytest.raises(ValueError) as err:
        read_training_summary(tmp_path)
    message = str(err.value)
    assert str(path) in message and named in message and "\n" not in message


def test_an_older_summary_without_the_later_keys_loads_with_their_defaults(finished, tmp_path):
    """A summary written before precision, world_size and tokens_seen were recorded: the finished run's result
    is still returned by `fit` rather than refused."""
    import shutil
    out = tmp_path / "old"
    shutil.copytree(finished[0], out)
    old = {k: v for k, v in json.loads((out / TRAINING_SUMMARY).read_text()).items()
           if k not in ("precision", "world_size", "tokens_seen")}
    (out / TRAINING_SUMMARY).write_text(json.dumps(old))
    summary = read_training_summary(out)
    assert (summary.precision, summary.world_size, summary.tokens_seen, summary.step) == (None, 1, 0, 4)
    again = run(ToyStage(), out, max_steps=4, eval_every=2)
    assert again.step == 4 and again.best == finished[1].best and "already holds" in again.notes[0]


def test_no_summary_or_not_json_is_none(tmp_path):
    assert read_training_summary(tmp_path) is None
    (tmp_path / TRAINING_SUMMARY).write_text("{")
    assert read_training_summary(tmp_path) is None

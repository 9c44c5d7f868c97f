"""distill_summary.json as a DistillReport: a real distillation run's file reads into it and back byte for byte;
a missing or mistyped key is one line naming the file and the key; an older file without the optional keys loads."""
from __future__ import annotations

import json

import pytest

from distill_folders import tiny_teacher
from bertforge.pretraining.distill import SUMMARY_FILE, DistillReport, distill, init_student


def test_a_real_runs_summary_reads_into_the_type(train_data, vocab_dir, tmp_path):
    tiny_teacher(tmp_path / "teacher", layers=2, vocab_dir=vocab_dir)
    student = init_student(tmp_path / "teacher", tmp_path / "student")
    result = distill(tmp_path / "teacher", student, train_data, tmp_path / "out", batch_size=4, max_seq_length=32,
                     max_steps=2, log_every=1, eval_batches=1, seed=5, progress=False)
    text = (tmp_path / "out" / SUMMARY_FILE).read_text()
    report = DistillReport.from_json(tmp_path / "out" / SUMMARY_FILE)
    assert (report.step, report.stopped_by) == (2, "max-steps") == (result.step, result.stopped_by)
    assert report.final_eval == result.final_eval and report.teacher_eval == result.teacher_eval
    assert report.parameters["student"] < report.parameters["teacher"]
    report.to_json(tmp_path / "copy.json")
    assert (tmp_path / "copy.json").read_text() == text


@pytest.mark.parametrize("change, named", [({"step": 2.5}, "'step'"), ({"teacher_eval": "x"}, "'teacher_eval'"),
                                           ({"stopped_by": None}, "'stopped_by'")])
def test_a_mistyped_key_is_one_line_naming_the_file_and_key(tmp_path, change, named):
    path = tmp_path / SUMMARY_FILE
    path.write_text(json.dumps({**DistillReport(step=2, stopped_by="max-steps").to_dict(), **change}))
    with pytest.raises(ValueError) as err:
        DistillReport.from_json(path)
    assert str(path) in str(err.value) and named in str(err.value) and "\n" not in str(err.value)


def test_a_missing_required_key_is_named_and_optional_ones_default(tmp_path):
    path = tmp_path / SUMMARY_FILE
    path.write_text(json.dumps({"stopped_by": "max-steps"}))
    with pytest.raises(ValueError, match=f"{SUMMARY_FILE}: key 'step' is missing"):
        DistillReport.from_json(path)
    path.write_text(json.dumps({"step": 3, "stopped_by": "time-budget", "note": "kept"}))
    report = DistillReport.from_json(path)
    assert report.teacher_eval == {} and report.parameters == {} and report.extra == {"note": "kept"}
    assert DistillReport.from_dict(report.to_dict()) == report

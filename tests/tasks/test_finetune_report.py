"""metrics.json as a FinetuneReport: round trip, keys it does not know kept, a damaged key named in one line, an
older file without the optional keys (all of them are) still loading (a real run's file: tests/tasks/test_finetune.py)."""
from __future__ import annotations

import json

import pytest

from bertforge.tasks.finetune_report import FinetuneReport, read_finetune_report

REPORT = {"task": "mnli", "main_metric": "accuracy", "note": None, "files": {"train": "train.tsv"},
          "n_train_examples": 16, "n_train_features": 16, "eval": {"accuracy": 0.5, "n_examples": 8},
          "best_run": {"name": "lr5e-05_seed42", "lr": 5e-5, "seed": 42, "value": 0.5},
          "runs": [{"name": "lr5e-05_seed42", "lr": 5e-5, "seed": 42, "value": 0.5, "steps": 2, "seconds": 1.5,
                    "eval": {"accuracy": 0.5}}],
          "summary": {"median": 0.5, "min": 0.5, "max": 0.5, "stdev": 0.0, "n_runs": 1},
          "settings": {"task": "mnli", "seed": 42}, "eval_dev_mismatched": {"accuracy": 0.25, "n_examples": 8}}


def test_round_trip_keeps_every_key_in_order(tmp_path):
    report = FinetuneReport.from_dict(REPORT)
    assert report.runs[0]["steps"] == 2 and report.best_run["seed"] == 42
    assert report.eval_set("eval_dev_mismatched") == {"accuracy": 0.25, "n_examples": 8}
    assert report.eval_set("eval") == report.eval and report.eval_set("eval_test") is None
    report.to_json(tmp_path / "metrics.json")
    assert (tmp_path / "metrics.json").read_text() == json.dumps(REPORT, indent=2) + "\n"
    assert read_finetune_report(tmp_path) == report


@pytest.mark.parametrize("key, value, named", [("task", 3, "'task'"), ("eval", [], "'eval'"),
                                               ("runs", {"a": 1}, "'runs'"), ("runs", [7], "'runs[0]'"),
                                               ("runs", [{"lr": "x"}], "'runs[0].lr'")])
def test_a_mistyped_key_is_one_line_naming_the_file_and_key(tmp_path, key, value, named):
    (tmp_path / "metrics.json").write_text(json.dumps({**REPORT, key: value}))
    with pytest.raises(ValueError) as err:
        read_finetune_report(tmp_path)
    message = str(err.value)
    assert str(tmp_path / "metrics.json") in message and named in message and "\n" not in message


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nothing/metrics.json: no such metrics.json"):
        read_finetune_report(tmp_path / "nothing")


def test_an_older_report_without_the_optional_keys_loads():
    report = FinetuneReport.from_dict({"task": "sst2", "main_metric": "accuracy", "eval": {"accuracy": 0.9}})
    assert report.runs == [] and report.settings == {} and report.best_run is None and report.note is None
    assert FinetuneReport.from_dict({"settings": {"seed": 7}}).settings == {"seed": 7}  # what distill reads

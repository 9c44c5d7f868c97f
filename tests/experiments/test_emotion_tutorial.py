"""experiments/emotion_tutorial.py: the runs it plans, the medians it publishes and the records it writes to the
results store, from run folders laid out as `bertforge evaluate` and the scheduler leave them."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import emotion_tutorial  # noqa: E402


def scores(f1: float) -> dict:
    return {"precision": 0.5, "recall": 0.5, "f1": f1, "support": 10}


def fake_run(out: Path, name: str, accuracy: float, macro_f1: float, cpu_minutes: float) -> None:
    """The files `bertforge evaluate --output` leaves that the tutorial reads, as that verb writes them."""
    (out / "eval" / name).mkdir(parents=True)
    (out / "eval" / name / "classification_report.json").write_text(json.dumps(
        {"per_class": {"joy": scores(0.9), "fear": scores(0.7)}, "macro avg": scores(macro_f1),
         "weighted avg": scores(0.85), "accuracy": accuracy}, indent=2) + "\n")
    (out / "cpu").mkdir(exist_ok=True)
    (out / "cpu" / f"{name}.json").write_text(json.dumps({"cpu_minutes": cpu_minutes}))


def test_plan_puts_both_schedules_of_each_seed_first_then_the_lr_factors() -> None:
    names = [run.name for run in emotion_tutorial.plan_runs(2, (0.1, 10.0))]
    assert names == ["onecycle-x1-seed1", "linear-x1-seed1", "onecycle-x1-seed2", "linear-x1-seed2",
                     "onecycle-x0.1-seed1", "onecycle-x10-seed1"]


def test_medians_and_records_come_from_the_run_folders(tmp_path: Path) -> None:
    from bertforge.results_store import read_store, render
    runs = emotion_tutorial.plan_runs(3, (0.1,))
    accuracy = {"onecycle-x1-seed1": 0.93, "onecycle-x1-seed2": 0.95, "onecycle-x1-seed3": 0.90,
                "linear-x1-seed1": 0.92, "linear-x1-seed2": 0.94, "linear-x1-seed3": 0.96, "onecycle-x0.1-seed1": 0.5}
    for i, run in enumerate(runs):
        fake_run(tmp_path, run.name, accuracy[run.name], 0.8, 20.0 + i)
    result = emotion_tutorial.collect(runs, tmp_path, 1.75e-4)
    assert result["summary"]["onecycle x1"]["median_accuracy"] == 0.93
    assert result["summary"]["linear x1"]["median_accuracy"] == 0.94
    assert result["summary"]["onecycle x0.1"]["lr"] == 1.75e-5
    folder = tmp_path / "store"
    emotion_tutorial.write_store_records(result, None, folder)
    store = read_store(folder)
    assert render(store, "emotion/onecycle-x1/accuracy|full") == "93.0 % (90.0-95.0 %)"
    assert render(store, "emotion/linear-x1/cpu-minutes") == "23.0 min"   # the runs' CPU minutes 21, 23, 25
    assert render(store, "emotion/lr-find/suggested-lr") == "0.000175"
    rows = store.tables["emotion-schedules"]["rows"]
    assert [row[0] for row in rows] == ["`onecycle` (x1 the suggestion)", "`linear` (x1 the suggestion)",
                                        "`onecycle` (x0.1 the suggestion)"]
    assert rows[2][3] == "{emotion/onecycle-x0.1/accuracy}"   # one seed: no range to show


def test_the_suggested_lr_is_read_from_a_finished_lr_find(tmp_path: Path) -> None:
    """A finished lr-find (its lr_find.json there) is read, not run again."""
    from bertforge.tasks.lr_find import LrFindResult
    (tmp_path / "lr-find").mkdir()
    LrFindResult(lrs=[1e-5, 1e-4], losses=[0.7, 0.6], smoothed=[0.7, 0.65], suggested_lr=1.75e-5, min_loss_lr=1e-4,
                 stopped_by="steps", command="bertforge finetune").to_json(tmp_path / "lr-find" / "lr_find.json")
    assert emotion_tutorial.find_lr(None, tmp_path, None) == 1.75e-5


def test_a_damaged_report_stops_the_collection_naming_the_file_and_key(tmp_path: Path) -> None:
    runs = emotion_tutorial.plan_runs(1, ())
    for run in runs:
        fake_run(tmp_path, run.name, 0.9, 0.8, 20.0)
    report = tmp_path / "eval" / runs[1].name / "classification_report.json"
    data = json.loads(report.read_text())
    del data["macro avg"]["f1"]
    report.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=f"^{re.escape(str(report))}: key 'macro avg.f1' is missing$"):
        emotion_tutorial.collect(runs, tmp_path, 1e-4)

"""glue.json -> glue.md and glue.png, several glue.json side by side, and a broken glue.json named as such."""
from __future__ import annotations

import json

import pytest

from bertforge.evaluation.glue import assemble, task_entry
from bertforge.evaluation.protocols import get_protocol
from bertforge.evaluation.report import compare, load_result, markdown, write_report

PNG = b"\x89PNG\r\n\x1a\n"


def result(name: str, sst2: float, mrpc: tuple[float, float]) -> dict:
    runs = {"sst2": [{"seed": 42, "lr": 4e-5, "metrics": {"accuracy": sst2}, "score": sst2, "seconds": 60.0}],
            "mrpc": [{"seed": 42, "lr": 4e-5, "metrics": {"f1": mrpc[0], "accuracy": mrpc[1]},
                      "score": sum(mrpc) / 2, "seconds": 30.0}]}
    tasks = {t: task_entry(t, r, "median", majority={"score": 50.0, "metrics": {}}, train_examples=100,
                           dev_examples={"dev": 10}) for t, r in runs.items()}
    tasks["wnli"] = task_entry("wnli", [], "median", majority={"score": 56.338, "metrics": {"accuracy": 56.338}})
    return assemble(name, {"path": f"models/{name}", "model_type": "bert", "fingerprint": "sha256:" + "0" * 64},
                    get_protocol("sane", epochs=1.0), tasks, {"qnli": "QNLI/ has no train.tsv"},
                    command=f"bertforge glue --model models/{name}")


def test_report_files(tmp_path):
    r = result("mini", 91.25, (88.0, 84.0))
    assert r["average"] == pytest.approx((91.25 + 86.0) / 2) and r["average_over"] == ["sst2", "mrpc"]
    assert r["seconds"] == 90.0 and r["protocol"]["changed"] == "epochs=1.0"
    paths = write_report(r, tmp_path)
    assert [p.name for p in paths] == ["glue.json", "glue.md", "glue.png"]
    saved = json.loads((tmp_path / "glue.json").read_text(), parse_constant=lambda c: pytest.fail(f"not JSON: {c}"))
    assert saved == r
    md = (tmp_path / "glue.md").read_text()
    table = [line for line in md.splitlines() if line.startswith("| mini |")][0]
    assert table == "| mini | 91.2 | 88.0/84.0 | 56.3* | 88.6 |"  # GLUE's order: SST-2, MRPC (F1/acc), WNLI, average
    assert "Skipped QNLI: QNLI/ has no train.tsv" in md and "over 2 of 8 tasks (SST-2, MRPC)" in md
    assert "bertforge glue --model models/mini" in md and "changed for this run: epochs=1.0." in md
    assert (tmp_path / "glue.png").read_bytes().startswith(PNG)


def test_compare_draws_side_by_side(tmp_path):
    for name, sst2 in (("a", 80.0), ("b", 90.0)):
        (tmp_path / name).mkdir()
        write_report(result(name, sst2, (80.0, 70.0)), tmp_path / name)
    png, md, results = compare([tmp_path / "a" / "glue.json", tmp_path / "b" / "glue.json"], tmp_path / "ab.png")
    assert png.read_bytes().startswith(PNG) and md == tmp_path / "ab.md"
    rows = [line for line in md.read_text().splitlines() if line.startswith(("| a |", "| b |"))]
    assert rows == ["| a | 80.0 | 80.0/70.0 | 56.3* | 77.5 |", "| b | 90.0 | 80.0/70.0 | 56.3* | 82.5 |",
                    "| b | +10.0 | +0.0 | +5.0 |"]  # b − a: SST-2, MRPC, average; one seed each: no interval
    assert "b: no interval (fewer than 2 scored runs of sst2, mrpc)." in md.read_text()


def test_a_broken_glue_json_is_named(tmp_path):
    path = tmp_path / "glue.json"
    path.write_text("{")
    with pytest.raises(ValueError, match="glue.json: not valid JSON"):
        load_result(path)
    good = result("a", 80.0, (80.0, 70.0))
    path.write_text(json.dumps({k: v for k, v in good.items() if k != "average_over"}))
    with pytest.raises(ValueError, match="key 'average_over' is missing"):
        load_result(path)
    good["tasks"]["squad"] = good["tasks"]["sst2"]
    path.write_text(json.dumps(good))
    with pytest.raises(ValueError, match="tasks.squad: not a GLUE task"):
        load_result(path)


def test_smoke_runs_say_they_are_not_glue_numbers():
    r = result("a", 80.0, (80.0, 70.0))
    r["protocol"]["max_eval_samples"] = 50
    assert "not GLUE dev numbers" in markdown(r)

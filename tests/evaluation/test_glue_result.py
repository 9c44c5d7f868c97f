"""glue.json as a GlueResult: the suite's file reads into it and back unchanged, a damaged key is one line naming
the file and the key, and a file another tool wrote without the optional keys still loads."""
from __future__ import annotations

import json

import pytest

from bertforge.evaluation.glue_result import FORMAT, GlueResult, GlueTaskResult
from bertforge.evaluation.report import load_result, markdown, write_report
from evaluation.test_report import result


def test_write_report_then_load_is_the_same_result_and_bytes(tmp_path):
    r = result("mini", 91.25, (88.0, 84.0))
    write_report(r, tmp_path)
    text = (tmp_path / "glue.json").read_text()
    assert list(json.loads(text)) == list(r)  # the keys in assemble's order
    loaded = load_result(tmp_path / "glue.json")
    assert isinstance(loaded, GlueResult) and isinstance(loaded.tasks["sst2"], GlueTaskResult)
    assert loaded.to_dict() == r and loaded.label == "mini" and loaded.format == FORMAT
    assert loaded.tasks["sst2"].score == 91.25 and loaded.tasks["wnli"].method == "majority"
    assert not loaded.tasks["wnli"].in_average and loaded.average_over == ["sst2", "mrpc"]
    assert GlueResult.from_json(loaded.to_json(tmp_path / "again.json")) == loaded
    assert (tmp_path / "again.json").read_text().rstrip("\n") == json.dumps(r, indent=2)
    assert markdown(loaded) == markdown(r)


# glue.json's keys in the order the suite writes them (the module docstring of evaluation/glue.py), spelled out
SUITE_KEYS = ["format", "name", "model", "protocol", "tasks", "average", "average_over", "majority_average",
              "skipped", "command", "seconds", "created", "software"]
TASK_KEYS = ["method", "in_average", "majority", "train_examples", "dev_examples", "score", "metrics", "selected",
             "spread", "runs"]


def test_a_real_suites_glue_json_reads_into_the_type(glue_folder, tiny_model, tmp_path):
    """run_glue returns the GlueResult it wrote: the file reads back equal to it and writes again byte for byte."""
    from bertforge.evaluation.glue import run_glue
    from evaluation.test_glue import settings
    data = glue_folder(tmp_path / "glue", "RTE", "WNLI")
    written = run_glue(settings(tiny_model, data, tmp_path / "out", tasks=["rte", "wnli"], seeds=1, epochs=1.0,
                                batch_size=8, max_train_samples=16, max_eval_samples=8, jobs=1))
    text = (tmp_path / "out" / "glue.json").read_text()
    saved = json.loads(text)
    assert list(saved) == SUITE_KEYS and all(list(saved["tasks"][t]) == TASK_KEYS for t in ("rte", "wnli"))
    loaded = load_result(tmp_path / "out" / "glue.json")
    assert isinstance(written, GlueResult) and isinstance(written.tasks["rte"], GlueTaskResult) and loaded == written
    assert loaded.to_dict() == saved == written.to_dict()
    assert loaded.to_json(tmp_path / "again.json").read_text() == text
    assert list(written.tasks) == ["rte", "wnli"] and written.tasks["rte"].score == saved["tasks"]["rte"]["score"]
    assert len(written.tasks["rte"].runs) == 1 and written.tasks["wnli"].method == "majority"
    assert written.model["fingerprint"].startswith("sha256:") and written.average_over == ["rte"]
    assert written.average == written.tasks["rte"].score and written.label == saved["name"]
    assert written.majority_average == written.tasks["rte"].majority["score"] is not None  # WNLI's is not in it


@pytest.mark.parametrize("path, value, named", [(("average",), "high", "'average'"),
                                                (("tasks", "sst2", "score"), "91", "'tasks.sst2.score'"),
                                                (("tasks", "mrpc", "metrics"), [1], "'tasks.mrpc.metrics'"),
                                                (("tasks", "mrpc"), [1], "'tasks.mrpc'"),
                                                (("tasks", "sst2", "in_average"), 1, "'tasks.sst2.in_average'"),
                                                (("skipped",), None, "'skipped'")])
def test_a_mistyped_key_is_one_line_naming_the_file_and_key(tmp_path, path, value, named):
    data = result("a", 80.0, (80.0, 70.0))
    target = data
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    file = tmp_path / "glue.json"
    file.write_text(json.dumps(data))
    with pytest.raises(ValueError) as err:
        load_result(file)
    message = str(err.value)
    assert str(file) in message and named in message and "\n" not in message


def test_a_file_without_the_optional_keys_loads_and_keeps_unknown_ones(tmp_path):
    """As a script writing the format by hand might: only what the report needs, plus a key of its own."""
    data = {"model": {"path": "models/other"}, "protocol": {"name": "sane"}, "skipped": {},
            "tasks": {"rte": {"score": 60.0, "metrics": {"accuracy": 60.0}}}, "average": 60.0,
            "average_over": ["rte"], "wall_clock": {"rte": 12.0}}
    (tmp_path / "glue.json").write_text(json.dumps(data))
    loaded = load_result(tmp_path / "glue.json")
    assert loaded.label == "other" and loaded.majority_average is None and loaded.failed == {}
    assert loaded.tasks["rte"].method == "finetune" and loaded.tasks["rte"].runs == []
    assert loaded.extra == {"wall_clock": {"rte": 12.0}} and loaded.to_dict()["wall_clock"] == {"rte": 12.0}
    assert "| other |" in markdown(loaded) and "failed" not in loaded.to_dict()


def test_another_format_is_refused_by_name(tmp_path):
    data = {**result("a", 80.0, (80.0, 70.0)), "format": "bertforge-glue/9"}
    (tmp_path / "glue.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="format 'bertforge-glue/9'; this bertforge reads bertforge-glue/1"):
        load_result(tmp_path / "glue.json")

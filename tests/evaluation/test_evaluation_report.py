"""metrics.json of `bertforge evaluate --output` as an EvaluationReport: a real evaluation's file (a predictor on
MNLI-shaped data with its second eval set; sentence embeddings on STS pairs) holds the keys it always had, reads
back equal to what `evaluate` returned and writes again byte for byte; a damaged or missing key is one line naming
the file and the key."""
from __future__ import annotations

import csv
import json
import shutil

import pytest

from bertforge.evaluation.evaluate import EvaluateSettings, evaluate
from bertforge.evaluation.evaluation_report import EvaluationReport, read_evaluation_report
from predictor_folders import tiny_predictor

# the keys of each layout in the order `bertforge evaluate` writes them, spelled out here
PREDICTOR_KEYS = ["task", "note", "files", "eval"]
EMBEDDING_KEYS = ["task", "model", "files", "split", "eval"]
MNLI_LABELS = ["contradiction", "entailment", "neutral"]
N = 8


@pytest.fixture(scope="module")
def mnli(shared_data, tmp_path_factory):
    """An MNLI-shaped folder of real RTE pairs (its dev_matched and dev_mismatched are two halves of RTE's dev)."""
    from evaluation.test_glue import _mnli_from_rte
    folder = tmp_path_factory.mktemp("glue") / "MNLI"
    _mnli_from_rte(shared_data / "glue" / "RTE", folder)
    return folder


def test_a_predictor_evaluations_file_is_what_evaluate_returns(mnli, minilm_dir, tmp_path):
    """Both eval sets in metrics.json (the second as a key after "eval"), the accuracy that of the predictor's own
    answers to the same pairs (read here with the csv module), the printed JSON the file's text; the per-class
    reports of both sets read back through their owner and write again unchanged."""
    from bertforge.tasks.metrics.report import read_classification_report
    from bertforge.tasks.predictor import Predictor
    folder = tiny_predictor(tmp_path / "mnli-predictor", minilm_dir, "mnli", "sequence_classification", MNLI_LABELS,
                            seed=4)
    out, printed = tmp_path / "out", []
    report = evaluate(EvaluateSettings(model=str(folder), data=str(mnli), max_eval_samples=N, output=str(out)),
                      say=printed.append)
    assert isinstance(report, EvaluationReport) and report.task == "mnli" and report.layout == "predictor"
    assert report.files == {"eval": str(mnli / "dev_matched.tsv"), "eval_dev_mismatched": str(mnli / "dev_mismatched.tsv")}
    mismatched = report.eval_set("eval_dev_mismatched")
    assert report.eval["n_examples"] == mismatched["n_examples"] == N and report.eval_set("eval") == report.eval
    predictor = Predictor.load(folder, device="cpu")
    for name, metrics in (("dev_matched", report.eval), ("dev_mismatched", mismatched)):
        with open(mnli / f"{name}.tsv", encoding="utf-8", newline="") as handle:
            rows = list(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))[1:N + 1]
        answers = predictor.predict([(r[1], r[2]) for r in rows])
        assert metrics["accuracy"] == pytest.approx(sum(a["label"] == r[3] for a, r in zip(answers, rows)) / N)
    text = (out / "metrics.json").read_text()
    saved = json.loads(text)
    assert list(saved) == [*PREDICTOR_KEYS, "eval_dev_mismatched"]  # none renamed, none dropped
    assert text.rstrip("\n") in printed
    read = read_evaluation_report(out)
    assert read == report and read.to_dict() == saved == report.to_dict()
    assert read.eval_set("eval_dev_mismatched") == saved["eval_dev_mismatched"]
    assert read.to_json(tmp_path / "again.json", default=float).read_text() == text
    for tag, metrics in (("", report.eval), ("-dev_mismatched", mismatched)):
        file = out / f"classification_report{tag}.json"
        per_class = read_classification_report(out, tag)
        assert per_class.to_json(tmp_path / "again-report.json").read_text() == file.read_text()
        assert per_class.accuracy == pytest.approx(metrics["accuracy"]) and list(per_class.per_class) == MNLI_LABELS
        assert sum(row.support for row in per_class.per_class.values()) == N


@pytest.fixture(scope="module")
def encoder(tiny_model, tmp_path_factory):
    """The tiny random encoder declared as a sentence-transformers model (mean pooling, normalised)."""
    from bertforge.tasks.embedding.pooling import Pooling
    out = tmp_path_factory.mktemp("st") / "model"
    shutil.copytree(tiny_model, out)
    Pooling("mean", True, 64).save(out, 32)
    return out


PAIRS = [("a man plays a guitar", "a man is playing guitar", 4.8), ("a cat sleeps", "the stock market fell", 0.2),
         ("kids run in a park", "children are running outside", 4.1), ("a woman cooks", "a chef is cooking", 3.5),
         ("the sun is bright", "it is raining hard", 0.9), ("a dog barks", "a dog is barking loudly", 4.4)]


@pytest.mark.parametrize("given", ["file", "folder"])
def test_a_sentence_embedding_evaluations_file_is_what_evaluate_returns(encoder, tmp_path, given):
    """The embeddings layout: the encoder, the source, the split (null for a file given by name), the metrics."""
    (tmp_path / "dev.tsv").write_text("sentence1\tsentence2\tscore\n" + "".join(f"{a}\t{b}\t{s}\n" for a, b, s in PAIRS))
    source = {"eval": str(tmp_path / "dev.tsv")} if given == "file" else {"data": str(tmp_path)}
    out = tmp_path / "out"
    report = evaluate(EvaluateSettings(model=str(encoder), task="sts", output=str(out), **source),
                      say=lambda _line: None)
    assert report.layout == "embeddings" and report.model == str(encoder) and report.task == "sts"
    assert report.files == [str(tmp_path / "dev.tsv")] and report.split == (None if given == "file" else "dev")
    assert report.note is None and {"spearman", "pearson"} <= set(report.eval)  # their values: tests/commands/
    text = (out / "metrics.json").read_text()
    assert list(json.loads(text)) == EMBEDDING_KEYS and json.loads(text)["split"] == report.split
    read = read_evaluation_report(out)
    assert read == report and read.to_json(tmp_path / "again.json").read_text() == text


PREDICTOR_FILE = {"task": "sst2", "note": None, "files": {"eval": "SST-2/dev.tsv"},
                  "eval": {"accuracy": 0.5, "n_examples": 2}}
EMBEDDING_FILE = {"task": "retrieval", "model": "encoder", "files": ["beir"], "split": "test",
                  "eval": {"ndcg@10": 0.5}}


@pytest.mark.parametrize("data", [PREDICTOR_FILE, EMBEDDING_FILE], ids=["predictor", "embeddings"])
def test_each_layout_keeps_its_own_keys_and_nulls(tmp_path, data):
    """A null of the layout's own keys is written (note, split); a key of the other layout never appears."""
    for nulled in ({}, {"note": None} if data is PREDICTOR_FILE else {"split": None}):
        changed = {**data, **nulled}
        report = EvaluationReport.from_dict(changed)
        assert report.to_dict() == changed and list(report.to_dict()) == list(changed)
        assert report.to_json(tmp_path / "metrics.json").read_text() == json.dumps(changed, indent=2) + "\n"


@pytest.mark.parametrize("change, named", [
    ({"task": 3}, "key 'task' must be a string"),
    ({"task": None}, "key 'task' must be a string"),
    ({"eval": [0.5]}, "key 'eval' must be an object"),
    ({"files": "SST-2/dev.tsv"}, "key 'files' must be an object or a list"),
    ({"note": ["a"]}, "key 'note' must be a string or null"),
    ({"split": 1}, "key 'split' must be a string or null"),
    ({"model": {}}, "key 'model' must be a string or null"),
], ids=["task", "task-null", "eval", "files", "note", "split", "model"])
def test_a_mistyped_key_is_one_line_naming_the_file_and_key(tmp_path, change, named):
    (tmp_path / "metrics.json").write_text(json.dumps({**PREDICTOR_FILE, **change}))
    with pytest.raises(ValueError) as err:
        read_evaluation_report(tmp_path)
    message = str(err.value)
    assert message.startswith(f"{tmp_path / 'metrics.json'}: {named}") and "\n" not in message


@pytest.mark.parametrize("key", ["task", "files", "eval"])
def test_a_dropped_key_is_named(tmp_path, key):
    (tmp_path / "metrics.json").write_text(json.dumps({k: v for k, v in PREDICTOR_FILE.items() if k != key}))
    with pytest.raises(ValueError, match=f"metrics.json: key '{key}' is missing$"):
        read_evaluation_report(tmp_path)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere/metrics.json: no such metrics.json"):
        read_evaluation_report(tmp_path / "nowhere")


@pytest.mark.parametrize("data", [PREDICTOR_FILE, EMBEDDING_FILE], ids=["predictor", "embeddings"])
def test_every_damaged_key_is_a_one_line_error_naming_the_file(tmp_path, data):
    """tests/test_json_fuzz.py's walk over every key of each layout, through the reader."""
    from test_json_fuzz import Case, check_loader
    folder = tmp_path / "eval"
    folder.mkdir()
    (folder / "metrics.json").write_text(json.dumps({**data, "eval_dev_mismatched": {"accuracy": 0.25}}))
    case = Case("evaluate", None, "metrics.json", lambda f: read_evaluation_report(f).eval_set("eval_dev_mismatched"))
    assert check_loader(case, folder, tmp_path / "scratch") == []

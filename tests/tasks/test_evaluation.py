"""`evaluate`: per-example prediction files that re-score to the reported numbers, and refusing data of
another task. Predictors are tiny random BERTs (scores are near chance; the files must still agree)."""
from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from bertforge.cli import main
from bertforge.tasks import get_task, ner_metrics, read_squad, squad_v1_evaluate, squad_v2_evaluate
from bertforge.tasks.predictor import Predictor
from bertforge.tasks.prediction_files import write_eval_outputs
from predictor_folders import tiny_predictor

TIMING = ("n_examples", "eval_seconds", "examples_per_second")


def _evaluate(folder: Path, out: Path, **kw) -> dict:
    p = Predictor.load(folder, device="cpu", precision="fp32")
    kept: dict = {}
    report = p.evaluate(keep=kept, **kw)
    write_eval_outputs(out, get_task(report["task"]), report, kept, p.labels)
    assert json.loads((out / "metrics.json").read_text()) == json.loads(json.dumps(report))
    return report


def _scores(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if k not in TIMING}


@pytest.mark.slow
def test_classification_csv_rescores_to_the_reported_metrics(tmp_path, minilm_dir, shared_data):
    folder = tiny_predictor(tmp_path / "mrpc", minilm_dir, "mrpc", "sequence_classification", ["0", "1"], seed=3)
    report = _evaluate(folder, tmp_path / "out", data=str(shared_data / "glue"), max_samples=64)
    with open(tmp_path / "out" / "predictions.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 64 and [int(r["index"]) for r in rows] == list(range(64))
    assert list(rows[0]) == ["index", "text", "text_pair", "gold", "predicted", "prob_0", "prob_1"]
    from bertforge.tasks.readers import read_glue
    gold = read_glue("mrpc", shared_data / "glue" / "MRPC" / "dev.tsv").examples[:64]
    assert [(r["text"], r["text_pair"], r["gold"]) for r in rows] == [(e.text, e.text_pair, e.label) for e in gold]
    for r in rows:
        probs = [float(r["prob_0"]), float(r["prob_1"])]
        assert sum(probs) == pytest.approx(1.0) and r["predicted"] == str(int(np.argmax(probs)))
    from bertforge.tasks import glue_metrics
    again = glue_metrics("mrpc", [int(r["predicted"]) for r in rows], [int(r["gold"]) for r in rows])
    assert again == pytest.approx(_scores(report["eval"]))


def test_regression_csv_rescores(tmp_path, minilm_dir, shared_data):
    folder = tiny_predictor(tmp_path / "stsb", minilm_dir, "stsb", "regression")
    report = _evaluate(folder, tmp_path / "out", data=str(shared_data / "glue"), max_samples=40)
    with open(tmp_path / "out" / "predictions.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    from bertforge.tasks import glue_metrics
    again = glue_metrics("stsb", [float(r["predicted"]) for r in rows], [float(r["gold"]) for r in rows])
    assert again == pytest.approx(_scores(report["eval"]), abs=1e-9)


@pytest.mark.slow
def test_ner_conll_file_has_a_line_per_word_and_rescores(tmp_path, minilm_dir, shared_data):
    from bertforge.tasks import CONLL2003_LABELS, read_conll
    folder = tiny_predictor(tmp_path / "ner", minilm_dir, "conll2003", "token_classification",
                            list(CONLL2003_LABELS), seed=1)
    valid = shared_data / "conll2003" / "valid.txt"
    report = _evaluate(folder, tmp_path / "out", eval_file=str(valid), max_samples=50)
    sentences = read_conll(valid).examples[:50]
    blocks = (tmp_path / "out" / "predictions.conll").read_text(encoding="utf-8").split("\n\n")
    blocks = [b for b in blocks if b.strip()]
    assert len(blocks) == 50
    preds, golds = [], []
    for block, sent in zip(blocks, sentences):
        lines = block.strip("\n").split("\n")
        assert len(lines) == len(sent.words)  # one line per word
        cols = [line.split(" ") for line in lines]
        assert [c[0] for c in cols] == list(sent.words) and [c[1] for c in cols] == list(sent.tags)
        golds.append([c[1] for c in cols])
        preds.append([c[2] for c in cols])
    assert _scores(ner_metrics(preds, golds)) == _scores(report["eval"])


@pytest.mark.slow
def test_squad_v1_predictions_json_rescores(tmp_path, minilm_dir, shared_data):
    folder = tiny_predictor(tmp_path / "qa", minilm_dir, "squad", "question_answering")
    dev = shared_data / "squad" / "dev-v1.1.json.gz"
    report = _evaluate(folder, tmp_path / "out", eval_file=str(dev), max_samples=30)
    predictions = json.loads((tmp_path / "out" / "predictions.json").read_text(encoding="utf-8"))
    examples = read_squad(dev).examples[:30]
    assert list(predictions) == [ex.qid for ex in examples]
    assert all(isinstance(v, str) for v in predictions.values())
    assert squad_v1_evaluate(predictions, examples) == _scores(report["eval"])


@pytest.mark.slow
def test_squad_v2_predictions_and_null_odds_rescore(tmp_path, minilm_dir, shared_data):
    # a v2 file from real v1.1 text: every third question made unanswerable
    with gzip.open(shared_data / "squad" / "dev-v1.1.json.gz", "rt", encoding="utf-8") as handle:
        data = json.load(handle)
    article = data["data"][0]
    article["paragraphs"] = article["paragraphs"][:3]
    n = 0
    for para in article["paragraphs"]:
        for qa in para["qas"]:
            qa["is_impossible"] = n % 3 == 0
            if qa["is_impossible"]:
                qa["answers"] = []
            n += 1
    v2 = tmp_path / "dev-v2.json"
    v2.write_text(json.dumps({"version": "v2.0", "data": [article]}), encoding="utf-8")
    folder = tiny_predictor(tmp_path / "qa2", minilm_dir, "squad2", "question_answering")
    report = _evaluate(folder, tmp_path / "out", eval_file=str(v2))
    predictions = json.loads((tmp_path / "out" / "predictions.json").read_text())
    null_odds = json.loads((tmp_path / "out" / "null_odds.json").read_text())
    examples = read_squad(v2).examples
    assert set(predictions) == set(null_odds) == {ex.qid for ex in examples}
    assert all(isinstance(v, float) for v in null_odds.values())
    again = squad_v2_evaluate(predictions, examples, na_probs=null_odds, na_prob_thresh=0.0)
    assert again == _scores(report["eval"])
    assert "best_f1" in again and again["HasAns_total"] + again["NoAns_total"] == n


# ---- refusing another task's data -------------------------------------------------------------------------------
def test_single_sentence_predictor_refuses_pair_data(tmp_path, minilm_dir, shared_data):
    folder = tiny_predictor(tmp_path / "sst2", minilm_dir, "sst2", "sequence_classification", ["0", "1"])
    p = Predictor.load(folder)
    with pytest.raises(ValueError, match="this sst2 predictor reads single texts but the data has pairs"):
        p.evaluate(data=str(shared_data / "glue"), task="mrpc", max_samples=8)
    with pytest.raises(ValueError, match="question_answering"):
        p.evaluate(data=str(shared_data / "squad"), task="squad")
    # the same label set and input kind is allowed: CoLA sentences through an SST-2 head
    assert p.evaluate(data=str(shared_data / "glue"), task="cola", max_samples=8)["eval"]["n_examples"] == 8


def test_label_sets_must_match(tmp_path, minilm_dir, shared_data, capsys):
    folder = tiny_predictor(tmp_path / "rte", minilm_dir, "rte", "sequence_classification",
                            ["entailment", "not_entailment"])
    assert main(["evaluate", "--model", str(folder), "--data", str(shared_data / "glue"), "--task", "wnli",
                 "--max-eval-samples", "8"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "labels ['0', '1'] are not among this rte predictor's labels" in err


def test_cli_output_folder(tmp_path, minilm_dir, shared_data, capsys):
    folder = tiny_predictor(tmp_path / "sst2", minilm_dir, "sst2", "sequence_classification", ["0", "1"])
    assert main(["evaluate", "--model", str(folder), "--data", str(shared_data / "glue"), "--max-eval-samples", "16",
                 "--device", "cpu", "--precision", "bf16", "--batch-size", "4", "--output", str(tmp_path / "o")]) == 0
    metrics = json.loads((tmp_path / "o" / "metrics.json").read_text())
    assert metrics["eval"]["n_examples"] == 16
    assert len((tmp_path / "o" / "predictions.csv").read_text().splitlines()) == 17
    assert main(["evaluate", "--model", str(folder), "--data", str(shared_data / "glue"),
                 "--output", str(tmp_path / "m.json")]) == 1
    assert "expected a folder" in capsys.readouterr().err


def test_unlabelled_rows_are_refused(tmp_path, minilm_dir):
    folder = tiny_predictor(tmp_path / "sst2", minilm_dir, "sst2", "sequence_classification", ["0", "1"])
    (tmp_path / "test.tsv").write_text("index\tsentence\n0\ta fine film\n1\tdull\n")
    with pytest.raises(ValueError, match=r"test.tsv, line 1, field 'label': expected a labeled file"):
        Predictor.load(folder).evaluate(eval_file=str(tmp_path / "test.tsv"))

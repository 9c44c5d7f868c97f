"""The fine-tuning loop end to end: tiny random models on real data (fast), MiniLM on SST-2 (slow)."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from bertforge.tasks.finetune import parse_learning_rates as parse_lrs
from bertforge.tasks.finetune import LR_GRID, FinetuneSettings, finetune

from needs import require_module


# metrics.json's keys in the order fine-tuning writes them, spelled out here rather than taken from FinetuneReport
REPORT_KEYS = ["task", "main_metric", "note", "files", "n_train_examples", "n_train_features", "eval", "best_run",
               "runs", "summary", "settings"]


def quiet(**kw) -> FinetuneSettings:
    return FinetuneSettings(progress=False, **kw)


def glue_rows(path: Path, n: int) -> list[list[str]]:
    """The first n data rows of a GLUE TSV, split on tabs (no quoting), independently of our reader."""
    return [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()[1:n + 1]]


def test_lr_grid_and_lists():
    assert parse_lrs("grid") == list(LR_GRID) == [5e-5, 4e-5, 3e-5, 2e-5]
    assert parse_lrs("3e-5,2e-5") == [3e-5, 2e-5]


def test_glue_runs_restarts_and_writes_a_predictor(tiny_model, shared_data, tmp_path):
    out = tmp_path / "mrpc"
    report = finetune(quiet(task="mrpc", model=str(tiny_model), output=str(out), data=str(shared_data / "glue"),
                            epochs=1, batch_size=8, learning_rates=[5e-5, 3e-5], restarts=2,
                            max_train_samples=16, max_eval_samples=24), say=lambda *_: None)
    assert len(report.runs) == 4
    assert {(r["lr"], r["seed"]) for r in report.runs} == {(5e-5, 42), (5e-5, 43), (3e-5, 42), (3e-5, 43)}
    assert report.best_run["value"] == max(r["value"] for r in report.runs)
    s = report.summary
    assert s["min"] <= s["median"] <= s["max"] and s["n_runs"] == 4
    # the reported numbers are sklearn's on the saved predictor's answers to the first 24 dev pairs
    sk = require_module("sklearn.metrics")
    from bertforge.tasks.predictor import Predictor
    rows = glue_rows(shared_data / "glue" / "MRPC" / "dev.tsv", 24)
    gold = [int(r[0]) for r in rows]
    predicted = [int(r["label"]) for r in Predictor.load(out).predict([(r[3], r[4]) for r in rows])]
    accuracy, f1 = sk.accuracy_score(gold, predicted), sk.f1_score(gold, predicted, zero_division=0)
    assert report.eval["accuracy"] == pytest.approx(accuracy) and report.eval["f1"] == pytest.approx(f1)
    assert report.eval["acc_and_f1"] == pytest.approx((accuracy + f1) / 2)
    # the per-class report is of the same answers: sklearn's per-class numbers, the matrix counted here
    report_text = (out / "classification_report.json").read_text()
    per_class = json.loads(report_text)["per_class"]
    precision, recall, f1s, support = sk.precision_recall_fscore_support(gold, predicted, labels=[0, 1],
                                                                         zero_division=0)
    assert list(per_class) == ["0", "1"]
    for i, name in enumerate(per_class):
        assert per_class[name] == pytest.approx({"precision": precision[i], "recall": recall[i], "f1": f1s[i],
                                                 "support": support[i]})
    from bertforge.tasks.metrics.report import read_classification_report
    typed_report = read_classification_report(out)  # through its owner, and written again byte for byte
    assert typed_report.per_class["1"].recall == pytest.approx(recall[1]) and typed_report.accuracy == pytest.approx(
        accuracy)
    assert typed_report.to_json(tmp_path / "again-report.json").read_text() == report_text
    matrix = [line.split(",") for line in (out / "confusion_matrix.csv").read_text().splitlines()]
    assert [row[1:] for row in matrix[1:]] == [[str(sum(g == a and p == b for g, p in zip(gold, predicted)))
                                                for b in (0, 1)] for a in (0, 1)]
    for name in ("config.json", "model.safetensors", "vocab.txt", "task.json", "metrics.json", "curves.png",
                 "confusion_matrix.png"):
        assert (out / name).is_file(), name
    text = (out / "metrics.json").read_text()
    saved = json.loads(text)
    assert saved["main_metric"] == "f1" and saved["eval"]["n_examples"] == 24
    assert list(saved) == REPORT_KEYS  # none renamed, none dropped
    from bertforge.tasks.finetune_report import FinetuneReport, read_finetune_report
    typed = read_finetune_report(out)  # the real file reads into its type and back, key for key and byte for byte
    assert isinstance(report, FinetuneReport) and typed == report and report.to_dict() == saved == typed.to_dict()
    assert typed.summary["n_runs"] == 4 and typed.settings["restarts"] == 2 and typed.task == "mrpc"
    assert typed.to_json(tmp_path / "again.json").read_text() == text
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["BertForSequenceClassification"] and config["id2label"] == {"0": "0", "1": "1"}


def test_stsb_regression(tiny_model, shared_data, tmp_path):
    report = finetune(quiet(task="stsb", model=str(tiny_model), output=str(tmp_path / "o"),
                            data=str(shared_data / "glue" / "STS-B"), epochs=1, batch_size=16, learning_rates=[1e-4],
                            max_train_samples=64, max_eval_samples=40), say=lambda *_: None)
    # the reported correlations are scipy's on the saved predictor's scores for the first 40 dev pairs
    stats = require_module("scipy.stats")
    from bertforge.tasks.predictor import Predictor
    rows = glue_rows(shared_data / "glue" / "STS-B" / "dev.tsv", 40)
    gold = [float(r[9]) for r in rows]
    scores = [r["score"] for r in Predictor.load(tmp_path / "o").predict([(r[7], r[8]) for r in rows])]
    assert report.eval["spearman"] == pytest.approx(stats.spearmanr(scores, gold)[0], abs=1e-6)
    assert report.eval["pearson"] == pytest.approx(stats.pearsonr(scores, gold)[0], abs=1e-6)
    assert not any((tmp_path / "o" / name).exists() for name in ("classification_report.json",
                                                                 "confusion_matrix.csv", "confusion_matrix.png"))


def test_squad_article_split_end_to_end(tiny_model, shared_data, tmp_path):
    lines: list[str] = []
    report = finetune(quiet(task="squad", model=str(tiny_model), output=str(tmp_path / "o"),
                            data=str(shared_data / "squad" / "dev-v1.1.json.gz"), epochs=1, batch_size=16,
                            learning_rates=[1e-4], max_seq_length=192, max_train_samples=48, max_eval_samples=24),
                      say=lines.append)
    assert any("articles 0-37" in line and "articles 38-47" in line for line in lines)
    assert "articles 38-47" in report.note
    assert json.loads((tmp_path / "o" / "metrics.json").read_text())["note"] == report.note
    m = report.eval
    assert 0.0 <= m["exact_match"] <= m["f1"] <= 100.0 and m["n_examples"] == 24


def test_squad2_reports_threshold_zero_and_best(tiny_model, shared_data, tmp_path):
    """A hand-made v2 file from real v1.1 paragraphs: every third question's answer removed."""
    data = json.load(gzip.open(shared_data / "squad" / "dev-v1.1.json.gz", "rt", encoding="utf-8"))
    n = 0
    for article in data["data"][:2]:
        article["paragraphs"] = article["paragraphs"][:2]
        for par in article["paragraphs"]:
            for qa in par["qas"]:
                qa["is_impossible"] = n % 3 == 0
                if qa["is_impossible"]:
                    qa["plausible_answers"], qa["answers"] = qa["answers"], []
                n += 1
    path = tmp_path / "v2.json"
    path.write_text(json.dumps({"version": "v2.0", "data": data["data"][:2]}))
    report = finetune(quiet(task="squad2", model=str(tiny_model), output=str(tmp_path / "o"), train_file=str(path),
                            eval_file=str(path), epochs=1, batch_size=16, learning_rates=[1e-4], max_seq_length=192),
                      say=lambda *_: None)
    m = report.eval
    for key in ("exact", "f1", "HasAns_f1", "NoAns_f1", "best_f1", "best_f1_thresh"):
        assert key in m
    assert m["best_f1"] >= m["f1"] - 1e-9  # the searched threshold is at least as good as 0
    assert "null_threshold" in json.loads((tmp_path / "o" / "task.json").read_text())


def test_conll_end_to_end(tiny_model, shared_data, tmp_path):
    report = finetune(quiet(task="conll2003", model=str(tiny_model), output=str(tmp_path / "o"),
                            data=str(shared_data / "conll2003"), epochs=1, batch_size=16, learning_rates=[1e-4],
                            max_train_samples=64, max_eval_samples=40), say=lambda *_: None)
    m = report.eval
    assert 0.0 <= m["f1"] <= 1.0 and 0.0 <= m["accuracy"] <= 1.0
    # every gold entity of the first 40 validation sentences is counted, as seqeval finds them
    seqeval = require_module("seqeval.metrics.sequence_labeling")
    blocks = (shared_data / "conll2003" / "valid.txt").read_text(encoding="utf-8").split("\n\n")
    sentences = [[line.split()[-1] for line in b.strip().splitlines()] for b in blocks
                 if b.strip() and "-DOCSTART-" not in b][:40]
    assert m["n_gold"] == sum(len(seqeval.get_entities(tags)) for tags in sentences) > 0
    # the report counts the same gold entities per type, in CoNLL's tag order; its matrix counts every word
    report_text = (tmp_path / "o" / "classification_report.json").read_text()
    per_class = json.loads(report_text)["per_class"]
    assert sum(row["support"] for row in per_class.values()) == m["n_gold"]
    from bertforge.tasks.metrics.report import read_classification_report
    typed = read_classification_report(tmp_path / "o")  # seqeval's micro avg too, written again byte for byte
    assert list(typed.averages) == ["micro avg", "macro avg", "weighted avg"]
    assert typed.to_json(tmp_path / "again.json").read_text() == report_text
    order = ["PER", "ORG", "LOC", "MISC"]
    assert list(per_class) == [t for t in order if t in per_class]
    matrix = [line.split(",") for line in (tmp_path / "o" / "confusion_matrix.csv").read_text().splitlines()]
    assert sum(int(c) for row in matrix[1:] for c in row[1:]) == sum(len(tags) for tags in sentences)


def _confusion(folder: Path) -> list[list[int]]:
    import csv
    rows = list(csv.reader((folder / "confusion_matrix.csv").open(encoding="utf-8")))
    return [[int(c) for c in r[1:]] for r in rows[1:]]


def _counted(predicted: list[int], gold: list[int]) -> list[list[int]]:
    return [[sum(g == a and p == b for g, p in zip(gold, predicted)) for b in (0, 1)] for a in (0, 1)]


def test_the_class_report_is_the_kept_best_weights_and_reuses_the_evaluation_that_scored_them(
        tiny_model, shared_data, tmp_path, monkeypatch):
    """With `keep best` and the best evaluation an earlier one, the per-class matrix counts the saved (earlier)
    weights' answers, not the last step's; when the last evaluation is the best, its outputs are the report's
    and the saved predictor is not run on the set again."""
    import bertforge.tasks.finetune as ft
    from bertforge.tasks.predictor import Predictor
    rows = glue_rows(shared_data / "glue" / "SST-2" / "dev.tsv", 60)
    gold = [int(r[1]) for r in rows]
    pairs = [r[0] for r in rows]
    common = dict(task="sst2", model=str(tiny_model), data=str(shared_data / "glue" / "SST-2"), epochs=4,
                  batch_size=16, learning_rates=[1e-3], max_seq_length=32, max_train_samples=800, max_eval_samples=60)
    calls = []
    evaluate = ft.evaluate_examples
    monkeypatch.setattr(ft, "evaluate_examples", lambda *a, **k: calls.append(1) or evaluate(*a, **k))
    stage_evaluate, ranks = ft.FinetuneStage.evaluate, {}

    def numbered(self):  # each evaluation's metrics carry its number, and its score is ranks[number]
        self.evaluations = getattr(self, "evaluations", 0) + 1
        return {**stage_evaluate(self), "number": float(self.evaluations)}
    monkeypatch.setattr(ft.FinetuneStage, "evaluate", numbered)
    monkeypatch.setattr(ft.FinetuneStage, "score", lambda self, metrics: ranks[int(metrics["number"])]
                        if metrics else None)
    ranks.update({1: 1.0, 2: 2.0, 3: 4.0, 4: 3.0})  # the third evaluation is the best, not the last
    early = tmp_path / "early"
    finetune(quiet(output=str(early), **common), say=lambda *_: None)
    assert len(calls) == 4 + 1  # four evaluations in training, and the saved predictor's on the set
    predicted = [int(r["label"]) for r in Predictor.load(early).predict(pairs)]
    assert _confusion(early) == _counted(predicted, gold)

    calls.clear()
    ranks.update({1: 1.0, 2: 2.0, 3: 3.0, 4: 4.0})  # the last evaluation is the best: its outputs are the report's
    last = tmp_path / "last"
    finetune(quiet(output=str(last), **common), say=lambda *_: None)
    assert len(calls) == 4
    last_predicted = [int(r["label"]) for r in Predictor.load(last).predict(pairs)]
    assert _confusion(last) == _counted(last_predicted, gold)
    assert last_predicted != predicted  # the two runs saved different weights, so the first case can fail

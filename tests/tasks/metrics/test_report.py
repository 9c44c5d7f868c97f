"""The per-class report and confusion matrix, against independent references: plain numpy counting of the same
predictions, scikit-learn's text report, and seqeval's per-type scores on the same tags."""
from __future__ import annotations

import csv

import numpy as np
import pytest

from bertforge.tasks.metrics.report import (CORNER, entity_report, evaluation_report, label_report, write_report)
from bertforge.tasks.readers import TextExample

from needs import require_module

# a task order that is not alphabetical, so a report in sorted order (sklearn's default) would differ
LABELS = ["sadness", "joy", "love", "anger", "fear", "surprise"]


def _draws(seed: int = 0, n: int = 300) -> tuple[list[str], list[str]]:
    """Gold over five of the six labels (`surprise` never occurs), predictions that never say `love`, and a
    confusion that is far from symmetric (`sadness` is often predicted as `joy`, never the other way)."""
    rng = np.random.default_rng(seed)
    gold = [LABELS[i] for i in rng.integers(0, 5, n)]
    predicted = []
    for g in gold:
        p = g if rng.random() < 0.6 else LABELS[rng.choice([0, 1, 3, 4, 5])]
        p = "joy" if g == "sadness" and rng.random() < 0.5 else ("anger" if p == "love" else p)
        predicted.append("fear" if g == "joy" and p == "sadness" else p)
    return gold, predicted


def _counted(gold, predicted, labels) -> np.ndarray:
    g, p = np.array(gold), np.array(predicted)
    return np.array([[int(np.sum((g == a) & (p == b))) for b in labels] for a in labels])


def test_per_class_numbers_and_matrix_equal_plain_counting():
    """Catches a transposed matrix (the confusion is asymmetric), a label order other than the task's (sorted
    order differs), an off-by-one between rows and names, and a never-predicted class dropped or given NaN."""
    gold, predicted = _draws()
    result = label_report(gold, predicted, LABELS)
    m = _counted(gold, predicted, LABELS)
    assert not np.array_equal(m, m.T)
    np.testing.assert_array_equal(result.matrix, m)
    assert list(result.report["per_class"]) == LABELS == result.labels
    for i, name in enumerate(LABELS):
        tp, predicted_n, support = m[i, i], m[:, i].sum(), m[i, :].sum()
        precision = tp / predicted_n if predicted_n else 0.0
        recall = tp / support if support else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        row = result.report["per_class"][name]
        assert row == pytest.approx({"precision": precision, "recall": recall, "f1": f1, "support": support})
    assert result.report["per_class"]["love"]["precision"] == 0.0  # never predicted, still listed
    assert result.report["per_class"]["surprise"]["support"] == 0
    assert result.report["accuracy"] == pytest.approx(np.trace(m) / m.sum())
    f1s = np.array([result.report["per_class"][n]["f1"] for n in LABELS])
    assert result.report["macro avg"]["f1"] == pytest.approx(f1s.mean())
    assert result.report["weighted avg"]["f1"] == pytest.approx((f1s * m.sum(1)).sum() / m.sum())


def test_a_class_neither_seen_nor_predicted_is_listed_and_averaged():
    """A task label the eval set never shows (a tiny dev split) keeps its row, column and place in the macro
    average, as sklearn's `labels=` gives it; a report built from the data's own labels would drop it."""
    gold, predicted = _draws(seed=2)
    names = LABELS[:3] + ["neutral"] + LABELS[3:]
    result = label_report(gold, predicted, names)
    assert list(result.report["per_class"]) == names and result.matrix.shape == (7, 7)
    assert result.report["per_class"]["neutral"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0}
    assert not result.matrix[3].any() and not result.matrix[:, 3].any()
    f1s = [result.report["per_class"][n]["f1"] for n in names]
    assert result.report["macro avg"]["f1"] == pytest.approx(sum(f1s) / 7)


def test_the_printed_table_is_sklearns_text_report():
    sk = require_module("sklearn.metrics")
    gold, predicted = _draws(seed=3)
    expected = sk.classification_report(gold, predicted, labels=LABELS, digits=4, zero_division=0)
    assert label_report(gold, predicted, LABELS).text() == expected


def test_names_outside_the_task_labels_are_refused():
    with pytest.raises(ValueError, match=r"labels \['meh'\] are not among the task's labels"):
        label_report(["joy", "meh"], ["joy", "joy"], LABELS)


def test_files_hold_the_matrix_with_the_label_names_as_first_row_and_column(tmp_path):
    """The CSV is read back with the csv module: header row and first column are the names in task order,
    row = true, column = predicted; the PNG is a real image."""
    gold, predicted = _draws(seed=1)
    files = write_report(tmp_path, label_report(gold, predicted, LABELS), tag="-x")
    assert [f.name for f in files] == ["classification_report-x.json", "confusion_matrix-x.csv",
                                       "confusion_matrix-x.png"]
    rows = list(csv.reader(files[1].open(encoding="utf-8")))
    assert rows[0] == [CORNER, *LABELS] and [r[0] for r in rows[1:]] == LABELS
    np.testing.assert_array_equal(np.array([[int(c) for c in r[1:]] for r in rows[1:]]),
                                  _counted(gold, predicted, LABELS))
    image = require_module("matplotlib.image").imread(files[2])
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100


TAGS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]


def _tag_draws(seed: int = 0) -> tuple[list[list[str]], list[list[str]]]:
    rng = np.random.default_rng(seed)
    gold, predicted = [], []
    for _ in range(60):
        n = int(rng.integers(3, 12))
        g = [TAGS[i] for i in rng.choice(len(TAGS) - 2, n, p=[.5, .1, .1, .1, .05, .1, .05])]  # no MISC in gold
        p = [t if rng.random() < 0.7 else TAGS[int(rng.integers(0, 7))] for t in g]
        gold.append(g)
        predicted.append(["B-MISC" if t == "B-LOC" and rng.random() < 0.3 else t for t in p])
    return gold, predicted


def test_ner_report_equals_seqeval_per_entity_type():
    """Per-type precision/recall/f1/support and the averages are seqeval's on the same tags; types in the task's
    tag order (PER, ORG, LOC, MISC: not seqeval's alphabetical order); MISC, predicted but never gold, is listed
    with recall 0; the word-level matrix is plain counting over the task's tags."""
    seqeval = require_module("seqeval.metrics")
    gold, predicted = _tag_draws()
    result = entity_report(gold, predicted, TAGS)
    expected = seqeval.classification_report(gold, predicted, output_dict=True, zero_division=0)
    assert list(result.report["per_class"]) == ["PER", "ORG", "LOC", "MISC"]
    for name in ("PER", "ORG", "LOC", "MISC", "micro avg", "macro avg", "weighted avg"):
        row = result.report["per_class"].get(name) or result.report[name]
        e = expected[name]
        assert row == pytest.approx({"precision": e["precision"], "recall": e["recall"], "f1": e["f1-score"],
                                     "support": e["support"]})
    assert result.report["per_class"]["MISC"]["support"] == 0 and result.report["per_class"]["MISC"]["recall"] == 0
    assert result.report["accuracy"] == pytest.approx(seqeval.accuracy_score(gold, predicted))
    flat = (sum(gold, []), sum(predicted, []))
    np.testing.assert_array_equal(result.matrix, _counted(*flat, TAGS))
    assert "micro avg" in result.text() and "accuracy" not in result.text()


def test_only_classification_and_ner_evaluations_have_a_report():
    examples = [TextExample(str(i), "t", None, lab, i) for i, lab in enumerate(["b", "a", "b"])]
    made = evaluation_report("sequence_classification", examples, [0, 0, 1], ["b", "a"])
    np.testing.assert_array_equal(made.matrix, [[1, 1], [1, 0]])  # ids are positions in the task's labels
    assert evaluation_report("regression", examples, [0.1, 0.2, 0.3], None) is None
    assert evaluation_report("question_answering", examples, {}, None) is None
    assert evaluation_report("multiple_choice", examples, [0, 1, 0], ["0", "1"]) is None


# ---- classification_report.json as a ClassificationReport -----------------------------------------------------------
# the file's keys in the order written, spelled out here rather than taken from ClassificationReport
LABEL_KEYS = ["per_class", "macro avg", "weighted avg", "accuracy"]
ENTITY_KEYS = ["per_class", "micro avg", "macro avg", "weighted avg", "accuracy"]
ROW_KEYS = ["precision", "recall", "f1", "support"]


@pytest.mark.parametrize("kind", ["labels", "entities"])
def test_the_written_report_reads_back_typed_and_writes_the_same_bytes(tmp_path, kind):
    """Both layouts (classification; NER with seqeval's micro avg): every key, in order, read into types and written
    again byte for byte; the typed values are the report's (seqeval's and sklearn's numbers are checked above)."""
    import json

    from bertforge.tasks.metrics.report import ClassificationReport, ClassScores, read_classification_report
    made = label_report(*_draws(seed=2), LABELS) if kind == "labels" else entity_report(*_tag_draws(1), TAGS)
    write_report(tmp_path, made)
    text = (tmp_path / "classification_report.json").read_text()
    saved = json.loads(text)
    assert list(saved) == (LABEL_KEYS if kind == "labels" else ENTITY_KEYS)
    assert all(list(row) == ROW_KEYS for row in [*saved["per_class"].values(), saved["macro avg"]])
    typed = read_classification_report(tmp_path)
    assert isinstance(typed, ClassificationReport) and isinstance(typed.per_class[next(iter(saved["per_class"]))],
                                                                  ClassScores)
    assert typed.to_dict() == saved == made.report
    assert typed.to_json(tmp_path / "again.json").read_text() == text
    assert typed.accuracy == made.report["accuracy"] and typed.macro.f1 == made.report["macro avg"]["f1"]
    assert typed.weighted.support == made.report["weighted avg"]["support"]
    assert list(typed.per_class) == list(made.report["per_class"])
    for name, row in typed.per_class.items():
        assert (row.precision, row.recall, row.f1, row.support) == tuple(made.report["per_class"][name][k]
                                                                         for k in ROW_KEYS)


def test_a_further_eval_sets_report_is_read_by_its_tag(tmp_path):
    from bertforge.tasks.metrics.report import read_classification_report
    made = label_report(*_draws(seed=3), LABELS)
    write_report(tmp_path, made, tag="-mismatched")
    assert read_classification_report(tmp_path, "-mismatched").to_dict() == made.report
    with pytest.raises(FileNotFoundError, match="classification_report.json: no such classification_report.json"):
        read_classification_report(tmp_path)


def _report_dict() -> dict:
    return label_report(["joy", "joy", "fear"], ["joy", "fear", "fear"], ["joy", "fear"]).report


@pytest.mark.parametrize("change, named", [
    (lambda r: r.pop("macro avg"), "key 'macro avg' is missing"),
    (lambda r: r.pop("weighted avg"), "key 'weighted avg' is missing"),
    (lambda r: r.pop("accuracy"), "key 'accuracy' is missing"),
    (lambda r: r.pop("per_class"), "key 'per_class' is missing"),
    (lambda r: r["per_class"]["joy"].pop("f1"), "key 'per_class.joy.f1' is missing"),
    (lambda r: r["macro avg"].pop("support"), "key 'macro avg.support' is missing"),
    (lambda r: r["per_class"].update(joy=[0.5]), "key 'per_class.joy' must be an object"),
    (lambda r: r["per_class"]["fear"].update(precision="high"), "key 'per_class.fear.precision' must be a number"),
    (lambda r: r["weighted avg"].update(support=2.5), "key 'weighted avg.support' must be an integer"),
    (lambda r: r.update(accuracy=None), "key 'accuracy' must be a number"),
    (lambda r: r.update({"micro avg": 1}), "key 'micro avg' must be an object"),
], ids=["no-macro", "no-weighted", "no-accuracy", "no-per-class", "no-f1", "no-support", "row-list", "precision",
        "support-float", "accuracy-null", "micro-number"])
def test_a_malformed_report_is_one_line_naming_the_file_and_key(tmp_path, change, named):
    import json

    from bertforge.tasks.metrics.report import read_classification_report
    data = _report_dict()
    change(data)
    (tmp_path / "classification_report.json").write_text(json.dumps(data))
    with pytest.raises(ValueError) as err:
        read_classification_report(tmp_path)
    message = str(err.value)
    assert message.startswith(f"{tmp_path / 'classification_report.json'}: {named}") and "\n" not in message


def test_every_damaged_key_of_a_report_is_a_one_line_error_naming_the_file(tmp_path):
    """tests/test_json_fuzz.py's walk over every key, through the reader and the table printed from it."""
    import json

    from bertforge.tasks.metrics.report import format_report, read_classification_report
    from test_json_fuzz import Case, check_loader
    folder = tmp_path / "eval"
    folder.mkdir()
    (folder / "classification_report.json").write_text(json.dumps(_report_dict()))
    case = Case("report", None, "classification_report.json",
                lambda f: format_report(read_classification_report(f).to_dict()))
    assert check_loader(case, folder, tmp_path / "scratch") == []

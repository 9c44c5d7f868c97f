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

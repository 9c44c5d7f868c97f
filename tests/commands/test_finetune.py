"""`bertforge finetune` on a user's CSV/JSONL: data that would train on the wrong thing is refused before
training, naming the file and the column; labels that differ by surrounding spaces are one class."""
from __future__ import annotations

import json

import pytest

from bertforge.cli import main
from predictor_folders import tiny_encoder

ROWS = [("a gripping , funny film", "pos"), ("it 's a bore", "neg"), ("not bad at all", "pos"),
        ("the plot goes nowhere", "neg"), ("an unexpected delight", "pos"), ("flat and dull", "neg"),
        ("a joy to watch", "pos"), ("two hours lost", "neg")]


@pytest.fixture(scope="module")
def encoder(tmp_path_factory, minilm_dir):
    return tiny_encoder(tmp_path_factory.mktemp("tiny"), minilm_dir)


@pytest.mark.parametrize("name, content, message", [
    ("train.csv", "text\n" + "".join(f'"{t}"\n' for t, _ in ROWS),
     "train.csv, line 1, field 'label': expected a label column 'label'"),
    ("train.jsonl", "".join(json.dumps({"text": t}) + "\n" for t, _ in ROWS),
     "train.jsonl, line 1, field 'label': expected a label key 'label'"),
    ("train.csv", "text,label,text\n" + "".join(f'"{t}",{lab},x\n' for t, lab in ROWS),
     "train.csv, line 1, field 'text': expected each column name once, got 'text' as columns 1 and 3"),
    ("train.csv", "text,label\n" + "".join(f'"{t}",{lab}\n' for t, lab in ROWS) + "meh,POS\n",
     "train.csv, line 10, field 'label': expected one spelling per label, got 'POS' here and 'pos' on line 2"),
], ids=["csv-without-labels", "jsonl-without-labels", "duplicate-column", "case-variants"])
def test_data_that_would_train_wrong_is_refused_before_training(encoder, tmp_path, capsys, name, content, message):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    from bertforge.training.options import FaultHooks
    steps: list[int] = []  # the engine asks this hook at every training step: it stays empty if none ran
    hooks = FaultHooks(nan_at=lambda step: steps.append(step) and False)
    out = tmp_path / "out"
    assert main(["finetune", "--model", str(encoder), "--task", "classification", "--train", str(path),
                 "--output", str(out), "--no-progress", "--device", "cpu"], hooks=hooks) == 1
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith(f"bertforge finetune: error: {tmp_path / message}"), line
    assert steps == []


@pytest.mark.slow
def test_labels_with_surrounding_spaces_train_two_classes(encoder, tmp_path, capsys):
    """"pos " and "pos" are one class: the predictor knows exactly the two labels, and an eval file written without
    the spaces is scored against them."""
    train = tmp_path / "train.csv"
    train.write_text("text,label\n" + "".join(f'"{t}",{lab}{" " * (i % 2)}\n' for i, (t, lab) in enumerate(ROWS * 2)))
    dev = tmp_path / "dev.csv"
    dev.write_text("text,label\n" + "".join(f'"{t}",{lab}\n' for t, lab in ROWS))
    from bertforge.training.options import FaultHooks
    steps: list[int] = []
    out = tmp_path / "out"
    assert main(["finetune", "--model", str(encoder), "--task", "classification", "--train", str(train), "--eval",
                 str(dev), "--output", str(out), "--epochs", "1", "--batch-size", "8", "--max-seq-length", "16",
                 "--no-progress", "--device", "cpu"], hooks=FaultHooks(nan_at=lambda s: steps.append(s) and False)) == 0
    assert steps == [1, 2]  # the hook does see training steps: 16 examples in batches of 8
    assert json.loads((out / "task.json").read_text())["labels"] == ["neg", "pos"]


def test_a_setting_out_of_range_says_what_it_must_be(encoder, tmp_path, capsys):
    train = tmp_path / "train.csv"
    train.write_text("text,label\n" + "".join(f'"{t}",{lab}\n' for t, lab in ROWS))
    assert main(["finetune", "--model", str(encoder), "--task", "classification", "--train", str(train),
                 "--output", str(tmp_path / "out"), "--lr", "3e-5,0", "--no-progress", "--device", "cpu"]) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "bertforge finetune: error: --lr must be one or more rates above 0, got 3e-05,0")


EMOTIONS = ["anger", "fear", "joy", "love", "sadness", "surprise"]  # the label order fine-tuning gives them (sorted)


@pytest.mark.parametrize("delimiter", [[], ["--delimiter", ";"]], ids=["sniffed", "told"])
def test_the_emotion_tutorial_files_fine_tune_as_they_are(encoder, shared_data, tmp_path, capsys, delimiter):
    """`text;label_name` .txt files train and evaluate unchanged; the predictor folder's per-class report and
    matrix are those of the saved predictor's own answers on the eval rows, counted here from a plain split of
    val.txt and `Predictor.predict`, in the task's label order."""
    import csv

    import numpy as np

    from bertforge.tasks.predictor import Predictor
    from needs import require_path
    emotion = require_path(shared_data / "emotion", "the emotion data set ../shared/data/emotion")
    out = tmp_path / "out"
    assert main(["finetune", "--model", str(encoder), "--task", "classification", "--train",
                 str(emotion / "train.txt"), "--eval", str(emotion / "val.txt"), *delimiter, "--output", str(out),
                 "--max-train-samples", "32", "--max-eval-samples", "60", "--epochs", "1", "--batch-size", "16",
                 "--max-seq-length", "32", "--no-progress", "--device", "cpu"]) == 0
    printed = capsys.readouterr().out
    rows = [line.rsplit(";", 1) for line in (emotion / "val.txt").read_text(encoding="utf-8").splitlines()[1:61]]
    predicted = [r["label"] for r in Predictor.load(out, device="cpu").predict([t for t, _ in rows])]
    counted = np.array([[sum(g == a and p == b for (_, g), p in zip(rows, predicted)) for b in EMOTIONS]
                        for a in EMOTIONS])
    table = list(csv.reader((out / "confusion_matrix.csv").open(encoding="utf-8")))
    assert table[0][1:] == EMOTIONS == [r[0] for r in table[1:]]
    np.testing.assert_array_equal(np.array([[int(c) for c in r[1:]] for r in table[1:]]), counted)
    report = json.loads((out / "classification_report.json").read_text())
    assert list(report["per_class"]) == EMOTIONS
    assert [report["per_class"][n]["support"] for n in EMOTIONS] == counted.sum(1).tolist()
    assert report["accuracy"] == pytest.approx(json.loads((out / "metrics.json").read_text())["eval"]["accuracy"])
    assert "weighted avg" in printed and all(name in printed for name in EMOTIONS)


def test_a_wrong_delimiter_is_one_line_naming_the_file(encoder, shared_data, tmp_path, capsys):
    from needs import require_path
    train = require_path(shared_data / "emotion" / "train.txt", "the emotion data set ../shared/data/emotion")
    assert main(["finetune", "--model", str(encoder), "--task", "classification", "--train", str(train),
                 "--delimiter", ",", "--output", str(tmp_path / "out"), "--no-progress", "--device", "cpu"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"bertforge finetune: error: {train}, line 1, field 'text': expected a column named "
                              "one of"), err

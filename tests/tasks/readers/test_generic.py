"""The user's own classification tables as tutorials ship them: the ktrain emotion files (`text;label_name`, a
`.txt` with a header), read as they are, with and without `--delimiter ';'`, counted independently."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from bertforge.tasks.readers import BadRowsError, read_classification
from bertforge.tasks.task_data import DataOptions, load_task_data
from needs import require_path

EMOTIONS = {"sadness", "joy", "love", "anger", "fear", "surprise"}


def _split_count(path: Path) -> tuple[list[tuple[str, str]], Counter]:
    """(text, label) rows and label counts by splitting each line on `;` (the README: no text holds one)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "text;label_name"
    rows = [tuple(line.rsplit(";", 1)) for line in lines[1:] if line.strip()]
    return rows, Counter(label for _, label in rows)


@pytest.fixture(scope="module")
def emotion(shared_data: Path) -> Path:
    return require_path(shared_data / "emotion", "the emotion data set ../shared/data/emotion")


@pytest.mark.parametrize("delimiter", [None, ";"])
def test_the_emotion_train_file_reads_as_it_is(emotion, delimiter):
    """16,000 examples, the six names, each name's count and every text as the plain split finds them; a reader
    taking the header for a text, or splitting on `,`, or keeping one text per line would fail."""
    rows, counts = _split_count(emotion / "train.txt")
    result = read_classification(emotion / "train.txt", delimiter=delimiter, labeled=True)
    assert len(result.examples) == len(rows) == 16_000
    assert set(result.labels) == EMOTIONS == set(counts)
    assert Counter(ex.label for ex in result.examples) == counts
    assert [(ex.text, ex.label) for ex in result.examples] == rows


@pytest.mark.parametrize("delimiter", [None, ";"])
def test_finetune_data_options_read_train_and_validation(emotion, delimiter):
    data = load_task_data(None, DataOptions(task="classification", train_file=str(emotion / "train.txt"),
                                            eval_file=str(emotion / "val.txt"), delimiter=delimiter))
    val_rows, val_counts = _split_count(emotion / "val.txt")
    assert len(data.train) == 16_000 and len(data.evals["eval"]) == len(val_rows) == 2_000
    assert Counter(ex.label for ex in data.evals["eval"]) == val_counts
    assert data.labels == sorted(EMOTIONS)


def test_a_quoted_field_may_hold_the_delimiter(tmp_path):
    path = tmp_path / "quoted.txt"
    path.write_text('text;label_name\n"so tired; so sad";sadness\nplain joy;joy\n"she said ""hi"";";love\n',
                    encoding="utf-8")
    got = [(ex.text, ex.label) for ex in read_classification(path).examples]
    assert got == [("so tired; so sad", "sadness"), ("plain joy", "joy"), ('she said "hi";', "love")]


def test_a_csv_read_with_another_delimiter(tmp_path):
    path = tmp_path / "pipes.csv"
    path.write_text("text|label\na, b and c|x\nd|y\n", encoding="utf-8")
    assert [(ex.text, ex.label) for ex in read_classification(path, delimiter="|").examples] == [
        ("a, b and c", "x"), ("d", "y")]


def test_bad_rows_name_the_file_the_line_and_what_was_expected(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("text;label_name\nfine;joy\ntoo;many;fields\nno label;\n", encoding="utf-8")
    with pytest.raises(BadRowsError) as err:
        read_classification(path)
    assert str(err.value).startswith(f"{path}, line 3, field 'column 3': expected 2 fields (text, label_name), "
                                     "got 3")
    skipped = read_classification(path, skip_bad_rows=True)
    assert skipped.skipped == 2 and [ex.text for ex in skipped.examples] == ["fine"]
    assert str(skipped.skipped_samples[1]) == (f"{path}, line 4, field 'label_name': expected a label name "
                                               "(string or number), got nothing")


def test_a_txt_of_plain_lines_is_not_a_table(tmp_path):
    path = tmp_path / "lines.txt"
    path.write_text("i feel great; really\nanother, line\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"lines.txt: .* its first line is no header naming a text / sentence"):
        read_classification(path)

"""`predict --input` from record files: each head's inputs are what its fine-tuning reader reads from the same rows."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bertforge.tasks import DataError, read_swag
from bertforge.tasks.prediction_io import read_inputs
from bertforge.tasks.readers import read_ner
from record_files import record_copies


def test_ner_inputs_are_the_token_lists_of_the_training_records(tmp_path: Path) -> None:
    sentences = {"tokens": [["EU", "rejects", "German", "call"], ["Peter", "Blackburn"]],
                 "ner_tags": [["B-ORG", "O", "B-MISC", "O"], ["B-PER", "I-PER"]]}
    for path in record_copies(tmp_path, sentences, plain=True):
        assert read_inputs(path, "token_classification") == [list(s.words) for s in read_ner(path)], path
    texts = record_copies(tmp_path / "texts", {"sentence": ["EU rejects German call ."], "other": ["x"]}, plain=True)[0]
    assert read_inputs(texts, "token_classification") == ["EU rejects German call ."]  # classification's aliases
    assert read_inputs(texts, "token_classification", text_column="other") == ["x"]
    flat = record_copies(tmp_path / "flat", {"tokens": ["EU rejects", "Peter"]}, plain=True)[0]
    with pytest.raises(DataError, match=r"t.parquet, row 1, field 'tokens': expected a list, got str"):
        read_inputs(flat, "token_classification")


def test_multiple_choice_inputs_from_swag_columns_and_endings_lists(tmp_path: Path) -> None:
    swag = {"sent1": ["He rides the bike.", "She sings."], "sent2": ["He", "She"],
            "ending0": ["stops.", "stops."], "ending1": ["falls.", "bows."], "ending2": ["waves.", "hums."],
            "ending3": ["smiles.", "leaves."], "label": [2, 0]}
    for path in record_copies(tmp_path, swag, plain=True):
        want = [(ex.context, ex.start, list(ex.endings)) for ex in read_swag(path)]
        assert read_inputs(path, "multiple_choice") == want, path
    lists = tmp_path / "mc.jsonl"
    lists.write_text(json.dumps({"context": "He rides the bike.", "endings": ["stops.", "falls."]}) + "\n")
    assert read_inputs(lists, "multiple_choice") == [("He rides the bike.", "", ["stops.", "falls."])]


def test_qa_inputs_from_the_squad_layout(tmp_path: Path) -> None:
    rows = {"id": ["q1"], "context": ["The tower was finished in 1889."], "question": ["When was it finished?"],
            "answers": [{"text": ["1889"], "answer_start": [26]}]}
    for path in record_copies(tmp_path, rows):
        assert read_inputs(path, "question_answering") == [("When was it finished?", "The tower was finished in 1889.")]


def test_a_txt_table_is_read_as_a_table_and_plain_lines_stay_texts(tmp_path: Path) -> None:
    """The emotion layout (`text;label_name` header): the texts, not the header line nor `text;label` lines; a
    .txt of sentences with `;` and `,` in them is still one input per line (and a tab still makes a pair)."""
    table = tmp_path / "val.txt"
    table.write_text('text;label_name\ni feel fine;joy\n"tired; sad";sadness\n', encoding="utf-8")
    assert read_inputs(table, "sequence_classification") == ["i feel fine", "tired; sad"]
    lines = tmp_path / "lines.txt"
    lines.write_text("i feel great; really\nwell, fine\nfirst\tsecond\n", encoding="utf-8")
    assert read_inputs(lines, "sequence_classification") == ["i feel great; really", "well, fine",
                                                             ("first", "second")]

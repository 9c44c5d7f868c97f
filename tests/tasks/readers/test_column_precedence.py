"""A column named on the command line wins over the usual names a JSON Lines row also has: a row's own
`text`/`sentence`/`tokens` key must not be read instead of `--text-column` (or the anchor/positive flags), in
every reader that takes such a flag, whatever order the keys come in."""
from __future__ import annotations

import json

import pytest

from bertforge.data.sources import Columns, iter_chunks, open_sources
from bertforge.tasks.embedding.data import read_pairs
from bertforge.tasks.prediction_io import read_inputs
from bertforge.tasks.readers.generic import read_classification
from bertforge.tasks.readers.ner import read_ner

ROWS = [("right one", "pos"), ("right two", "neg")]


def jsonl(tmp_path, rows: list[dict], name: str = "data.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(params=["decoy-first", "decoy-last"])
def rows(request) -> list[dict]:
    """Each row has the wanted `body` and a decoy under every usual text name, before or after it."""
    decoys = {"text": "WRONG", "sentence": "WRONG", "sentence1": "WRONG"}
    out = []
    for body, label in ROWS:
        wanted = {"body": body, "label": label}
        out.append({**decoys, **wanted} if request.param == "decoy-first" else {**wanted, **decoys})
    return out


def test_classification_reader(tmp_path, rows):
    result = read_classification(jsonl(tmp_path, rows), text_column="body")
    assert [(ex.text, ex.label) for ex in result.examples] == ROWS


def test_predict_inputs(tmp_path, rows):
    path = jsonl(tmp_path, rows)
    assert read_inputs(path, "sequence_classification", text_column="body") == [t for t, _ in ROWS]
    assert read_inputs(path, "token_classification", text_column="body") == [t for t, _ in ROWS]


def test_prepare_rows(tmp_path, rows):
    columns = Columns("body")
    sources = open_sources([str(jsonl(tmp_path, rows))], "auto", columns)
    docs = [doc for chunk in iter_chunks(sources, columns, 1 << 20) for doc in chunk.docs]
    assert docs == [[t] for t, _ in ROWS]


def test_ner_reader(tmp_path):
    path = jsonl(tmp_path, [{"tokens": ["WRONG", "X"], "words": ["right", "one"], "tags": ["O", "B-X"]},
                            {"words": ["right", "two"], "tokens": ["WRONG", "Y"], "tags": ["B-X", "O"]}])
    assert [s.words for s in read_ner(path, text_column="words").examples] == [("right", "one"), ("right", "two")]


def test_pair_reader(tmp_path):
    path = jsonl(tmp_path, [{"anchor": "WRONG", "q": "right one", "positive": "WRONG", "d": "doc one"},
                            {"q": "right two", "anchor": "WRONG", "d": "doc two", "positive": "WRONG"}])
    pairs = read_pairs(path, anchor_column="q", positive_column="d")
    assert [(p.anchor, p.positive) for p in pairs] == [("right one", "doc one"), ("right two", "doc two")]

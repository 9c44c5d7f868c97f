"""BEIR folders that would score the wrong thing are refused naming file, line and field: an id given twice (the
later document would silently replace the first), a relevance that is not a finite integer."""
from __future__ import annotations

import json

import pytest

from bertforge.tasks.embedding.data import read_beir
from bertforge.tasks.readers.errors import DataError


def beir(tmp_path, corpus: list[dict], qrels: str, queries: list[dict] | None = None):
    root = tmp_path / "beir"
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in corpus))
    queries = queries or [{"_id": "q1", "text": "what is a cat"}]
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels)
    return root


DOCS = [{"_id": "d1", "title": "", "text": "a cat is an animal"}, {"_id": "d2", "text": "a car is a machine"}]


def test_reads_a_good_folder(tmp_path):
    data = read_beir(beir(tmp_path, DOCS, "q1\td1\t1\nq1\td2\t0\n"))
    assert data.corpus == {"d1": "a cat is an animal", "d2": "a car is a machine"} and data.qrels == {"q1": {"d1": 1}}


@pytest.mark.parametrize("name", ["corpus", "queries"])
def test_an_id_given_twice_is_refused_naming_both_lines(tmp_path, name):
    docs, queries = list(DOCS), [{"_id": "q1", "text": "what is a cat"}]
    if name == "corpus":
        docs.append({"_id": "d1", "text": "another document under the same id"})
    else:
        queries.append({"_id": "q1", "text": "another query"})
    root = beir(tmp_path, docs, "q1\td1\t1\n", queries)
    with pytest.raises(DataError) as err:
        read_beir(root)
    line = 3 if name == "corpus" else 2
    assert str(err.value) == (f"{root / (name + '.jsonl')}, line {line}, field '_id': expected each id once, got "
                              f"'{'d1' if name == 'corpus' else 'q1'}' again (first on line 1)")


@pytest.mark.parametrize("score", ["inf", "-inf", "nan", "1e400", "x"])
def test_a_relevance_that_is_no_integer_is_refused(tmp_path, score):
    root = beir(tmp_path, DOCS, f"q1\td1\t{score}\n")
    with pytest.raises(DataError, match=r"qrels/test.tsv, line 2, field 'score': expected an integer relevance"):
        read_beir(root)

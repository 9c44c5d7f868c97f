"""QA records: real SQuAD dev questions flattened to the `datasets` squad layout read as the SQuAD JSON does."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bertforge.tasks import DataError, read_squad
from bertforge.tasks.readers import read_qa
from record_files import record_copies


@pytest.fixture(scope="module")
def squad(shared_data: Path, tmp_path_factory) -> tuple[Path, list]:
    """The first paragraphs of the first two articles of the real SQuAD v1.1 dev set, as SQuAD JSON, and their
    questions."""
    from bertforge.tasks.readers import load_squad_json
    data = load_squad_json(shared_data / "squad" / "dev-v1.1.json.gz")
    path = tmp_path_factory.mktemp("squad") / "dev.json"
    articles = [dict(article, paragraphs=article["paragraphs"][:3]) for article in data["data"][:2]]
    path.write_text(json.dumps({"version": "1.1", "data": articles}), encoding="utf-8")
    return path, list(read_squad(path))


def _flat(examples) -> dict[str, list]:
    """SQuAD as `datasets` has it: one record per question, answers as parallel lists."""
    return {"id": [ex.qid for ex in examples], "title": [ex.title for ex in examples],
            "context": [ex.context for ex in examples], "question": [ex.question for ex in examples],
            "answers": [{"text": [a.text for a in ex.answers], "answer_start": [a.answer_start for a in ex.answers]}
                        for ex in examples]}


def _questions(examples) -> list[tuple]:
    return [(ex.qid, ex.question, ex.context, ex.answers, ex.is_impossible, ex.title) for ex in examples]


def test_squad_records_give_the_examples_and_features_of_the_json(squad, tmp_path: Path, minilm_dir: Path) -> None:
    from bertforge.tasks.features import encode_squad
    from bertforge.tokenization import BertTokenizer
    path, want = squad
    assert len(want) > 50 and len({ex.context for ex in want}) == 6
    tokenizer = BertTokenizer.from_pretrained(minilm_dir)
    want_features = encode_squad(tokenizer, want, max_length=128, doc_stride=64, training=True)
    jsonl = tmp_path / "dev.jsonl"
    rows = _flat(want)
    jsonl.write_text("".join(json.dumps({k: v[i] for k, v in rows.items()}) + "\n" for i in range(len(want))))
    for given in [*record_copies(tmp_path, rows, name="dev"), jsonl]:
        got = read_qa(given)
        assert _questions(got) == _questions(want), given
        assert got.version == "1.1" and got.n_articles == len({ex.context for ex in want})  # grouped by context
        if given.suffix == ".parquet":
            assert encode_squad(tokenizer, got.examples, max_length=128, doc_stride=64, training=True) == want_features


def test_unanswerable_questions_and_bad_qa_records(tmp_path: Path) -> None:
    rows = {"id": ["a", "b", "c"], "context": ["Ann sang.", "Bob ran.", "Eve hid."],
            "question": ["Who sang?", "Who flew?", "Who hid?"],
            "answers": [{"text": ["Ann"], "answer_start": [0]}, {"text": [], "answer_start": []},
                        {"text": ["Eve"], "answer_start": [0]}]}
    parquet, arrow, saved = record_copies(tmp_path, rows)
    for path in (parquet, arrow, saved):
        result = read_qa(path)
        assert [ex.is_impossible for ex in result] == [False, True, False] and result.version == "2.0", path
    wrong = dict(rows, answers=["Ann", "Bob", "Eve"])  # a string where SQuAD's answers record is expected
    for path in record_copies(tmp_path / "wrong", wrong, plain=True):
        with pytest.raises(DataError, match=rf"{path.name}, row 1, field 'answers': expected a list of "
                                            r"\{\"text\", \"answer_start\"\} or"):
            read_qa(path)
    shifted = dict(rows, answers=[{"text": ["Ann"], "answer_start": [0]}, {"text": ["Bob"], "answer_start": [-1]},
                                  {"text": ["Eve"], "answer_start": [0]}])
    parquet = record_copies(tmp_path / "shifted", shifted)[0]
    with pytest.raises(DataError, match=r"t.parquet, row 2, field 'answers\[0\].answer_start': expected a character "
                                        r"offset >= 0, got -1"):
        read_qa(parquet)
    kept = read_qa(parquet, skip_bad_rows=True)
    assert [ex.qid for ex in kept] == ["a", "c"] and kept.skipped == 1 and kept.unit == "questions"
    no_answers = record_copies(tmp_path / "none", {k: rows[k] for k in ("id", "context", "question")}, plain=True)[0]
    with pytest.raises(DataError, match=r"t.parquet, field 'answers': expected a column 'answers' \(SQuAD's flat "
                                        r"layout"):
        read_qa(no_answers)

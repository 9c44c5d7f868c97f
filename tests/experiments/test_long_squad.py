"""experiments/long_squad.py: whole-article contexts keep every answer where its offset says, the split is by
article, and each contender's score is the official SQuAD metric of its own predictions on the test articles."""
from __future__ import annotations

import gzip
import json

import pytest

from needs import require_module, require_path

import long_squad as ls  # noqa: E402


@pytest.fixture(scope="module")
def squad(shared_data):
    path = require_path(shared_data / "squad" / "dev-v1.1.json.gz", "SQuAD v1.1 dev")
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return json.load(handle)


def test_every_answer_of_the_real_dev_set_is_at_its_offset_in_the_joined_article(squad):
    articles = ls.whole_articles(squad)
    assert len(articles) == len(squad["data"]) == 48
    for joined, source in zip(articles, squad["data"]):
        (paragraph,) = joined["paragraphs"]
        assert paragraph["context"] == "\n\n".join(p["context"] for p in source["paragraphs"])
        questions = [qa for p in source["paragraphs"] for qa in p["qas"]]
        assert [qa["id"] for qa in paragraph["qas"]] == [qa["id"] for qa in questions]
        for qa, original in zip(paragraph["qas"], questions):
            for moved, answer in zip(qa["answers"], original["answers"]):
                start = moved["answer_start"]
                assert paragraph["context"][start:start + len(answer["text"])] == answer["text"]


def test_the_split_is_by_article_and_seeded(squad):
    articles = ls.whole_articles(squad)
    train, test = ls.split_articles(articles, 12, seed=0)
    assert len(test) == 12 and len(train) == 36
    assert not {a["title"] for a in train} & {a["title"] for a in test}
    assert ls.split_articles(articles, 12, seed=0) == (train, test)
    assert ls.split_articles(articles, 12, seed=1)[1] != test


def test_planted_offset_error_is_refused():
    squad = {"data": [{"title": "T", "paragraphs": [
        {"context": "alpha beta", "qas": [{"id": "a", "question": "q", "answers": [{"text": "beta", "answer_start": 6}]}]},
        {"context": "gamma delta", "qas": [{"id": "b", "question": "q", "answers": [{"text": "delta", "answer_start": 5}]}]},
    ]}]}
    with pytest.raises(ValueError, match="question b"):
        ls.whole_articles(squad)


@pytest.mark.slow
def test_contenders_are_scored_by_the_official_metric_on_the_test_articles(squad, tiny_model, tmp_path):
    """Two small articles of the real dev set, both contenders the tiny model: each result's F1 is torchmetrics'
    SQuAD F1 (the official v1.1 normalisation) of the predictions its run wrote for the test article."""
    torchmetrics = require_module("torchmetrics")
    from bertforge.results_store import read_store
    small = {"version": "1.1", "data": [dict(a, paragraphs=a["paragraphs"][:2]) for a in squad["data"][:2]]}
    source = tmp_path / "squad.json"
    source.write_text(json.dumps(small), encoding="utf-8")
    out = tmp_path / "out"
    assert ls.main(["--long", str(tiny_model), "--short", str(tiny_model), "--out", str(out), "--squad", str(source),
                    "--cpu-budget", "3s", "--test-articles", "1", "--batch-size", "4", "--epochs", "1",
                    "--test-questions", "5", "--records", str(tmp_path / "store")]) == 0
    summary = json.loads((out / "results.json").read_text())
    test = json.loads((out / "data" / "dev.json").read_text())["data"]
    train = json.loads((out / "data" / "train.json").read_text())["data"]
    assert len(test) == len(train) == 1 and test[0]["title"] != train[0]["title"]
    references = {qa["id"]: qa for p in test[0]["paragraphs"] for qa in p["qas"]}
    assert summary["test_questions"] == len(references) == 5
    for name in ("long", "short-chunks"):
        predictions = json.loads((out / f"{name}-test" / "predictions.json").read_text())
        assert set(predictions) == set(references)
        metric = torchmetrics.text.SQuAD()
        score = metric([{"prediction_text": predictions[k], "id": k} for k in references],
                       [{"answers": {"text": [a["text"] for a in qa["answers"]],
                                     "answer_start": [a["answer_start"] for a in qa["answers"]]}, "id": k}
                        for k, qa in references.items()])
        assert summary["results"][name]["f1"] == pytest.approx(float(score["f1"]), abs=1e-4)
        record = read_store(tmp_path / "store").records[f"long-squad/{name}/f1"]
        assert record.value == summary["results"][name]["f1"] and "--records" not in record.command

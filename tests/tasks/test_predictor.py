"""A fine-tuned output folder reloads as a Predictor and through the CLI (predict, evaluate)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bertforge import BertConfig, BertModel
from bertforge.cli import main
from bertforge.tasks.finetune import FinetuneSettings, finetune
from bertforge.tasks.predictor import Predictor, _entities, split_words


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory, minilm_dir) -> Path:
    from bertforge.tokenization import BertTokenizer
    out = tmp_path_factory.mktemp("tiny")
    tok = BertTokenizer.from_pretrained(minilm_dir)
    BertModel(BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=512)).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def _train(task: str, model: Path, out: Path, **kw) -> Path:
    settings = FinetuneSettings(task=task, model=str(model), output=str(out), epochs=1, batch_size=16,
                                learning_rates=[1e-4], progress=False, **kw)
    finetune(settings, say=lambda *_: None)
    return out


@pytest.fixture(scope="module")
def rte_predictor(tiny_model, shared_data, tmp_path_factory) -> Path:
    return _train("rte", tiny_model, tmp_path_factory.mktemp("rte"), data=str(shared_data / "glue"),
                  max_train_samples=32, max_eval_samples=16)


def test_pairs_predictor_reload_and_predict(rte_predictor):
    p = Predictor.load(rte_predictor)
    results = p.predict([("A man is playing.", "Someone plays."), ("It rains.", "The sun shines brightly."),
                         "a single text works too"])
    assert len(results) == 3
    for r in results:
        assert r["label"] in ("entailment", "not_entailment")
        assert abs(sum(r["scores"].values()) - 1.0) < 1e-6 and r["score"] == max(r["scores"].values())
    assert p.timing["n"] == 3 and p.timing["examples_per_second"] > 0
    # same answer as the model run directly, in the input order
    again = p.predict([("It rains.", "The sun shines brightly.")])[0]
    assert again["scores"] == pytest.approx(results[1]["scores"], abs=1e-5)


def test_evaluate_matches_training_metrics(rte_predictor, shared_data):
    saved = json.loads((rte_predictor / "metrics.json").read_text())["eval"]
    report = Predictor.load(rte_predictor).evaluate(data=str(shared_data / "glue"), max_samples=16)
    assert report["eval"]["accuracy"] == pytest.approx(saved["accuracy"])


def test_cli_predict_and_evaluate(rte_predictor, shared_data, tmp_path, capsys):
    inp = tmp_path / "in.txt"
    inp.write_text("A man is playing.\tSomeone plays.\n{\"text\": \"x\", \"text_pair\": \"y\"}\n")
    assert main(["predict", "--model", str(rte_predictor), "--input", str(inp)]) == 0
    out = capsys.readouterr()
    rows = [json.loads(line) for line in out.out.splitlines()]
    assert len(rows) == 2 and all("label" in r for r in rows)
    assert "examples/s" in out.err
    assert main(["evaluate", "--model", str(rte_predictor), "--data", str(shared_data / "glue"),
                 "--max-eval-samples", "8", "--output", str(tmp_path / "m.json")]) == 0
    assert json.loads((tmp_path / "m.json").read_text())["eval"]["n_examples"] == 8


def test_ner_and_qa_predictors(tiny_model, shared_data, tmp_path):
    ner = Predictor.load(_train("conll2003", tiny_model, tmp_path / "ner", data=str(shared_data / "conll2003"),
                                max_train_samples=16, max_eval_samples=8))
    text = "EU rejects German call to boycott British lamb ."
    r = ner.predict([text, ["Peter", "Blackburn"]])
    assert r[0]["words"] == text.split() and len(r[0]["tags"]) == 9
    for e in r[0]["entities"]:
        assert text[e["start"]:e["end"]] == e["text"]
    assert len(r[1]["tags"]) == 2
    qa = Predictor.load(_train("squad", tiny_model, tmp_path / "qa",
                               data=str(shared_data / "squad" / "dev-v1.1.json.gz"), max_seq_length=128,
                               max_train_samples=16, max_eval_samples=8))
    context = "The Eiffel Tower was finished in 1889 in Paris. " * 20  # long: several windows
    out = qa.predict([("When was the tower finished?", context)])[0]
    assert context[out["start"]:out["end"]] == out["answer"] and out["answer"]


def test_entity_spans_and_word_split():
    assert _entities(["B-PER", "I-PER", "O", "I-LOC", "B-ORG", "B-ORG"]) == [
        ("PER", 0, 1), ("LOC", 3, 3), ("ORG", 4, 4), ("ORG", 5, 5)]
    assert [w for w, _, _ in split_words("Hello, world's end.")] == ["Hello", ",", "world", "'", "s", "end", "."]

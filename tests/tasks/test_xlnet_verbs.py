"""An XLNet folder through the task verbs: `vocab` (XLNet's SentencePiece), `finetune`, `predict`, `evaluate` and
`export`, each answer checked against transformers' XLNet on its own tokenizer's (left-padded) batches.

bertforge's task batches pad on the right; XLNet's states of the real tokens do not depend on the side (its
positions and segments are relative, padding keys are hidden) and its summary reads <cls>, the last real
token, so every verb must give the numbers transformers gives on XLNet's own layout.
"""
from __future__ import annotations

import json
import random
import shutil

import numpy as np
import pytest
import torch

from bertforge.cli import main

from needs import require_module

transformers = require_module("transformers")
POSITIVE, NEGATIVE = ["good", "great", "fine"], ["bad", "awful", "poor"]
FILLER = "the a movie film was is very plot actor scene".split()


def rows(n: int, seed: int) -> list[tuple[str, str, int]]:
    """(text, pair, label): the label says whether the first text holds a positive word; the pair is noise."""
    g = random.Random(seed)
    out = []
    for _ in range(n):
        label = g.random() < 0.5
        words = [g.choice(POSITIVE if label else NEGATIVE)] + g.sample(FILLER, g.randint(1, 5))
        g.shuffle(words)
        out.append((" ".join(words), " ".join(g.sample(FILLER, g.randint(1, 4))), int(label)))
    return out


def write_csv(path, data) -> None:
    path.write_text("text,text_pair,label\n" + "".join(f"{a},{b},{y}\n" for a, b, y in data), encoding="utf-8")


@pytest.fixture(scope="module")
def predictor(tmp_path_factory):
    """A tiny XLNet with its own SentencePiece vocab (`bertforge vocab`), fine-tuned by `bertforge finetune`."""
    root = tmp_path_factory.mktemp("xlnet-verbs")
    text = root / "corpus.txt"
    text.write_text("\n".join(f"{a} {b}" for a, b, _ in rows(300, 0)) + "\n", encoding="utf-8")
    assert main(["vocab", "--type", "sentencepiece", "--family", "xlnet", "--vocab-size", "60", "--input",
                 str(text), "--output", str(root / "base"), "--no-progress"]) == 0
    from bertforge.model.xlnet import XLNetConfig, XLNetModel
    from bertforge.tokenization import load_tokenizer
    tok = load_tokenizer(root / "base")
    torch.manual_seed(0)
    XLNetModel(XLNetConfig(vocab_size=len(tok.vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=64)).save_pretrained(root / "base")
    write_csv(root / "train.csv", rows(240, 1))
    write_csv(root / "dev.csv", rows(40, 2))
    assert main(["finetune", "--model", str(root / "base"), "--task", "classification", "--train",
                 str(root / "train.csv"), "--eval", str(root / "dev.csv"), "--output", str(root / "ft"),
                 "--epochs", "6", "--batch-size", "16", "--lr", "3e-3", "--no-progress"]) == 0
    return root


def theirs_logits(folder, texts, pairs) -> np.ndarray:
    """transformers' XLNet on transformers' tokenizer of the same spiece.model: left padding, <sep> <cls>."""
    only = folder.parent / "spiece-only"
    if not only.exists():
        only.mkdir()
        shutil.copy(folder / "spiece.model", only / "spiece.model")
    tok = transformers.XLNetTokenizer.from_pretrained(str(only), do_lower_case=True)
    model = transformers.XLNetForSequenceClassification.from_pretrained(folder).eval()
    enc = tok(texts, pairs, padding=True, return_token_type_ids=True, return_tensors="pt")
    assert (enc["attention_mask"][:, -1] == 1).all(), "transformers pads XLNet on the left"
    with torch.no_grad():
        return model(**enc).logits.numpy()


def test_finetune_learns_and_predict_gives_transformers_scores(predictor, tmp_path, capsys):
    metrics = json.loads((predictor / "ft" / "metrics.json").read_text())
    assert metrics["eval"]["accuracy"] == 1.0, "a word decides the label: a working XLNet learns it"
    dev = rows(40, 2)[:12]
    write_csv(tmp_path / "in.csv", dev)
    capsys.readouterr()
    assert main(["predict", "--model", str(predictor / "ft"), "--input", str(tmp_path / "in.csv"), "--output",
                 str(tmp_path / "out.jsonl")]) == 0
    ours = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    logits = theirs_logits(predictor / "ft", [a for a, _, _ in dev], [b for _, b, _ in dev])
    probs = torch.softmax(torch.tensor(logits), -1).numpy()
    assert np.allclose([[r["scores"]["0"], r["scores"]["1"]] for r in ours], probs, atol=1e-5)


def test_evaluate_scores_as_transformers_answers(predictor, capsys):
    capsys.readouterr()
    assert main(["evaluate", "--model", str(predictor / "ft"), "--task", "classification", "--eval",
                 str(predictor / "train.csv")]) == 0
    out = capsys.readouterr().out
    reported = json.loads(out[out.index("\n{") + 1:])["eval"]
    data = rows(240, 1)
    logits = theirs_logits(predictor / "ft", [a for a, _, _ in data], [b for _, b, _ in data])
    gold = np.array([y for _, _, y in data])
    assert reported["n_examples"] == len(data)
    assert reported["accuracy"] == pytest.approx(float((logits.argmax(-1) == gold).mean()))


def test_export_onnx_reads_the_segments(predictor, tmp_path):
    ort = require_module("onnxruntime")
    out = tmp_path / "onnx"
    assert main(["export", "--model", str(predictor / "ft"), "--output", str(out)]) == 0
    session = ort.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    assert {i.name for i in session.get_inputs()} == {"input_ids", "attention_mask", "token_type_ids"}
    texts, pairs = ["good movie", "the plot was very awful"], ["a scene", "actor"]
    from bertforge.tokenization import load_tokenizer
    enc = load_tokenizer(predictor / "ft")(texts, pairs, padding=True, return_tensors="np")
    got = session.run(None, {i.name: enc[i.name].astype(np.int64) for i in session.get_inputs()})[0]
    assert np.allclose(got, theirs_logits(predictor / "ft", texts, pairs), atol=1e-4)


def test_serve_answers_with_transformers_scores(predictor):
    from bertforge.serving.served_model import ServedModel
    served = ServedModel(predictor / "ft")
    assert "predict" in served.endpoints
    texts = ["good movie", "the plot was very awful", "a scene"]
    answers = served.predict_batch(texts)
    only = predictor / "spiece-only-single"
    only.mkdir(exist_ok=True)
    shutil.copy(predictor / "ft" / "spiece.model", only / "spiece.model")
    tok = transformers.XLNetTokenizer.from_pretrained(str(only), do_lower_case=True)
    model = transformers.XLNetForSequenceClassification.from_pretrained(predictor / "ft").eval()
    with torch.no_grad():
        probs = torch.softmax(model(**tok(texts, padding=True, return_token_type_ids=True,
                                          return_tensors="pt")).logits, -1).numpy()
    assert np.allclose([[a["scores"]["0"], a["scores"]["1"]] for a in answers], probs, atol=1e-5)

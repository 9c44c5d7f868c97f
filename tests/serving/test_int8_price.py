"""`export --quantize int8 --calibrate-on FILE`: the metric change it reports is what an independent evaluation of
the written int8 graph (and of the fp32 model) gives, and a model that loses too much is not written at all."""
from __future__ import annotations

import csv
import json
import random

import numpy as np
import pytest

from bertforge.cli import main

from needs import require_module

require_module("onnxruntime")
pytestmark = pytest.mark.slow

WORDS = ("good bad great awful fine dull warm cold bright dark film plot actor scene story music ending pace "
         "charming tedious brilliant boring clever silly").split()


def _sentences(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 14))) for _ in range(n)]


@pytest.fixture(scope="module")
def tiny_classifier(tiny_model, tmp_path_factory):
    """The tiny random BERT with a seeded random two-label head: a predictor folder in seconds."""
    import shutil

    import torch

    from bertforge.model.auto import model_class_for
    folder = tmp_path_factory.mktemp("tiny-classifier")
    torch.manual_seed(1)
    model = model_class_for(tiny_model, "sequence_classification").from_pretrained(
        tiny_model, id2label={0: "neg", 1: "pos"})
    model.save_pretrained(folder)
    for name in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.json"):
        if (tiny_model / name).is_file():
            shutil.copy2(tiny_model / name, folder / name)
    task = {"task": "classification", "head": "sequence_classification", "labels": ["neg", "pos"],
            "max_seq_length": 32}
    (folder / "task.json").write_text(json.dumps(task), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def labelled_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("dev") / "dev.csv"
    rng = random.Random(5)
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label"])
        for text in _sentences(96, 3):
            writer.writerow([text, rng.choice(["neg", "pos"])])
    return path


def _read_rows(path):
    with path.open(encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _onnx_logits(model_file, tokenizer, texts, pairs=None, name="logits"):
    import onnxruntime as ort
    session = ort.InferenceSession(str(model_file), providers=["CPUExecutionProvider"])
    enc = tokenizer(texts, pairs, padding=True, truncation=True, max_length=32, return_tensors="np")
    given = {**enc, "token_type_ids": enc.get("token_type_ids", np.zeros_like(enc["input_ids"]))}
    feed = {i.name: np.asarray(given[i.name]).astype("int64") for i in session.get_inputs()}
    return session.run([name], feed)[0], enc["attention_mask"]


def test_reported_accuracy_drop_equals_an_independent_evaluation(tiny_classifier, labelled_file, tmp_path):
    """The fp32 accuracy is transformers' model's on the file, the int8 one the written graph's run by onnxruntime
    itself, each scored by scikit-learn; the reported drop is their difference."""
    import torch
    transformers = require_module("transformers")
    from sklearn.metrics import accuracy_score
    out = tmp_path / "int8"
    assert main(["export", "--model", str(tiny_classifier), "--output", str(out), "--quantize", "int8",
                 "--calibrate-on", str(labelled_file), "--max-drop", "100"]) == 0
    price = json.loads((out / "onnx.json").read_text())["int8_price"]
    rows = _read_rows(labelled_file)
    texts, gold = [r["text"] for r in rows], [r["label"] for r in rows]
    tokenizer = transformers.BertTokenizerLegacy(str(tiny_classifier / "vocab.txt"))
    logits, _ = _onnx_logits(out / "model.onnx", tokenizer, texts)
    int8 = 100 * accuracy_score(gold, [["neg", "pos"][i] for i in logits.argmax(1)])
    reference = transformers.AutoModelForSequenceClassification.from_pretrained(str(tiny_classifier)).eval()
    with torch.no_grad():
        enc = tokenizer(texts, padding=True, truncation=True, max_length=32, return_tensors="pt")
        fp32 = 100 * accuracy_score(gold, [["neg", "pos"][i] for i in reference(**enc).logits.argmax(1).tolist()])
    assert price["metric"] == "accuracy" and price["examples"] == len(rows)
    assert price["int8"] == pytest.approx(int8, abs=1e-9)
    assert price["fp32"] == pytest.approx(fp32, abs=1e-9)
    assert price["drop"] == pytest.approx(fp32 - int8, abs=1e-9)
    assert price["fp32_seconds"] > 0 and price["int8_seconds"] > 0


def test_a_model_losing_more_than_max_drop_is_not_written(tiny_classifier, labelled_file, tmp_path, capsys):
    """--max-drop -50 asks int8 to gain 50 points: it cannot, so nothing is written and the refusal is one line;
    --force writes it and records that it was forced."""
    out = tmp_path / "refused"
    argv = ["export", "--model", str(tiny_classifier), "--output", str(out), "--quantize", "int8",
            "--calibrate-on", str(labelled_file), "--max-drop", "-50"]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "loses more than --max-drop -50 points; no model written" in err[0], err
    assert "accuracy" in err[0] and not out.exists()
    assert main([*argv, "--force"]) == 0
    info = json.loads((out / "onnx.json").read_text())
    assert info["int8_price"]["forced"] is True and (out / "model.onnx").is_file()


def test_calibrate_on_needs_quantize(tiny_classifier, labelled_file, tmp_path, capsys):
    assert main(["export", "--model", str(tiny_classifier), "--output", str(tmp_path / "x"),
                 "--calibrate-on", str(labelled_file)]) == 1
    assert "needs --quantize int8" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def _mean_pooled(model_file, tokenizer, texts):
    """The graph's token vectors mean-pooled in numpy. int8 quantizes activations per call, so the graph is run
    on the batches embedding runs on: texts longest first (by characters), 32 at a time."""
    vectors = None
    order = np.argsort([-len(t) for t in texts], kind="stable")
    for start in range(0, len(texts), 32):
        idx = order[start:start + 32]
        hidden, mask = _onnx_logits(model_file, tokenizer, [texts[i] for i in idx], name="last_hidden_state")
        pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
        if vectors is None:
            vectors = np.zeros((len(texts), pooled.shape[1]), dtype=np.float32)
        vectors[idx] = pooled
    return vectors


def test_embedding_spearman_equals_an_independent_evaluation(tiny_model, tmp_path):
    """An encoder folder on scored pairs (JSON Lines text, text_pair, label): the int8 Spearman is scipy's over the
    cosine of the written graph's token vectors mean-pooled in numpy."""
    from scipy.stats import spearmanr
    transformers = require_module("transformers")
    pairs = tmp_path / "pairs.jsonl"
    rng = random.Random(7)
    rows = [{"text": a, "text_pair": b, "label": round(rng.uniform(0, 5), 2)}
            for a, b in zip(_sentences(48, 11), _sentences(48, 12))]
    pairs.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "int8"
    assert main(["export", "--model", str(tiny_model), "--output", str(out), "--quantize", "int8",
                 "--calibrate-on", str(pairs), "--max-drop", "100"]) == 0
    price = json.loads((out / "onnx.json").read_text())["int8_price"]
    tokenizer = transformers.BertTokenizerLegacy(str(tiny_model / "vocab.txt"))
    a, b = (_mean_pooled(out / "model.onnx", tokenizer, [r[k] for r in rows]) for k in ("text", "text_pair"))
    cosine = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    expected = 100 * spearmanr(cosine, [r["label"] for r in rows]).statistic
    assert price["metric"] == "spearman" and price["examples"] == len(rows)
    assert price["int8"] == pytest.approx(expected, abs=1e-4)


def test_embedding_ndcg_on_a_beir_folder_equals_an_independent_evaluation(tiny_model, tmp_path, capsys):
    """An encoder folder with a BEIR folder: the int8 nDCG@10 is scikit-learn's over the cosine of the written
    graph's mean-pooled vectors, ranking the whole corpus for every query of qrels/dev.tsv (not test.tsv)."""
    from sklearn.metrics import ndcg_score
    transformers = require_module("transformers")
    docs, queries = _sentences(40, 21), _sentences(12, 22)
    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", "title": "", "text": t}) + "\n"
                                               for i, t in enumerate(docs)), encoding="utf-8")
    (beir / "queries.jsonl").write_text("".join(json.dumps({"_id": f"q{i}", "text": t}) + "\n"
                                                for i, t in enumerate(queries)), encoding="utf-8")
    relevant = {i: {(3 * i) % 40, (3 * i + 7) % 40} for i in range(len(queries))}  # two relevant documents each
    (beir / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"q{i}\td{d}\t1\n" for i, ds in relevant.items() for d in sorted(ds)), encoding="utf-8")
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq0\td0\t1\n", encoding="utf-8")
    out = tmp_path / "int8"
    assert main(["export", "--model", str(tiny_model), "--output", str(out), "--quantize", "int8",
                 "--calibrate-on", str(beir), "--max-drop", "100"]) == 0
    price = json.loads((out / "onnx.json").read_text())["int8_price"]
    tokenizer = transformers.BertTokenizerLegacy(str(tiny_model / "vocab.txt"))
    q = _mean_pooled(out / "model.onnx", tokenizer, queries)
    d = _mean_pooled(out / "model.onnx", tokenizer, docs)
    cosine = (q / np.linalg.norm(q, axis=1, keepdims=True)) @ (d / np.linalg.norm(d, axis=1, keepdims=True)).T
    truth = np.array([[1.0 if j in relevant[i] else 0.0 for j in range(len(docs))] for i in range(len(queries))])
    assert price["metric"] == "ndcg@10" and price["examples"] == len(queries)
    assert price["int8"] == pytest.approx(100 * ndcg_score(truth, cosine, k=10), abs=1e-4)
    assert "(12 queries): ndcg@10" in capsys.readouterr().err


def test_a_folder_that_is_not_beir_is_refused_in_one_line_naming_the_flag(tiny_model, tmp_path, capsys):
    folder = tmp_path / "not-beir"
    folder.mkdir()
    (folder / "queries.jsonl").write_text('{"_id": "q0", "text": "a question"}\n', encoding="utf-8")
    out = tmp_path / "int8"
    assert main(["export", "--model", str(tiny_model), "--output", str(out), "--quantize", "int8",
                 "--calibrate-on", str(folder)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bertforge export: error: --calibrate-on") and "corpus.jsonl" in err[0]
    assert not out.exists()

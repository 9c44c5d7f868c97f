"""A fine-tuned output folder reloads as a Predictor and through the CLI (predict, evaluate)."""
from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from bertforge.cli import main
from bertforge.tasks.finetune import FinetuneSettings, finetune
from bertforge.tasks.prediction_inputs import iob2_spans, split_words
from bertforge.tasks.predictor import Predictor


def _train(task: str, model: Path, out: Path, **kw) -> Path:
    settings = FinetuneSettings(task=task, model=str(model), output=str(out), epochs=1, batch_size=16,
                                learning_rates=[1e-4], progress=False, **kw)
    finetune(settings, say=lambda *_: None)
    return out


@pytest.fixture(scope="module")
def rte_predictor(tiny_model, shared_data, tmp_path_factory) -> Path:
    return _train("rte", tiny_model, tmp_path_factory.mktemp("rte"), data=str(shared_data / "glue"),
                  max_train_samples=32, max_eval_samples=16)


@pytest.mark.slow
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


@pytest.mark.slow
def test_evaluate_matches_training_metrics(rte_predictor, shared_data):
    saved = json.loads((rte_predictor / "metrics.json").read_text())["eval"]
    report = Predictor.load(rte_predictor).evaluate(data=str(shared_data / "glue"), max_samples=16)
    assert report["eval"]["accuracy"] == pytest.approx(saved["accuracy"])


@pytest.mark.slow
def test_cli_predict_and_evaluate(rte_predictor, shared_data, tmp_path, capsys):
    inp = tmp_path / "in.txt"
    inp.write_text("A man is playing.\tSomeone plays.\n{\"text\": \"x\", \"text_pair\": \"y\"}\n")
    assert main(["predict", "--model", str(rte_predictor), "--input", str(inp)]) == 0
    out = capsys.readouterr()
    rows = [json.loads(line) for line in out.out.splitlines()]
    assert len(rows) == 2 and all("label" in r for r in rows)
    assert "examples/s" in out.err
    assert main(["evaluate", "--model", str(rte_predictor), "--data", str(shared_data / "glue"),
                 "--max-eval-samples", "8", "--output", str(tmp_path / "out")]) == 0
    assert json.loads((tmp_path / "out" / "metrics.json").read_text())["eval"]["n_examples"] == 8


@pytest.mark.slow
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
    assert iob2_spans(["B-PER", "I-PER", "O", "I-LOC", "B-ORG", "B-ORG"]) == [
        ("PER", 0, 1), ("LOC", 3, 3), ("ORG", 4, 4), ("ORG", 5, 5)]
    assert [w for w, _, _ in split_words("Hello, world's end.")] == ["Hello", ",", "world", "'", "s", "end", "."]


# ---- any device, any precision, any model object; token-budget batches ------------------------------------------
@pytest.fixture(scope="module")
def sst2_dev(shared_data) -> list[str]:
    from bertforge.tasks.readers import read_glue
    return [ex.text for ex in read_glue("sst2", shared_data / "glue" / "SST-2" / "dev.tsv").examples]


@pytest.fixture(scope="module")
def minilm_sst2(minilm_dir, tmp_path_factory) -> Path:
    from predictor_folders import minilm_predictor
    return minilm_predictor(tmp_path_factory.mktemp("minilm-sst2"), minilm_dir)


@pytest.fixture(scope="module")
def hf_sst2(minilm_sst2):
    """`transformers`' own class on the same predictor folder (loaded once: it is slow to load)."""
    from transformers import AutoModelForSequenceClassification
    return AutoModelForSequenceClassification.from_pretrained(minilm_sst2).eval()


def _hf_probs(model, folder: Path, texts: list[str]):
    import torch
    from transformers import BertTokenizerFast
    tok = BertTokenizerFast(str(folder / "vocab.txt"), do_lower_case=True)
    with torch.no_grad():
        enc = tok(texts, padding=True, truncation=True, max_length=128, return_tensors="pt")
        return model(**enc).logits.double().softmax(-1).numpy()


@pytest.mark.slow
def test_predictor_matches_transformers_on_real_weights_in_input_order(minilm_sst2, hf_sst2, sst2_dev):
    import numpy as np
    texts = sst2_dev[:40]
    # a small token budget: many batches of different sizes, run longest first, results back in input order
    p = Predictor.load(minilm_sst2, device="cpu", precision="fp32", max_batch_tokens=300)
    assert p.device.type == "cpu" and str(p.precision) == "fp32"
    got = np.array([[r["scores"]["0"], r["scores"]["1"]] for r in p.predict(texts, batch_size=16)])
    want = _hf_probs(hf_sst2, minilm_sst2, texts)
    assert np.abs(got - want).max() < 1e-5
    assert want[:, 1].std() > 0.02  # the classifier tells sentences apart: not a constant


@pytest.mark.slow
def test_bf16_on_cpu_agrees_with_fp32(minilm_sst2, sst2_dev):
    import numpy as np
    texts = sst2_dev[40:72]
    fp32 = Predictor.load(minilm_sst2, device="cpu", precision="fp32").predict(texts)
    bf16 = Predictor.load(minilm_sst2, device="cpu", precision="bf16")
    assert str(bf16.precision) == "bf16"
    low = bf16.predict(texts)
    a = np.array([r["scores"]["1"] for r in fp32])
    b = np.array([r["scores"]["1"] for r in low])
    assert np.abs(a - b).max() < 0.05           # bf16 keeps ~3 significant digits through 6 layers
    assert np.abs(a - b).max() > 0              # and it really ran in bf16
    assert (np.array([r["label"] for r in fp32]) == np.array([r["label"] for r in low])).mean() >= 0.9


@pytest.mark.slow
def test_any_callable_model_object_works(minilm_sst2, hf_sst2, sst2_dev):
    """The serving engineer's ONNX Runtime wrapper: only `.eval()` and a call returning `.logits`."""
    import types

    import numpy as np
    import torch

    class Wrapped:
        def __init__(self, model):
            self._model = model

        def eval(self):
            return None  # not `self`: nothing may rely on what eval returns

        def __call__(self, input_ids, token_type_ids, attention_mask):
            with torch.no_grad():
                out = self._model(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask)
            return types.SimpleNamespace(logits=out.logits.numpy())  # numpy out, as onnxruntime gives

    ref = Predictor.load(minilm_sst2, device="cpu", precision="fp32")
    p = Predictor(Wrapped(hf_sst2), ref.tokenizer, ref.task)
    assert p.device.type == "cpu"
    texts = sst2_dev[:12]
    got = [r["scores"]["1"] for r in p.predict(texts)]
    want = [r["scores"]["1"] for r in ref.predict(texts)]
    assert np.allclose(got, want, atol=1e-5)


def test_token_budget_batches_cap_padded_tokens_and_cover_everything():
    import random

    from bertforge.tasks.features import token_budget_batches
    rng = random.Random(0)
    lengths = [rng.randint(3, 128) for _ in range(500)]
    batches = token_budget_batches(lengths, max_rows=64, max_tokens=1024)
    assert sorted(i for b in batches for i in b) == list(range(500))
    for b in batches:
        assert len(b) <= 64
        assert len(b) * max(lengths[i] for i in b) <= 1024
    # longest first, and batches are as full as the budget allows
    assert lengths[batches[0][0]] == max(lengths)
    assert len(batches) <= 1.2 * sum(lengths) / 1024 + 64
    # one feature over the budget gets a batch of its own; multiple-choice features count their rows
    assert token_budget_batches([500, 10, 10], 8, 100) == [[0], [1, 2]]
    assert token_budget_batches([10, 10, 10], 8, 60, rows=[4, 4, 4]) == [[0], [1], [2]]
    with pytest.raises(ValueError, match="max_batch_tokens"):
        token_budget_batches([1], 8, 0)


def test_device_and_precision_flags(tiny_sst2, capsys):
    with pytest.raises(ValueError, match="fp16 needs a CUDA"):
        Predictor.load(tiny_sst2, device="cpu", precision="fp16")
    with pytest.raises(ValueError, match="unknown device"):
        Predictor.load(tiny_sst2, device="tpu")
    auto = Predictor.load(tiny_sst2)
    import torch
    if not torch.cuda.is_available():
        assert auto.device.type == "cpu" and str(auto.precision) == "fp32"  # "auto" on a CPU machine
        assert main(["predict", "--model", str(tiny_sst2), "--text", "hi", "--device", "cuda"]) == 1
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and "--device cuda was asked for but torch sees no CUDA device" in err


# ---- inputs capped in characters --------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_5mb_input_is_cut_before_tokenization_and_in_bounded_memory(minilm_sst2, sst2_dev, monkeypatch):
    import tracemalloc
    p = Predictor.load(minilm_sst2, device="cpu", precision="fp32", max_chars=100_000)
    huge = (sst2_dev[0] + " ") * (5_000_000 // (len(sst2_dev[0]) + 1))
    assert len(huge) > 4_900_000
    seen: list[int] = []  # the characters of every text the tokenizer is given
    tokenize = type(p.tokenizer).__call__

    def recording(self, text, text_pair=None, **kwargs):
        seen.extend(len(t) for t in ([text] if isinstance(text, str) else text))
        return tokenize(self, text, text_pair, **kwargs)
    monkeypatch.setattr(type(p.tokenizer), "__call__", recording)
    tracemalloc.start()
    result = p.predict([huge, sst2_dev[1]])
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert seen and max(seen) == 100_000, "the tokenizer never sees more than max_chars characters of a text"
    assert peak < 64 * 2**20
    assert result[0]["truncated"] is True and "truncated" not in result[1]
    # the cut keeps the start: the same answer as the first max_chars characters
    assert result[0]["scores"] == pytest.approx(p.predict([huge[:100_000]])[0]["scores"], abs=1e-6)
    with pytest.raises(ValueError, match="input 1: text must be a string"):
        p.predict(["fine", None])


# ---- validation when a predictor loads --------------------------------------------------------------------------
def _one_line_error(folder: Path, capsys) -> str:
    assert main(["predict", "--model", str(folder), "--text", "hello"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    return err


@pytest.fixture()
def tiny_sst2(tmp_path, minilm_dir) -> Path:
    from predictor_folders import tiny_predictor
    return tiny_predictor(tmp_path / "p", minilm_dir, "sst2", "sequence_classification", ["0", "1"])


@pytest.mark.parametrize("task_json, message", [
    (None, "has no task.json"),
    ("{not json", "task.json: not valid JSON (line 1"),
    ('["sst2"]', "expected a JSON object, got list"),
    ('{"task": "sst2"}', "field 'head' is missing"),
    ('{"task": "sst7", "head": "sequence_classification"}', "field 'task' is 'sst7', not a known task"),
    ('{"task": "sst2", "head": "token_classification"}', "task sst2 needs 'sequence_classification'"),
    ('{"task": "sst2", "head": "sequence_classification", "labels": "0,1"}', "field 'labels': expected a list"),
    ('{"task": "sst2", "head": "sequence_classification", "labels": {"a": "x"}}', "must map label ids"),
    ('{"task": "sst2", "head": "sequence_classification", "labels": ["0", "1", "2"]}',
     "lists 3 labels but the sequence_classification head has 2 outputs"),
    ('{"task": "sst2", "head": "sequence_classification", "max_seq_length": "long"}',
     "field 'max_seq_length' must be a positive integer"),
    ('{"task": "sst2", "head": "sequence_classification", "max_seq_length": 4096}',
     "'max_seq_length' is 4096 but the model has 512 positions"),
])
def test_bad_task_json_is_refused_in_one_line(tiny_sst2, capsys, task_json, message):
    if task_json is None:
        (tiny_sst2 / "task.json").unlink()
    else:
        (tiny_sst2 / "task.json").write_text(task_json)
    assert message in _one_line_error(tiny_sst2, capsys)


def test_a_classifier_whose_task_json_says_ner_is_refused(tiny_sst2, capsys):
    """A sequence classifier's weights have the shapes a 2-tag token tagger's would: only config.json's
    architectures (the class that saved them) tells; the unedited folder still loads."""
    assert Predictor.load(tiny_sst2).head == "sequence_classification"
    (tiny_sst2 / "task.json").write_text('{"task": "ner", "head": "token_classification", "labels": ["O", "B-X"]}')
    err = _one_line_error(tiny_sst2, capsys)
    assert "field 'head' is 'token_classification' but config.json says the weights are a " \
           "BertForSequenceClassification head" in err, err


def test_labels_as_id_object_or_from_config_are_handled(tiny_sst2):
    want = Predictor.load(tiny_sst2).predict(["a fine film"])[0]
    (tiny_sst2 / "task.json").write_text('{"task": "sst2", "head": "sequence_classification", '
                                         '"labels": {"1": "1", "0": "0"}}')
    assert Predictor.load(tiny_sst2).predict(["a fine film"])[0] == want
    (tiny_sst2 / "task.json").write_text('{"task": "sst2", "head": "sequence_classification"}')
    assert Predictor.load(tiny_sst2).labels == ["0", "1"]  # config.json's id2label


def test_config_id2label_as_list_is_refused(tiny_sst2, capsys):
    config = json.loads((tiny_sst2 / "config.json").read_text())
    config["id2label"] = ["0", "1"]
    (tiny_sst2 / "config.json").write_text(json.dumps(config))
    assert "config.json: field 'id2label' must be an object" in _one_line_error(tiny_sst2, capsys)


def test_checkpoint_without_head_weights_is_refused(tiny_model, tmp_path, capsys):
    """An encoder-only checkpoint (no classifier) loads as a head class with a random head: refuse it."""
    import shutil

    from predictor_folders import write_task
    folder = tmp_path / "encoder-only"
    shutil.copytree(tiny_model, folder)
    write_task(folder, "sst2", "sequence_classification", ["0", "1"])
    err = _one_line_error(folder, capsys)
    assert "the checkpoint lacks" in err and "classifier.weight" in err and "head would be random" in err


def test_nan_weights_are_refused(tiny_sst2, capsys):
    from safetensors.torch import load_file, save_file
    state = load_file(tiny_sst2 / "model.safetensors")
    state["classifier.weight"][0, 3] = float("nan")
    save_file(state, tiny_sst2 / "model.safetensors", metadata={"format": "pt"})
    assert "holds NaN or infinite values" in _one_line_error(tiny_sst2, capsys)


def test_vocabulary_bigger_than_embedding_table_is_refused(tmp_path, minilm_dir, capsys):
    from predictor_folders import tiny_predictor
    folder = tiny_predictor(tmp_path / "small-vocab", minilm_dir, "sst2", "sequence_classification", ["0", "1"],
                            vocab_size=1000)
    err = _one_line_error(folder, capsys)
    assert "the tokenizer has 30522 tokens but the embedding table only 1000 rows" in err


@pytest.mark.parametrize("hostile", ["link_out", "fifo"])
def test_task_json_is_read_only_as_a_regular_file_inside_the_folder(tmp_path_factory, hostile):
    from bertforge.tasks.predictor import PredictorError, read_task_file

    from hostile_files import fifo
    folder, outside = tmp_path_factory.mktemp("predictor"), tmp_path_factory.mktemp("outside")
    (outside / "task.json").write_text(json.dumps({"task": "sst2", "head": "sequence_classification"}))
    with fifo(folder / "task.json") if hostile == "fifo" else contextlib.nullcontext():
        if hostile == "link_out":
            (folder / "task.json").symlink_to(outside / "task.json")
        with pytest.raises(PredictorError) as err:
            read_task_file(folder)
    expected = "outside the folder" if hostile == "link_out" else "a FIFO"
    assert str(folder / "task.json") in str(err.value) and expected in str(err.value)

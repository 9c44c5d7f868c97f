"""`bertforge serve` with long inputs (`ServeSettings.long`, the `LongInputOptions` part): /predict under chunk
answers what `Predictor.predict` answers with the same options (classification and token classification, a
request's long input and its short one), refuse answers 413 naming the input (classification, and a question
answering context that needs several windows) and never a 500, the embedding endpoints answer the encoder's
chunked vectors, and the flags reach the model from the command line."""
from __future__ import annotations

import httpx
import numpy as np
import pytest

from bertforge.serving.app import create_app
from bertforge.serving.embeddings import Pooling, SentenceEncoder
from bertforge.serving.served_model import ServedModel
from bertforge.serving.settings import ServeSettings, ServerSettings
from bertforge.settings import SettingError
from bertforge.tasks.long_inputs import LongInputOptions
from bertforge.tasks.predictor import Predictor
from bertforge.tasks.readers import CONLL2003_LABELS

from predictor_folders import tiny_encoder, tiny_predictor

from .conftest import running, serve_process

LENGTH = 32
CHUNK = LongInputOptions(max_seq_length=LENGTH, long_inputs="chunk", chunk_stride=10)


def words(vocab_dir, count: int, seed: int = 0) -> list[str]:
    """`count` whole-word vocabulary entries (seeded): one WordPiece token each."""
    lines = (vocab_dir / "vocab.txt").read_text(encoding="utf-8").splitlines()
    pool = [w for w in lines[3000:8000] if w.isalpha() and w.isascii()][:2000]
    return [str(w) for w in np.random.default_rng(seed).choice(pool, size=count)]


@pytest.fixture(scope="module")
def classifier(vocab_dir, tmp_path_factory):
    return tiny_predictor(tmp_path_factory.mktemp("sst2"), vocab_dir, "sst2", "sequence_classification", ["0", "1"],
                          initializer_range=0.2)


def post(url: str, inputs) -> httpx.Response:
    return httpx.post(url + "/predict", json={"inputs": inputs}, timeout=60)


@pytest.mark.slow
def test_chunk_answers_what_the_predictor_answers_with_chunks(classifier):
    """A text 4x the window and a short one in one request: the answers are `Predictor.predict`'s with the same
    long-input options (the long one read in windows, which a truncated read does not match)."""
    long, short = " ".join(words(classifier, 120)), "a short text"
    with running(create_app(ServedModel(classifier, device="cpu", precision="fp32"), ServeSettings(long=CHUNK))) as url:
        r = post(url, [long, short])
    assert r.status_code == 200, r.text
    want = Predictor.load(classifier, "cpu", "fp32", long_inputs=CHUNK).predict([long, short])
    truncated = Predictor.load(classifier, "cpu", "fp32",
                               long_inputs=LongInputOptions(max_seq_length=LENGTH)).predict([long])[0]
    for got, ref in zip(r.json(), want):
        assert got["label"] == ref["label"]
        np.testing.assert_allclose(got["scores"]["1"], ref["scores"]["1"], atol=1e-6)
    assert abs(r.json()[0]["scores"]["1"] - truncated["scores"]["1"]) > 1e-4


@pytest.mark.slow
def test_chunk_refuses_a_pair_whose_second_text_fills_the_window(classifier):
    """Each window holds a pair's second text whole: one that leaves no room for the first is 413 naming the
    input, before the model's batch (where it would have failed every request sharing it with a 500)."""
    second = " ".join(words(classifier, 40, seed=2))
    with running(create_app(ServedModel(classifier, device="cpu", precision="fp32"), ServeSettings(long=CHUNK))) as url:
        r = post(url, ["fine", {"text": "a first text", "text_pair": second}])
        ok = post(url, [{"text": " ".join(words(classifier, 60, seed=4)), "text_pair": "a short second text"}])
    assert r.status_code == 413, r.text
    assert r.json()["error"] == ("inputs[1]: its second text takes 43 of the 32 tokens of a window (with the special "
                                 "tokens), leaving none for the first")
    assert ok.status_code == 200, ok.text


@pytest.mark.slow
def test_chunk_tags_a_long_sentence_as_the_predictor_does(vocab_dir, tmp_path):
    tagger = tiny_predictor(tmp_path / "ner", vocab_dir, "conll2003", "token_classification", CONLL2003_LABELS,
                            initializer_range=0.2)
    sentence = words(vocab_dir, 80, seed=1)
    with running(create_app(ServedModel(tagger, device="cpu", precision="fp32"), ServeSettings(long=CHUNK))) as url:
        r = post(url, [sentence, " ".join(sentence[:5])])
    assert r.status_code == 200, r.text
    want = Predictor.load(tagger, "cpu", "fp32", long_inputs=CHUNK).predict([sentence, " ".join(sentence[:5])])
    assert r.json() == want
    assert len(r.json()[0]["tags"]) == 80


@pytest.mark.slow
def test_refuse_answers_413_naming_the_input_never_500(classifier, vocab_dir, tmp_path):
    """Under refuse a classifier's long input is 413 naming `inputs[1]`, with --auto-truncate too; a question
    answering context that needs more than one window is 413 naming `inputs[0]` (inside the model's batch it
    would have been a 500); the short inputs of the same server are answered."""
    long = " ".join(words(vocab_dir, 60))
    refuse = LongInputOptions(max_seq_length=LENGTH, long_inputs="refuse")
    for auto_truncate in (False, True):
        settings = ServeSettings(long=refuse, auto_truncate=auto_truncate)
        with running(create_app(ServedModel(classifier, device="cpu", precision="fp32"), settings)) as url:
            r = post(url, ["short enough", long])
            ok = post(url, ["short enough"])
        assert r.status_code == 413, r.text
        assert r.json()["error"] == f"inputs[1] has more than {LENGTH} tokens; this model takes at most {LENGTH}"
        assert r.json()["type"] == "input_too_long" and ok.status_code == 200
    reader = tiny_predictor(tmp_path / "qa", vocab_dir, "squad", "question_answering")
    with running(create_app(ServedModel(reader, device="cpu", precision="fp32"),
                            ServeSettings(long=LongInputOptions(max_seq_length=64, long_inputs="refuse")))) as url:
        r = post(url, [{"question": "what is it?", "context": long}])
        ok = post(url, [{"question": "what is it?", "context": "it is a short context"}])
    assert r.status_code == 413, r.text
    assert r.json()["error"].startswith("inputs[0]: its context needs ") and "windows of 64 tokens" in r.json()["error"]
    assert ok.status_code == 200, ok.text


@pytest.mark.slow
def test_embeddings_under_chunk_and_refuse(vocab_dir, tmp_path):
    """An encoder served with chunk answers /v1/embeddings with `SentenceEncoder`'s chunked vectors (and counts
    every token of the long text); with refuse a long text is 413 naming `input[0]`."""
    folder = tiny_encoder(tmp_path / "encoder", vocab_dir)
    Pooling("mean", True, 64).save(folder, 128)
    long = " ".join(words(vocab_dir, 100, seed=5))
    with running(create_app(ServedModel(folder, device="cpu", precision="fp32"), ServeSettings(long=CHUNK))) as url:
        r = httpx.post(url + "/v1/embeddings", json={"input": [long, "short"]}, timeout=60)
    assert r.status_code == 200, r.text
    want = SentenceEncoder.load(folder, long_inputs=CHUNK).encode([long, "short"])
    np.testing.assert_allclose([d["embedding"] for d in r.json()["data"]], want, atol=1e-6)
    assert r.json()["usage"]["prompt_tokens"] == 102 + 3
    cut = SentenceEncoder.load(folder, long_inputs=LongInputOptions(max_seq_length=LENGTH)).encode([long])[0]
    assert not np.allclose(r.json()["data"][0]["embedding"], cut, atol=1e-4)
    refuse = ServeSettings(long=LongInputOptions(max_seq_length=LENGTH, long_inputs="refuse"), auto_truncate=True)
    with running(create_app(ServedModel(folder, device="cpu", precision="fp32"), refuse)) as url:
        r = httpx.post(url + "/v1/embeddings", json={"input": [long]}, timeout=60)
    assert r.status_code == 413 and r.json()["error"].startswith(f"input[0] has more than {LENGTH} tokens")


def test_multiple_choice_refuses_chunk_when_the_app_is_made(vocab_dir, tmp_path):
    chooser = tiny_predictor(tmp_path / "swag", vocab_dir, "swag", "multiple_choice")
    with pytest.raises(SettingError, match="chunk reads classification.*a multiple_choice model truncates"):
        create_app(ServedModel(chooser, device="cpu", precision="fp32"), ServeSettings(long_inputs="chunk"))


def test_serve_flags_are_the_long_input_settings():
    """--max-seq-length, --long-inputs and --chunk-stride are flags of serve, read into `ServeSettings.long`."""
    from bertforge.cli import build_parser
    from bertforge.commands.flags import settings_from_args
    args = build_parser().parse_args(["serve", "--model", "m", "--long-inputs", "chunk", "--chunk-stride", "7",
                                      "--max-seq-length", "64"])
    settings = settings_from_args(ServerSettings, args)
    assert settings.limits.long == LongInputOptions(max_seq_length=64, long_inputs="chunk", chunk_stride=7)
    assert settings_from_args(ServerSettings, build_parser().parse_args(["serve", "--model", "m"])) == \
        ServerSettings(model="m")


@pytest.mark.slow
def test_bertforge_serve_chunk_reaches_the_predictor(classifier):
    """`bertforge serve --long-inputs chunk --chunk-stride 10 --max-seq-length 32` in its own process answers a
    long text as `Predictor.predict` with those options."""
    long = " ".join(words(classifier, 100, seed=3))
    with serve_process(classifier, "--long-inputs", "chunk", "--chunk-stride", "10", "--max-seq-length",
                       str(LENGTH)) as (url, _):
        r = post(url, [long])
        info = httpx.get(url + "/info", timeout=10).json()
    assert r.status_code == 200, r.text
    want = Predictor.load(classifier, "cpu", "fp32", long_inputs=CHUNK).predict([long])[0]
    np.testing.assert_allclose(r.json()[0]["scores"]["1"], want["scores"]["1"], atol=1e-6)
    assert info["long_inputs"] == "chunk" and info["max_input_length"] == LENGTH

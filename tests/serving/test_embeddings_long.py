"""Sentence embeddings of texts longer than the encoder reads (`SentenceEncoder` with `LongInputOptions`, and
`bertforge embed --long-inputs`): chunk against transformers' BertModel run by hand on each window, pooled and
averaged with the windows' token counts as weights; a text that fits is embedded as with truncation; refuse
names the text."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from bertforge.serving.embeddings import Pooling, SentenceEncoder
from bertforge.settings import SettingError
from bertforge.tasks.long_inputs import LongInputOptions

from needs import require_module
from predictor_folders import tiny_encoder

transformers = require_module("transformers")
LENGTH = 32  # tokens per window


@pytest.fixture(scope="module")
def encoder_folder(vocab_dir, tmp_path_factory) -> Path:
    """A tiny random BERT with sentence-transformers files: mean pooling, normalised, 64 tokens."""
    out = tiny_encoder(tmp_path_factory.mktemp("encoder"), vocab_dir)
    Pooling("mean", True, 64).save(out, 128)
    return out


def text(vocab_dir: Path, count: int, seed: int = 0) -> str:
    lines = (vocab_dir / "vocab.txt").read_text(encoding="utf-8").splitlines()
    pool = [w for w in lines[3000:8000] if w.isalpha() and w.isascii()][:2000]
    return " ".join(np.random.default_rng(seed).choice(pool, size=count))


def by_hand(folder: Path, value: str, stride: int, mode: str, normalize: bool) -> np.ndarray:
    """transformers' BertModel on [CLS] ids[s:s+30] [SEP], s = 0, stride, ... until a window reaches the text's
    end; each window mean- or CLS-pooled; their mean weighted by each window's tokens; unit length if asked."""
    tok = transformers.BertTokenizerFast.from_pretrained(folder)
    model = transformers.BertModel.from_pretrained(folder).eval()
    ids = tok(value, add_special_tokens=False)["input_ids"]
    room, starts = LENGTH - 2, [0]
    while starts[-1] + room < len(ids):
        starts.append(starts[-1] + stride)
    vectors, weights = [], []
    with torch.no_grad():
        for s in starts:
            row = [tok.cls_token_id] + ids[s:s + room] + [tok.sep_token_id]
            hidden = model(input_ids=torch.tensor([row])).last_hidden_state[0].double()
            vectors.append((hidden.mean(0) if mode == "mean" else hidden[0]).numpy())
            weights.append(len(row))
    assert len(starts) >= 3, "the text spans several windows"
    out = np.average(vectors, axis=0, weights=weights)
    return out / np.linalg.norm(out) if normalize else out


@pytest.mark.parametrize("stride, mode", [(None, "mean"), (11, "mean"), (11, "cls")])
def test_chunk_is_the_token_weighted_mean_of_each_windows_vector(encoder_folder, vocab_dir, stride, mode):
    """A text 4x the window: its vector is the windows' pooled vectors (transformers, by hand) averaged with their
    token counts as weights, then normalised as the folder says (mean) or not (cls, asked without); the short text
    in the same call is exactly its truncated vector."""
    long, short = text(vocab_dir, 4 * LENGTH), "a short text"
    options = LongInputOptions(max_seq_length=LENGTH, long_inputs="chunk", chunk_stride=stride)
    chunked = SentenceEncoder.load(encoder_folder, long_inputs=options)
    normalize = mode == "mean"
    got = chunked.encode([long, short], pooling=mode, normalize=normalize)
    np.testing.assert_allclose(got[0], by_hand(encoder_folder, long, stride or LENGTH // 2, mode, normalize),
                               atol=1e-5)
    cut = SentenceEncoder.load(encoder_folder, long_inputs=LongInputOptions(max_seq_length=LENGTH))
    assert np.array_equal(chunked.encode([short], pooling=mode, normalize=normalize),
                          cut.encode([short], pooling=mode, normalize=normalize))
    np.testing.assert_allclose(got[1], cut.encode([short], pooling=mode, normalize=normalize)[0], atol=1e-6)
    assert not np.allclose(got[0], cut.encode([long], pooling=mode, normalize=normalize)[0], atol=1e-4)


def test_refuse_names_the_text_and_a_length_past_the_positions_is_refused(encoder_folder, vocab_dir):
    refusing = SentenceEncoder.load(encoder_folder, long_inputs=LongInputOptions(max_seq_length=LENGTH,
                                                                                 long_inputs="refuse"))
    assert refusing.encode(["short enough"]).shape == (1, 128)
    with pytest.raises(SettingError, match=r"^text 1 has \d+ tokens, more than --max-seq-length 32 \(with "
                                           r"--long-inputs refuse\)$"):
        refusing.encode(["short enough", text(vocab_dir, 100)])
    with pytest.raises(SettingError, match="--max-seq-length is 600 but the model reads at most 512 tokens"):
        SentenceEncoder.load(encoder_folder, long_inputs=LongInputOptions(max_seq_length=600))


def test_bertforge_embed_chunk_writes_the_chunked_vectors(encoder_folder, vocab_dir, tmp_path, capsys):
    """`bertforge embed --max-seq-length 32 --long-inputs chunk --chunk-stride 11` writes the library's chunked
    vectors; with refuse it stops in one line naming the text and the flags."""
    from bertforge.cli import main
    long = text(vocab_dir, 100, seed=1)
    out = tmp_path / "v.jsonl"
    flags = ["--max-seq-length", str(LENGTH), "--chunk-stride", "11"]
    assert main(["embed", "--model", str(encoder_folder), "--text", long, "--text", "short", "--output", str(out),
                 "--device", "cpu", *flags, "--long-inputs", "chunk"]) == 0
    rows = [json.loads(line)["embedding"] for line in out.read_text().splitlines()]
    want = SentenceEncoder.load(encoder_folder, long_inputs=LongInputOptions(
        max_seq_length=LENGTH, long_inputs="chunk", chunk_stride=11)).encode([long, "short"])
    np.testing.assert_allclose(rows, want, atol=1e-6)
    np.testing.assert_allclose(rows[0], by_hand(encoder_folder, long, 11, "mean", True), atol=1e-5)
    capsys.readouterr()
    assert main(["embed", "--model", str(encoder_folder), "--text", "short", "--text", long, "--output",
                 str(tmp_path / "r.npy"), "--device", "cpu", *flags, "--long-inputs", "refuse"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("bertforge embed: error: text 1 has ") and err.endswith(
        "tokens, more than --max-seq-length 32 (with --long-inputs refuse)\n")
    assert not (tmp_path / "r.npy").exists()

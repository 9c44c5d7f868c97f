"""SentenceEncoder against sentence-transformers on the real all-MiniLM-L6-v2 folder."""
from __future__ import annotations

import numpy as np
import pytest

from bertforge.serving.embeddings import Pooling, SentenceEncoder

from needs import require_module

pytestmark = pytest.mark.slow  # real weights and sentence-transformers

TEXTS = ["A man is playing a guitar.", "The new movie is awesome!",
         "Paris is the capital of France, and it has been for a very long time, said the guide.",
         "short", "Un texte en français avec des accents: été, où, ça."]


@pytest.fixture(scope="module")
def encoder(minilm_dir):
    return SentenceEncoder.load(minilm_dir)


def test_folder_declares_mean_pooling_and_normalize(minilm_dir):
    assert Pooling.from_folder(minilm_dir) == Pooling("mean", True, 256)


def test_matches_sentence_transformers(encoder, st_model):
    ours = encoder.encode(TEXTS, batch_size=2)
    ref = st_model.encode(TEXTS, batch_size=2, convert_to_numpy=True)
    assert ours.shape == ref.shape == (len(TEXTS), 384)
    np.testing.assert_allclose(ours, ref, atol=1e-5)


@pytest.mark.parametrize("mode", ["cls", "max"])
def test_other_poolings_match_transformers_hidden_states(encoder, minilm_dir, mode):
    transformers = require_module("transformers")
    import torch
    tok = transformers.AutoTokenizer.from_pretrained(str(minilm_dir))
    model = transformers.AutoModel.from_pretrained(str(minilm_dir)).eval()
    enc = tok(TEXTS, padding=True, truncation=True, max_length=256, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**enc).last_hidden_state
    if mode == "cls":
        ref = hidden[:, 0]
    else:
        ref = hidden.masked_fill(enc["attention_mask"][..., None] == 0, -1e9).max(1).values
    ours = encoder.encode(TEXTS, pooling=mode, normalize=False)
    np.testing.assert_allclose(ours, ref.numpy(), atol=1e-5)


def test_truncates_to_the_folder_length(encoder, st_model):
    long_text = " ".join(["word"] * 400)
    ours = encoder.encode([long_text])
    np.testing.assert_allclose(ours, st_model.encode([long_text]), atol=1e-5)
    assert encoder.token_counts([long_text])[0] == 402


def test_rejects_a_bare_string(encoder):
    with pytest.raises(TypeError, match="list of texts"):
        encoder.encode("one text")

"""Pooling counts real tokens only: against a numpy reference on random states, and end to end, a text's vector
is the same alone (no padding) as in a batch beside a much longer text (mostly padding), and the same as
sentence-transformers gives for the folder. Fast: the tiny random encoder."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from bertforge.tasks.embedding.pooling import Pooling, embed_texts, pool
from needs import require_module

TEXTS = ["short", "a much longer text about a castle near the ocean and a violin on a desert planet", "x y"]


def reference(hidden: np.ndarray, mask: np.ndarray, mode: str) -> np.ndarray:
    """Row by row over the real tokens, with numpy."""
    rows = []
    for h, m in zip(hidden, mask.astype(bool)):
        real = h[m]
        rows.append(real.mean(0) if mode == "mean" else real.max(0) if mode == "max" else h[0])
    return np.stack(rows)


@pytest.mark.parametrize("mode", ["mean", "max", "cls"])
def test_pool_over_real_tokens_equals_numpy(mode):
    rng = np.random.default_rng(0)
    hidden = rng.normal(size=(4, 9, 5)).astype(np.float32) * 3
    lengths = [9, 1, 4, 6]
    mask = np.array([[1] * n + [0] * (9 - n) for n in lengths], dtype=np.int64)
    hidden[mask == 0] += 100.0  # padding positions far from the real ones: counting them moves the vector
    got = pool(torch.from_numpy(hidden), torch.from_numpy(mask), mode).numpy()
    np.testing.assert_allclose(got, reference(hidden, mask, mode), rtol=1e-6, atol=1e-5)


@pytest.fixture(scope="module")
def tiny(tiny_st_folder):
    from bertforge.model.auto import AutoModel
    from bertforge.tokenization import load_tokenizer
    return AutoModel.from_pretrained(tiny_st_folder).eval(), load_tokenizer(tiny_st_folder)


@pytest.mark.parametrize("mode", ["mean", "max"])
def test_padding_does_not_change_a_texts_vector(tiny, mode):
    model, tokenizer = tiny
    kwargs = {"mode": mode, "normalize": False, "max_length": 64}
    batched = embed_texts(model, tokenizer, TEXTS, batch_size=len(TEXTS), **kwargs)
    alone = embed_texts(model, tokenizer, TEXTS, batch_size=1, **kwargs)
    assert np.abs(batched[0] - batched[1]).max() > 1e-2  # the texts do differ
    np.testing.assert_allclose(batched, alone, atol=1e-5)


def test_vectors_equal_sentence_transformers_on_a_padded_batch(tiny, tiny_st_folder):
    st = require_module("sentence_transformers").SentenceTransformer(str(tiny_st_folder), device="cpu")
    model, tokenizer = tiny
    declared = Pooling.from_folder(tiny_st_folder)
    ours = embed_texts(model, tokenizer, TEXTS, mode=declared.mode, normalize=declared.normalize,
                       max_length=declared.max_seq_length, batch_size=len(TEXTS))
    np.testing.assert_allclose(ours, st.encode(TEXTS, batch_size=len(TEXTS)), atol=1e-5)

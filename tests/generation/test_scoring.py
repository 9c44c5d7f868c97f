"""Pseudo-log-likelihood against a plain loop over masked copies, run by `transformers` as the oracle."""
from __future__ import annotations

import pytest
import torch

from bertforge.generation import pseudo_log_likelihood
from tests.generation.conftest import sentence

from needs import require_module

transformers = require_module("transformers")

TEXTS = [sentence(0), sentence(3, 2, 6), "k5w0 k1w1 k5w2", sentence(7, 0, 1), "k2w3 k2w4 k6w5 k2w6 k2w7 k4w0"]


def reference_pll(folder, tokenizer, text: str) -> list[float]:
    """Salazar et al.'s definition written out: one forward per masked copy, log-softmax at the mask."""
    model = transformers.BertForMaskedLM.from_pretrained(folder).eval()
    ids = tokenizer.encode(text)
    special = set(tokenizer.all_special_ids)
    scores = []
    for i, token in enumerate(ids):
        if token in special:
            continue
        copy = list(ids)
        copy[i] = tokenizer.mask_token_id
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([copy])).logits[0, i]
        scores.append(logits.double().log_softmax(-1)[token].item())
    return scores


@pytest.mark.parametrize("max_tokens", [8192, 25])   # one batch; many batches that split sentences
def test_pll_equals_a_loop_over_masked_copies_in_transformers(sentences_model_dir, sentences_mlm, max_tokens):
    model, tokenizer = sentences_mlm
    results = pseudo_log_likelihood(model, tokenizer, TEXTS, per_token=True, max_tokens=max_tokens)
    assert [r["text"] for r in results] == TEXTS
    for text, result in zip(TEXTS, results):
        expected = reference_pll(sentences_model_dir, tokenizer, text)
        assert result["tokens"] == text.split()
        assert result["token_scores"] == pytest.approx(expected, abs=1e-5)
        assert result["pll"] == pytest.approx(sum(expected), abs=1e-5)


def test_pll_ranks_language_above_scrambled_text(sentences_mlm):
    model, tokenizer = sentences_mlm
    good, mixed = pseudo_log_likelihood(model, tokenizer, [sentence(4), "k4w0 k1w1 k4w2 k6w3 k4w4 k4w5 k2w6 k4w7"])
    assert good["pll"] > mixed["pll"] + 5


def test_pll_rejects_text_longer_than_the_model(sentences_mlm):
    from bertforge.generation import GenerationInputError
    model, tokenizer = sentences_mlm
    with pytest.raises(GenerationInputError, match=r"^doc\.txt:2: 32 tokens .* at most 24$"):
        pseudo_log_likelihood(model, tokenizer, [sentence(0), " ".join([sentence(1)] * 3 + ["k1w0"] * 6)],
                              labels=["doc.txt:1", "doc.txt:2"])


def test_bf16_autocast_is_close_to_fp32(sentences_mlm):
    """bf16 (an opt-in for speed) moves each token's log-probability by little; fp32 stays the default."""
    model, tokenizer = sentences_mlm
    fp32 = pseudo_log_likelihood(model, tokenizer, TEXTS, per_token=True)
    bf16 = pseudo_log_likelihood(model, tokenizer, TEXTS, per_token=True, precision="bf16")
    for a, b in zip(fp32, bf16):
        assert b["token_scores"] == pytest.approx(a["token_scores"], abs=0.1)
    assert any(a["pll"] != b["pll"] for a, b in zip(fp32, bf16))  # it did run in bf16

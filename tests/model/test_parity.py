"""bertforge's BERT against `transformers` (the oracle): random configs, real weights, both directions."""
from __future__ import annotations

import pytest
import torch

from bertforge import BertConfig, BertForMaskedLM, BertForPreTraining, BertModel

from needs import require_module

transformers = require_module("transformers")


def hf_config(config: BertConfig) -> "transformers.BertConfig":
    return transformers.BertConfig(**{k: v for k, v in config.to_dict().items() if k != "model_type"})


def random_batch(vocab: int, batch: int = 4, seq: int = 17, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (batch, seq), generator=g)
    lengths = torch.tensor([seq, seq - 5, 3, seq - 1])[:batch]
    mask = (torch.arange(seq)[None] < lengths[:, None]).long()
    ids = ids * mask  # [PAD] = 0 on padding, as a tokenizer would give
    types = (torch.arange(seq)[None] >= (lengths[:, None] // 2)).long() * mask
    return ids, mask, types


@pytest.mark.parametrize("act", ["gelu", "gelu_new", "relu"])
def test_bert_for_pretraining_matches_transformers_both_ways(tmp_path, act):
    config = BertConfig(vocab_size=120, hidden_size=48, num_hidden_layers=3, num_attention_heads=4,
                        intermediate_size=96, hidden_act=act, max_position_embeddings=64)
    torch.manual_seed(0)
    ours = BertForPreTraining(config).eval()
    ours.save_pretrained(tmp_path / "ours")
    theirs = transformers.BertForPreTraining.from_pretrained(tmp_path / "ours").eval()
    ids, mask, types = random_batch(config.vocab_size)
    labels = torch.full_like(ids, -100)
    labels[0, 3], labels[1, 5], labels[3, 10] = 7, 9, 11
    nsp = torch.tensor([0, 1, 1, 0])
    with torch.no_grad():
        a = ours(ids, attention_mask=mask, token_type_ids=types, labels=labels, next_sentence_label=nsp)
        b = theirs(input_ids=ids, attention_mask=mask, token_type_ids=types, labels=labels,
                   next_sentence_label=nsp)
        full = ours(ids, attention_mask=mask, token_type_ids=types)
    real = mask.bool()
    assert (full.prediction_logits[real] - b.prediction_logits[real]).abs().max() < 1e-5
    # with labels the decoder ran on the 3 labelled rows only, in row-major order
    assert a.prediction_logits.shape == (3, config.vocab_size)
    assert torch.allclose(a.prediction_logits, b.prediction_logits[labels != -100], atol=1e-5)
    assert torch.allclose(a.seq_relationship_logits, b.seq_relationship_logits, atol=1e-5)
    assert abs(a.loss.item() - b.loss.item()) < 1e-5

    # and the other way: an HF-saved folder loads into bertforge with the same outputs
    theirs.save_pretrained(tmp_path / "theirs")
    again = BertForPreTraining.from_pretrained(tmp_path / "theirs").eval()
    assert again.loading_info == {"newly_initialized": [], "unused": []}
    with torch.no_grad():
        c = again(ids, attention_mask=mask, token_type_ids=types)
    assert (c.prediction_logits[real] - b.prediction_logits[real]).abs().max() < 1e-5


def test_hidden_states_and_masked_lm_match(tmp_path):
    config = BertConfig.preset("tiny", vocab_size=90)
    theirs = transformers.BertForMaskedLM(hf_config(config)).eval()
    theirs.save_pretrained(tmp_path)
    ours = BertForMaskedLM.from_pretrained(tmp_path).eval()
    ids, mask, types = random_batch(config.vocab_size, seed=1)
    with torch.no_grad():
        a = ours(ids, attention_mask=mask, token_type_ids=types, output_hidden_states=True)
        b = theirs(input_ids=ids, attention_mask=mask, token_type_ids=types, output_hidden_states=True)
    real = mask.bool()
    assert len(a.hidden_states) == len(b.hidden_states) == config.num_hidden_layers + 1
    for x, y in zip(a.hidden_states, b.hidden_states):
        assert (x[real] - y[real]).abs().max() < 1e-5
    assert (a.logits[real] - b.logits[real]).abs().max() < 1e-5


def test_real_minilm_weights_match_transformers(minilm_dir):
    require_module("bertforge.tokenization")
    from bertforge.tokenization import BertTokenizer
    sentences = ["The quick brown fox jumps over the lazy dog.",
                 "BERT is pre-trained with masked language modelling and next sentence prediction.",
                 "Paris", "Zürich's café serves crème brûlée — naïvely priced at 12,50 €!"]
    pairs = ["Is it fast?", "It is exact.", "", "Où est la gare ?"]
    tok = BertTokenizer.from_pretrained(minilm_dir)
    enc = tok(sentences, pairs, padding=True, return_tensors="pt")
    ours = BertModel.from_pretrained(minilm_dir).eval()
    theirs = transformers.BertModel.from_pretrained(minilm_dir).eval()
    with torch.no_grad():
        a = ours(enc["input_ids"], attention_mask=enc["attention_mask"], token_type_ids=enc["token_type_ids"])
        b = theirs(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                   token_type_ids=enc["token_type_ids"])
    real = enc["attention_mask"].bool()
    assert real.sum() < real.numel()  # the batch really has padding
    assert (a.last_hidden_state[real] - b.last_hidden_state[real]).abs().max() <= 1e-5
    assert (a.pooler_output - b.pooler_output).abs().max() <= 1e-5


def test_real_minilm_into_pretraining_class_reports_new_heads(minilm_dir):
    model = BertForPreTraining.from_pretrained(minilm_dir)
    new = model.loading_info["newly_initialized"]
    assert "cls.seq_relationship.weight" in new and "cls.predictions.transform.dense.weight" in new
    assert not any(name.startswith(("bert.", "embeddings", "encoder")) for name in new)

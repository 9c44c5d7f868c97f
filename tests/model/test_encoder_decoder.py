"""The encoder–decoder against transformers' `EncoderDecoderModel` / `BertLMHeadModel`, both ways."""
from __future__ import annotations

import json

import pytest
import torch

from bertforge import BertConfig
from bertforge.config import ConfigError
from bertforge.model.encoder_decoder import BertLMHeadModel, EncoderDecoderConfig, EncoderDecoderModel

from needs import require_module

transformers = require_module("transformers")

SIZES = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
             max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def _inputs(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(5, 99, (3, 11), generator=g)
    src_mask = torch.ones_like(src)
    src_mask[1, 7:] = 0
    src_mask[2, 4:] = 0
    tgt = torch.randint(5, 99, (3, 6), generator=g)
    tgt_mask = torch.ones_like(tgt)
    tgt_mask[0, 4:] = 0
    return src, src_mask, tgt, tgt_mask


def assert_same_logits(hf, ours, inputs) -> None:
    """transformers' decoder runs left to right: ours matches it in causal mode, at every real target token."""
    src, src_mask, tgt, tgt_mask = inputs
    with torch.no_grad():
        want = hf(input_ids=src, attention_mask=src_mask, decoder_input_ids=tgt,
                  decoder_attention_mask=tgt_mask).logits
        got = ours(src, src_mask, tgt, tgt_mask, causal=True).logits
    real = tgt_mask.bool()
    torch.testing.assert_close(got[real], want[real], atol=1e-5, rtol=1e-5)


def _hf_encoder_decoder(seed: int = 0):
    torch.manual_seed(seed)
    enc = transformers.BertModel(transformers.BertConfig(**SIZES))
    dec = transformers.BertLMHeadModel(transformers.BertConfig(**SIZES, is_decoder=True, add_cross_attention=True))
    return transformers.EncoderDecoderModel(encoder=enc, decoder=dec).eval()


def test_decoder_matches_transformers_bert_lm_head_model(tmp_path):
    torch.manual_seed(0)
    hf = transformers.BertLMHeadModel(transformers.BertConfig(**SIZES, is_decoder=True,
                                                              add_cross_attention=True)).eval()
    hf.save_pretrained(tmp_path)
    ours = BertLMHeadModel.from_pretrained(tmp_path).eval()
    assert ours.loading_info["newly_initialized"] == []
    _, _, tgt, tgt_mask = _inputs()
    memory = torch.randn(3, 9, 32)
    memory_mask = torch.ones(3, 9, dtype=torch.long)
    memory_mask[0, 5:] = 0
    with torch.no_grad():
        want = hf(tgt, attention_mask=tgt_mask, encoder_hidden_states=memory,
                  encoder_attention_mask=memory_mask).logits
        got = ours(tgt, attention_mask=tgt_mask, encoder_hidden_states=memory, encoder_attention_mask=memory_mask,
                   causal=True).logits
        both_ways = ours(tgt, attention_mask=tgt_mask, encoder_hidden_states=memory,
                         encoder_attention_mask=memory_mask).logits
    real = tgt_mask.bool()
    torch.testing.assert_close(got[real], want[real], atol=1e-5, rtol=1e-5)
    # our default is the conditional MLM's bidirectional decoder: position 0 now sees the tokens after it
    assert (both_ways[0, 0] - want[0, 0]).abs().max() > 1e-3


def test_transformers_checkpoint_loads_and_matches(tmp_path):
    hf = _hf_encoder_decoder()
    hf.config.decoder_start_token_id = 2
    hf.config.pad_token_id = 0
    hf.save_pretrained(tmp_path)
    ours = EncoderDecoderModel.from_pretrained(tmp_path).eval()
    assert_same_logits(hf, ours, _inputs())


def test_our_checkpoint_loads_in_transformers_and_matches(tmp_path):
    config = EncoderDecoderConfig(BertConfig(**SIZES), BertConfig(**SIZES), max_target_length=8,
                                  decoder_start_token_id=2)
    torch.manual_seed(1)
    ours = EncoderDecoderModel(config).eval()
    ours.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["model_type"] == "encoder-decoder" and saved["decoder"]["add_cross_attention"] is True
    hf, info = transformers.EncoderDecoderModel.from_pretrained(tmp_path, output_loading_info=True)
    hf.eval()
    # the encoder's pooler, which EncoderDecoderModel never runs, is all transformers does not find
    assert sorted(info["missing_keys"]) == ["encoder.pooler.dense.bias", "encoder.pooler.dense.weight"]
    assert sorted(info["unexpected_keys"]) == ["length_predictor.bias", "length_predictor.weight"]
    assert_same_logits(hf, ours, _inputs(3))
    # and back: the length predictor survives our own round trip
    again = EncoderDecoderModel.from_pretrained(tmp_path)
    torch.testing.assert_close(again.length_predictor.weight, ours.length_predictor.weight)


def test_padding_does_not_change_a_row():
    """The decoder's packed self-attention and padded cross-attention give each row what it gets alone."""
    torch.manual_seed(0)
    model = EncoderDecoderModel(EncoderDecoderConfig(BertConfig(**SIZES), BertConfig(**SIZES))).eval()
    src, src_mask, tgt, tgt_mask = _inputs()
    with torch.no_grad():
        batch = model(src, src_mask, tgt, tgt_mask).logits
        for row in range(3):
            s, t = int(src_mask[row].sum()), int(tgt_mask[row].sum())
            alone = model(src[row:row + 1, :s], None, tgt[row:row + 1, :t]).logits
            torch.testing.assert_close(batch[row, :t], alone[0], atol=1e-5, rtol=1e-5)


def test_warm_start_loads_both_halves_and_only_cross_attention_is_new(minilm_dir):
    model = EncoderDecoderModel.from_encoder_decoder_pretrained(minilm_dir, minilm_dir, max_target_length=32)
    reference = transformers.BertModel.from_pretrained(minilm_dir)
    torch.testing.assert_close(model.encoder.embeddings.word_embeddings.weight,
                               reference.embeddings.word_embeddings.weight)
    torch.testing.assert_close(model.decoder.bert.embeddings.word_embeddings.weight,
                               reference.embeddings.word_embeddings.weight)
    new = model.decoder.loading_info["newly_initialized"]
    assert new and all("crossattention" in n or n.startswith("cls.") for n in new)
    assert model.config.decoder_start_token_id == 101  # [CLS] of the uncased vocabulary


def test_cross_attention_cannot_share_layers():
    from bertforge.config import ConfigError
    with pytest.raises(ConfigError, match="add_cross_attention"):
        BertConfig(**SIZES, add_cross_attention=True, layer_sharing="all")


def test_sizes_of_either_half_are_checked_against_the_weights_before_loading(tmp_path, monkeypatch):
    import bertforge.checkpoint as checkpoint
    from bertforge import CheckpointError
    config = EncoderDecoderConfig(BertConfig(**SIZES), BertConfig(**SIZES), max_target_length=8)
    EncoderDecoderModel(config).save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    monkeypatch.setattr(checkpoint, "read_tensors", lambda weights: pytest.fail("the weights were read"))
    for half, change, held in (("encoder", {"num_hidden_layers": 3}, "hold 2 layers"),
                               ("decoder", {"vocab_size": 120}, "hold 99 ("),
                               ("decoder", {"intermediate_size": 40}, "hold 37 (")):
        (tmp_path / "config.json").write_text(json.dumps({**saved, half: {**saved[half], **change}}))
        with pytest.raises(CheckpointError) as err:
            EncoderDecoderModel.from_pretrained(tmp_path)
        field, value = next(iter(change.items()))
        assert f"config.json ({half}): '{field}' is {value}" in str(err.value) and held in str(err.value)
    (tmp_path / "config.json").write_text(json.dumps({**saved, "max_target_length": 20}))
    with pytest.raises(CheckpointError, match="'max_target_length' is 20 but the weights .* hold 8"):
        EncoderDecoderModel.from_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**saved, "max_target_length": 10 ** 9}))
    with pytest.raises(ConfigError, match="max_target_length must be a whole number from 1 to 65,536"):
        EncoderDecoderModel.from_pretrained(tmp_path)

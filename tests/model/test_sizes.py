from __future__ import annotations

import pytest

from bertforge import BertConfig, BertForPreTraining, BertModel
from bertforge.config import ConfigError
from bertforge.model import count_flops

from needs import require_module


@pytest.mark.parametrize("name", ["tiny", "mini", "base"])
def test_parameter_counts_equal_transformers(name):
    transformers = require_module("transformers")
    config = BertConfig.preset(name)
    hf = transformers.BertConfig(**{k: v for k, v in config.to_dict().items() if k != "model_type"})
    assert BertModel(config).num_parameters() == transformers.BertModel(hf).num_parameters()
    assert BertForPreTraining(config).num_parameters() == transformers.BertForPreTraining(hf).num_parameters()


def test_base_is_the_papers_110m():
    assert round(BertModel(BertConfig.preset("base")).num_parameters() / 1e6) == 109  # "110M" in the paper


def test_tied_decoder_counted_once():
    config = BertConfig.preset("tiny")
    assert BertForPreTraining(config).num_parameters() - BertModel(config).num_parameters() == (
        config.hidden_size * config.hidden_size + config.hidden_size  # transform
        + 2 * config.hidden_size                                        # its LayerNorm
        + config.vocab_size                                             # decoder bias (weight is tied)
        + 2 * config.hidden_size + 2)                                   # NSP


def test_flop_count_by_hand():
    c = BertConfig(vocab_size=10, hidden_size=4, num_hidden_layers=1, num_attention_heads=1, intermediate_size=8)
    # per token: 2*(4*16 + 2*4*8) = 256; attention for L=3: 2*2*9*4 = 144; decoder for 1 masked row: 2*(16+40)=112
    assert count_flops(c, [3], n_masked=1) == 3 * 256 + 144 + 112
    assert count_flops(c, [3], n_masked=1, training=True) == 3 * (3 * 256 + 144 + 112)


def test_presets_and_bad_configs():
    assert BertConfig.preset("large").intermediate_size == 4096
    with pytest.raises(ConfigError, match="divisible"):
        BertConfig(hidden_size=100, num_attention_heads=3)
    with pytest.raises(ConfigError, match="unknown model preset"):
        BertConfig.preset("huge")
    with pytest.raises(ConfigError, match="hidden_act"):
        BertConfig(hidden_act="swiglu")

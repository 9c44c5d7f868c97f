"""Auto classes pick the family from config.json; `load_tokenizer` picks the tokenizer from the files."""
from __future__ import annotations

import json

import pytest

from bertforge import AutoConfig, AutoModel, AutoModelForPreTraining, AutoModelForSequenceClassification
from bertforge import BertConfig, BertForPreTraining, BertForSequenceClassification, BertModel
from bertforge.model.auto import preset_config
from bertforge.tokenization import BertTokenizer, load_tokenizer


def _tiny() -> BertConfig:
    return BertConfig.preset("tiny", vocab_size=99, max_position_embeddings=32)


def test_auto_loads_the_class_the_role_asks_for(tmp_path):
    BertForPreTraining(_tiny()).save_pretrained(tmp_path)
    assert type(AutoModel.from_pretrained(tmp_path)) is BertModel
    assert type(AutoModelForPreTraining.from_pretrained(tmp_path)) is BertForPreTraining
    head = AutoModelForSequenceClassification.from_pretrained(tmp_path)
    assert type(head) is BertForSequenceClassification
    assert "classifier.weight" in head.loading_info["newly_initialized"]
    assert type(AutoConfig.from_pretrained(tmp_path)) is BertConfig
    assert type(AutoModel.from_config(_tiny())) is BertModel


def test_config_without_model_type_is_bert_and_unknown_type_is_an_error(tmp_path):
    BertModel(_tiny()).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    del config["model_type"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert type(AutoModel.from_pretrained(tmp_path)) is BertModel
    config["model_type"] = "gpt2"
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="unknown model_type 'gpt2'"):
        AutoModel.from_pretrained(tmp_path)
    with pytest.raises(TypeError, match="from_pretrained"):
        AutoModel()


def test_preset_names_with_and_without_family():
    assert preset_config("bert-mini", vocab_size=500) == BertConfig.preset("mini", vocab_size=500)
    assert preset_config("mini") == BertConfig.preset("mini")
    with pytest.raises(ValueError, match="unknown model preset"):
        preset_config("bert-huge")


def test_load_tokenizer_by_folder_contents(minilm_dir, tmp_path):
    assert isinstance(load_tokenizer(minilm_dir), BertTokenizer)
    with pytest.raises(FileNotFoundError, match="no tokenizer files"):
        load_tokenizer(tmp_path)
    with pytest.raises(FileNotFoundError, match="no such tokenizer folder"):
        load_tokenizer(tmp_path / "missing")

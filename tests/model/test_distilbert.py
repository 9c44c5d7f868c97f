"""DistilBERT against `transformers` (the oracle): random-init small configs, padded batches, both directions."""
from __future__ import annotations

import json

import pytest
import torch

from bertforge.config import ConfigError
from bertforge.model.auto import AutoConfig, AutoModelForPreTraining, family, preset_config
from bertforge.model.distilbert import (DistilBertConfig, DistilBertForMaskedLM, DistilBertForMultipleChoice,
                                        DistilBertForQuestionAnswering, DistilBertForSequenceClassification,
                                        DistilBertForTokenClassification, DistilBertModel, sinusoidal_positions)

from needs import require_module

transformers = require_module("transformers")
TOL = 1e-5


def small_config(**overrides) -> DistilBertConfig:
    fields = dict(vocab_size=120, hidden_size=48, num_hidden_layers=2, num_attention_heads=4, intermediate_size=96,
                  max_position_embeddings=40)
    fields.update(overrides)
    return DistilBertConfig(**fields)


def hf_config(config: DistilBertConfig) -> "transformers.DistilBertConfig":
    return transformers.DistilBertConfig(**{k: v for k, v in config.to_dict().items() if k != "model_type"})


def padded_batch(vocab: int, batch: int = 4, seq: int = 17, seed: int = 0):
    """[CLS] ... [SEP] rows of different lengths, padded with 0; token types as BERT's pipeline passes them."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (batch, seq), generator=g)
    lengths = torch.tensor([seq, seq - 5, 3, seq - 1])[:batch]
    mask = (torch.arange(seq)[None] < lengths[:, None]).long()
    ids = ids * mask
    types = (torch.arange(seq)[None] >= (lengths[:, None] // 2)).long() * mask
    return ids, mask, types


def max_diff(a: torch.Tensor, b: torch.Tensor, real: torch.Tensor | None = None) -> float:
    if real is not None:
        a, b = a[real], b[real]
    return (a - b).abs().max().item()


def no_surprises(info: dict) -> bool:
    return not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]


@pytest.mark.parametrize("sinusoidal", [False, True])
def test_masked_lm_matches_transformers_both_ways(tmp_path, sinusoidal):
    config = small_config(sinusoidal_pos_embds=sinusoidal, hidden_act="gelu_new" if sinusoidal else "gelu")
    torch.manual_seed(0)
    theirs = transformers.DistilBertForMaskedLM(hf_config(config)).eval()
    theirs.save_pretrained(tmp_path / "theirs")
    ours = DistilBertForMaskedLM.from_pretrained(tmp_path / "theirs").eval()
    assert ours.loading_info == {"newly_initialized": [], "unused": []}

    ids, mask, types = padded_batch(config.vocab_size)
    labels = torch.full_like(ids, -100)
    labels[0, 3], labels[1, 5], labels[3, 10] = 7, 9, 11
    real = mask.bool()
    with torch.no_grad():
        a = ours(ids, attention_mask=mask, token_type_ids=types, output_hidden_states=True)  # types ignored
        b = theirs(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        a_lab = ours(ids, attention_mask=mask, labels=labels)
        b_lab = theirs(input_ids=ids, attention_mask=mask, labels=labels)
    assert max_diff(a.logits, b.logits, real) <= TOL
    assert len(a.hidden_states) == len(b.hidden_states) == config.num_hidden_layers + 1
    for x, y in zip(a.hidden_states, b.hidden_states, strict=True):
        assert max_diff(x, y, real) <= TOL
    assert max_diff(a_lab.logits, b_lab.logits[labels != -100]) <= TOL
    assert abs(a_lab.loss.item() - b_lab.loss.item()) <= TOL

    ours.save_pretrained(tmp_path / "ours")
    saved = json.loads((tmp_path / "ours" / "config.json").read_text())
    assert {"dim", "n_layers", "n_heads", "hidden_dim", "activation", "dropout", "attention_dropout"} <= set(saved)
    assert not {"hidden_size", "num_hidden_layers", "type_vocab_size", "layer_norm_eps"} & set(saved)
    again, info = transformers.DistilBertForMaskedLM.from_pretrained(tmp_path / "ours", output_loading_info=True)
    assert no_surprises(info)
    assert again.config.sinusoidal_pos_embds is sinusoidal and again.config.dim == 48
    with torch.no_grad():
        c = again.eval()(input_ids=ids, attention_mask=mask)
    assert max_diff(c.logits, a.logits, real) <= TOL


def test_sinusoidal_table_is_hf_table_and_fixed():
    config = small_config(sinusoidal_pos_embds=True)
    torch.manual_seed(3)
    theirs = transformers.DistilBertModel(hf_config(config))
    ours = DistilBertModel(config)
    table = ours.embeddings.position_embeddings.weight
    assert max_diff(table, theirs.embeddings.position_embeddings.weight) <= 1e-6
    assert torch.equal(table, sinusoidal_positions(40, 48))
    assert not table.requires_grad  # the optimizer skips it
    head = DistilBertForSequenceClassification(config)  # head classes re-initialise, the table survives
    assert torch.equal(head.bert.embeddings.position_embeddings.weight, table)


@pytest.mark.parametrize("ours_cls,hf_name", [
    (DistilBertModel, "DistilBertModel"),
    (DistilBertForSequenceClassification, "DistilBertForSequenceClassification"),
    (DistilBertForQuestionAnswering, "DistilBertForQuestionAnswering"),
    (DistilBertForTokenClassification, "DistilBertForTokenClassification"),
    (DistilBertForMultipleChoice, "DistilBertForMultipleChoice"),
])
def test_heads_match_transformers_both_ways(tmp_path, ours_cls, hf_name):
    labels = None if ours_cls is DistilBertForQuestionAnswering else {0: "neg", 1: "pos", 2: "neutral"}
    config = small_config(id2label=labels, sinusoidal_pos_embds=ours_cls is DistilBertForQuestionAnswering)
    ids, mask, types = padded_batch(config.vocab_size, seed=1)
    if ours_cls is DistilBertForMultipleChoice:
        ids, mask, types = ids.reshape(2, 2, -1), mask.reshape(2, 2, -1), types.reshape(2, 2, -1)
    real = mask.bool()
    torch.manual_seed(1)
    ours = ours_cls(config).eval()
    ours.save_pretrained(tmp_path / "ours")
    theirs, info = getattr(transformers, hf_name).from_pretrained(tmp_path / "ours", output_loading_info=True)
    assert no_surprises(info), info
    theirs.eval().save_pretrained(tmp_path / "theirs")
    back = ours_cls.from_pretrained(tmp_path / "theirs").eval()
    assert back.loading_info == {"newly_initialized": [], "unused": []}
    with torch.no_grad():
        a, c = (m(input_ids=ids, attention_mask=mask, token_type_ids=types) for m in (ours, back))
        b = theirs(input_ids=ids, attention_mask=mask)
    if ours_cls is DistilBertModel:
        assert a.pooler_output is None
        pairs = [(a.last_hidden_state, b.last_hidden_state, real), (c.last_hidden_state, b.last_hidden_state, real)]
    elif ours_cls is DistilBertForQuestionAnswering:
        pairs = [(x.start_logits, b.start_logits, real) for x in (a, c)] + \
                [(x.end_logits, b.end_logits, real) for x in (a, c)]
    elif ours_cls is DistilBertForTokenClassification:
        pairs = [(x.logits, b.logits, real) for x in (a, c)]
    else:
        pairs = [(x.logits, b.logits, None) for x in (a, c)]
    for x, y, where in pairs:
        assert max_diff(x, y, where) <= TOL


def test_bert_named_heads_keep_hf_shapes():
    """Where DistilBERT's heads differ from BERT's: pre_classifier + ReLU instead of a tanh pooler, QA dropout."""
    config = small_config(seq_classif_dropout=0.3, qa_dropout=0.25)
    seq = DistilBertForSequenceClassification(config)
    names = set(seq.state_dict())
    assert {"pre_classifier.weight", "classifier.weight"} <= names
    assert not any(".pooler." in f".{n}" for n in names)
    assert seq.dropout.p == 0.3
    qa = DistilBertForQuestionAnswering(config)
    assert qa.qa_outputs[0].p == 0.25
    assert DistilBertForTokenClassification(config).dropout.p == config.hidden_dropout_prob


def test_config_reads_hf_names_and_validates(tmp_path):
    theirs = transformers.DistilBertConfig(dim=64, n_layers=3, n_heads=4, hidden_dim=128, vocab_size=99,
                                           activation="relu", dropout=0.05, attention_dropout=0.0,
                                           seq_classif_dropout=0.3, sinusoidal_pos_embds=True)
    theirs.save_pretrained(tmp_path)
    config = AutoConfig.from_pretrained(tmp_path)
    assert type(config) is DistilBertConfig
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads, config.intermediate_size,
            config.hidden_act, config.hidden_dropout_prob, config.attention_probs_dropout_prob) == \
        (64, 3, 4, 128, "relu", 0.05, 0.0)
    assert config.type_vocab_size == 0 and config.layer_norm_eps == 1e-12 and config.sinusoidal_pos_embds
    assert config.seq_classif_dropout == 0.3 and config.extra["tie_word_embeddings"] is True
    # the old `tie_weights_` key is read, and an untied decoder is refused by name
    data = json.loads((tmp_path / "config.json").read_text())
    assert DistilBertConfig.from_dict({**data, "tie_weights_": True}).tie_weights_ is True
    with pytest.raises(ConfigError, match="tie_weights_"):
        DistilBertConfig.from_dict({**data, "tie_weights_": False})
    with pytest.raises(ConfigError, match="type_vocab_size"):
        DistilBertConfig(type_vocab_size=2)
    (tmp_path / "bad.json").write_text(json.dumps({**data, "n_heads": 5}))
    with pytest.raises(ConfigError, match="bad.json"):
        DistilBertConfig.from_json_file(tmp_path / "bad.json")


def test_family_preset_and_pretraining_role(tmp_path):
    config = preset_config("distilbert-tiny", vocab_size=100)
    assert type(config) is DistilBertConfig and config.type_vocab_size == 0 and config.num_hidden_layers == 2
    assert family("distilbert").model_class("pretraining") is DistilBertForMaskedLM
    model = DistilBertForMaskedLM(config)
    assert model.bert.embeddings.token_type_embeddings is None and model.bert.pooler is None
    model.save_pretrained(tmp_path)
    again = AutoModelForPreTraining.from_pretrained(tmp_path)
    assert type(again) is DistilBertForMaskedLM and type(again.bert) is DistilBertModel

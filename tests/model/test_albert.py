"""ALBERT against `transformers` (the oracle), and the family options (factorised embeddings, layer sharing)
that any BERT config can use."""
from __future__ import annotations

import json

import pytest
import torch

from bertforge import BertConfig, BertForPreTraining, BertModel
from bertforge.checkpoint import CheckpointError
from bertforge.config import ConfigError
from bertforge.model import count_flops
from bertforge.model.albert import (AlbertConfig, AlbertForMaskedLM, AlbertForMultipleChoice, AlbertForPreTraining,
                                    AlbertForQuestionAnswering, AlbertForSequenceClassification,
                                    AlbertForTokenClassification, AlbertModel)
from bertforge.model.auto import AutoConfig, AutoModelForPreTraining, preset_config
from bertforge.model.outputs import BertForPreTrainingOutput

from needs import require_module

transformers = require_module("transformers")
TOL = 1e-5
MODES = ("all", "attention", "ffn", "none")


def small_config(**overrides) -> AlbertConfig:
    fields = dict(vocab_size=120, embedding_size=16, hidden_size=48, num_hidden_layers=3, num_attention_heads=4,
                  intermediate_size=96, max_position_embeddings=40)
    fields.update(overrides)
    return AlbertConfig(**fields)


def hf_config(config: AlbertConfig) -> "transformers.AlbertConfig":
    return transformers.AlbertConfig(**{k: v for k, v in config.to_dict().items() if k != "model_type"})


def padded_batch(vocab: int, batch: int = 4, seq: int = 17, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (batch, seq), generator=g)
    lengths = torch.tensor([seq, seq - 5, 3, seq - 1])[:batch]
    mask = (torch.arange(seq)[None] < lengths[:, None]).long()
    types = (torch.arange(seq)[None] >= (lengths[:, None] // 2)).long() * mask
    return ids * mask, mask, types  # <pad> = 0 on padding


def max_diff(a: torch.Tensor, b: torch.Tensor, real: torch.Tensor | None = None) -> float:
    if real is not None:
        a, b = a[real], b[real]
    return (a - b).abs().max().item()


def assert_clean_hf_load(info: dict) -> None:
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info


# ---- parity with transformers ------------------------------------------------------------------------------
@pytest.mark.parametrize("sharing", ["all", "none"])
def test_pretraining_matches_transformers_both_ways(tmp_path, sharing):
    config = small_config(layer_sharing=sharing)
    torch.manual_seed(0)
    ours = AlbertForPreTraining(config).eval()
    ours.save_pretrained(tmp_path / "ours")
    theirs, info = transformers.AlbertForPreTraining.from_pretrained(tmp_path / "ours", output_loading_info=True)
    assert_clean_hf_load(info)
    theirs.eval()
    assert theirs.config.num_hidden_groups == (1 if sharing == "all" else 3)
    assert theirs.num_parameters() == ours.num_parameters()

    ids, mask, types = padded_batch(config.vocab_size)
    labels = torch.full_like(ids, -100)
    labels[0, 3], labels[1, 5], labels[3, 10] = 7, 9, 11
    order = torch.tensor([0, 1, 1, 0])
    real = mask.bool()
    with torch.no_grad():
        full = ours(ids, attention_mask=mask, token_type_ids=types, output_hidden_states=True)
        a = ours(ids, attention_mask=mask, token_type_ids=types, labels=labels, sentence_order_label=order)
        b = theirs(input_ids=ids, attention_mask=mask, token_type_ids=types, output_hidden_states=True)
        b_lab = theirs(input_ids=ids, attention_mask=mask, token_type_ids=types, labels=labels,
                       sentence_order_label=order)
    assert max_diff(full.prediction_logits, b.prediction_logits, real) <= TOL
    assert max_diff(full.seq_relationship_logits, b.sop_logits) <= TOL
    assert len(full.hidden_states) == len(b.hidden_states) == config.num_hidden_layers + 1
    for x, y in zip(full.hidden_states, b.hidden_states, strict=True):
        assert max_diff(x, y, real) <= TOL
    assert max_diff(a.prediction_logits, b.prediction_logits[labels != -100]) <= TOL
    assert abs(a.loss.item() - b_lab.loss.item()) <= TOL

    # and back: the folder transformers writes loads into bertforge with nothing missing or unused
    theirs.save_pretrained(tmp_path / "theirs")
    again = AlbertForPreTraining.from_pretrained(tmp_path / "theirs").eval()
    assert again.loading_info == {"newly_initialized": [], "unused": []}
    assert again.config.layer_sharing == sharing
    with torch.no_grad():
        c = again(ids, attention_mask=mask, token_type_ids=types)
    assert max_diff(c.prediction_logits, b.prediction_logits, real) <= TOL


def test_masked_lm_base_model_and_sequence_classification_both_ways(tmp_path):
    config = small_config(layer_sharing="none", id2label={0: "a", 1: "b", 2: "c"})
    ids, mask, types = padded_batch(config.vocab_size, seed=1)
    real = mask.bool()
    for ours_cls, hf_cls in ((AlbertForMaskedLM, transformers.AlbertForMaskedLM),
                             (AlbertModel, transformers.AlbertModel),
                             (AlbertForSequenceClassification, transformers.AlbertForSequenceClassification)):
        torch.manual_seed(1)
        theirs = hf_cls(hf_config(config)).eval()
        theirs.save_pretrained(tmp_path / f"{ours_cls.__name__}-hf")
        ours = ours_cls.from_pretrained(tmp_path / f"{ours_cls.__name__}-hf").eval()
        assert ours.loading_info == {"newly_initialized": [], "unused": []}, ours_cls.__name__
        ours.save_pretrained(tmp_path / ours_cls.__name__)
        back, info = hf_cls.from_pretrained(tmp_path / ours_cls.__name__, output_loading_info=True)
        assert_clean_hf_load(info)
        with torch.no_grad():
            a, b, c = (m(input_ids=ids, attention_mask=mask, token_type_ids=types) for m in (ours, theirs, back.eval()))
        if ours_cls is AlbertModel:
            assert max_diff(a.last_hidden_state, b.last_hidden_state, real) <= TOL
            assert max_diff(a.pooler_output, b.pooler_output) <= TOL
            assert max_diff(c.last_hidden_state, a.last_hidden_state, real) <= TOL
        elif ours_cls is AlbertForMaskedLM:
            assert max_diff(a.logits, b.logits, real) <= TOL and max_diff(c.logits, a.logits, real) <= TOL
        else:
            assert a.logits.shape == (4, 3)
            assert max_diff(a.logits, b.logits) <= TOL and max_diff(c.logits, a.logits) <= TOL


@pytest.mark.parametrize("ours_cls", [AlbertForTokenClassification, AlbertForQuestionAnswering,
                                      AlbertForMultipleChoice])
def test_other_heads_load_transformers_checkpoints(tmp_path, ours_cls):
    config = small_config()
    torch.manual_seed(2)
    theirs = getattr(transformers, ours_cls.__name__)(hf_config(config)).eval()
    theirs.save_pretrained(tmp_path)
    ours = ours_cls.from_pretrained(tmp_path).eval()
    assert ours.loading_info == {"newly_initialized": [], "unused": []}
    ids, mask, _ = padded_batch(config.vocab_size, seed=2)
    if ours_cls is AlbertForMultipleChoice:
        ids, mask = ids.reshape(2, 2, -1), mask.reshape(2, 2, -1)
    with torch.no_grad():
        a, b = ours(input_ids=ids, attention_mask=mask), theirs(input_ids=ids, attention_mask=mask)
    if ours_cls is AlbertForQuestionAnswering:
        assert max_diff(a.start_logits, b.start_logits, mask.bool()) <= TOL
        assert max_diff(a.end_logits, b.end_logits, mask.bool()) <= TOL
    else:
        assert max_diff(a.logits, b.logits, mask.bool() if ours_cls is AlbertForTokenClassification else None) <= TOL


# ---- config.json: HF's group fields <-> layer_sharing --------------------------------------------------------
def test_config_maps_groups_to_sharing_and_refuses_what_it_cannot_run(tmp_path):
    assert AlbertConfig.from_dict({"num_hidden_layers": 6, "num_hidden_groups": 1}).layer_sharing == "all"
    assert AlbertConfig.from_dict({"num_hidden_layers": 6, "num_hidden_groups": 6}).layer_sharing == "none"
    assert AlbertConfig.from_dict({"num_hidden_layers": 6}).layer_sharing == "all"  # HF's default
    with pytest.raises(ConfigError, match="'num_hidden_groups' is 2"):
        AlbertConfig.from_dict({"num_hidden_layers": 6, "num_hidden_groups": 2})
    with pytest.raises(ConfigError, match="'inner_group_num' is 2"):
        AlbertConfig.from_dict({"num_hidden_layers": 6, "inner_group_num": 2})
    with pytest.raises(ConfigError, match="'layer_sharing'"):
        small_config(layer_sharing="everything")
    with pytest.raises(ConfigError, match="'embedding_size'"):
        BertConfig(embedding_size=0)

    # a checkpoint with groups transformers has but bertforge does not run: a CheckpointError naming the field
    grouped = hf_config(small_config(num_hidden_layers=4))
    grouped.num_hidden_groups = 2
    transformers.AlbertModel(grouped).save_pretrained(tmp_path / "groups")
    with pytest.raises(CheckpointError, match="num_hidden_groups"):
        AlbertModel.from_pretrained(tmp_path / "groups")

    config = small_config(classifier_dropout=0.2)
    data = config.to_dict()
    assert data["classifier_dropout_prob"] == 0.2 and "classifier_dropout" not in data
    assert "layer_sharing" not in data and (data["num_hidden_groups"], data["inner_group_num"]) == (1, 1)
    assert AlbertConfig.from_dict(data) == config


@pytest.mark.parametrize("sharing", ["attention", "ffn"])
def test_bertforge_only_sharing_round_trips_and_transformers_refuses_it(tmp_path, sharing):
    config = small_config(layer_sharing=sharing)
    torch.manual_seed(3)
    ours = AlbertForPreTraining(config).eval()
    ours.save_pretrained(tmp_path)
    data = json.loads((tmp_path / "config.json").read_text())
    assert data["layer_sharing"] == sharing and "bertforge-only" in data["num_hidden_groups"]
    again = AlbertForPreTraining.from_pretrained(tmp_path).eval()
    assert again.loading_info == {"newly_initialized": [], "unused": []} and again.config.layer_sharing == sharing
    ids, mask, types = padded_batch(config.vocab_size, seed=3)
    with torch.no_grad():
        a, b = (m(ids, attention_mask=mask, token_type_ids=types) for m in (ours, again))
    assert max_diff(a.prediction_logits, b.prediction_logits) == 0.0
    with pytest.raises(Exception, match="bertforge-only"):  # rather than silently re-initialising layers
        transformers.AlbertForPreTraining.from_pretrained(tmp_path)


def test_bert_config_json_unchanged_unless_the_options_are_used():
    plain = BertConfig.preset("tiny").to_dict()
    assert "embedding_size" not in plain and "layer_sharing" not in plain and "bertforge_only" not in plain
    factorised = BertConfig.preset("tiny", embedding_size=32, layer_sharing="ffn")
    data = factorised.to_dict()
    assert (data["embedding_size"], data["layer_sharing"]) == (32, "ffn") and "bertforge_only" in data
    assert BertConfig.from_dict(data) == factorised and "bertforge_only" not in BertConfig.from_dict(data).extra


# ---- sharing: sizes, storage, training ----------------------------------------------------------------------
def test_sharing_sizes_match_the_papers_table_4():
    """ALBERT-base, E = 128: all-shared 12M, shared-attention 64M, shared-FFN 38M, not-shared 89M (the paper
    rounds loosely: not-shared is 89.65M with the pooler, 89.06M without)."""
    paper = {"all": 12, "attention": 64, "ffn": 38, "none": 89}
    with torch.device("meta"):
        counts = {mode: AlbertModel(AlbertConfig.preset("base", layer_sharing=mode)).num_parameters()
                  for mode in MODES}
    assert all(abs(counts[mode] / 1e6 - paper[mode]) < 0.7 for mode in MODES), counts
    H, I = 768, 3072
    attention, ffn = 4 * (H * H + H) + 2 * H, 2 * H * I + I + H + 2 * H  # one layer's halves, with LayerNorms
    assert counts["none"] - counts["all"] == 11 * (attention + ffn)
    assert counts["attention"] - counts["all"] == 11 * ffn
    assert counts["ffn"] - counts["all"] == 11 * attention


@pytest.mark.parametrize("sharing", MODES)
def test_each_sharing_mode_stores_tensors_once_and_trains(sharing):
    config = small_config(layer_sharing=sharing, hidden_dropout_prob=0.1)
    torch.manual_seed(4)
    model = AlbertForPreTraining(config).train()
    state = model.state_dict()
    pointers = [t.data_ptr() for t in state.values()]
    assert len(pointers) == len(set(pointers))  # no tensor under two names (safetensors would refuse)
    assert len(model.bert.encoder.layers) == (1 if sharing == "all" else 3)
    model.bert.encoder.gradient_checkpointing = sharing in ("attention", "ffn")  # the mixed path, checkpointed
    ids, mask, types = padded_batch(config.vocab_size, seed=4)
    labels = torch.where(mask.bool() & (torch.arange(ids.shape[1]) % 4 == 1), ids, torch.full_like(ids, -100))
    order = torch.tensor([0, 1, 0, 1])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    before = {k: v.clone() for k, v in state.items()}
    loss = model(ids, attention_mask=mask, token_type_ids=types, labels=labels, next_sentence_label=order).loss
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())
    optimizer.step()
    assert all(not torch.equal(before[k], v) for k, v in model.state_dict().items() if k.endswith(".weight")
               and "token_type" not in k)


def test_sentence_order_label_and_its_alias():
    model = AlbertForPreTraining(small_config()).eval()
    ids, mask, types = padded_batch(120, seed=5)
    order = torch.tensor([1, 0, 1, 0])
    with torch.no_grad():
        a = model(ids, attention_mask=mask, token_type_ids=types, sentence_order_label=order)
        b = model(ids, attention_mask=mask, token_type_ids=types, next_sentence_label=order)
    assert isinstance(a, BertForPreTrainingOutput) and a.nsp_loss is not None and a.nsp_loss == b.nsp_loss
    with pytest.raises(ValueError, match="not both"):
        model(ids, sentence_order_label=order, next_sentence_label=order)


# ---- factorised embeddings on BERT itself ----------------------------------------------------------------------
def test_factorised_embeddings_on_a_bert_config(tmp_path):
    plain = BertConfig.preset("tiny", vocab_size=1000)
    factorised = plain.replace(embedding_size=32)
    H, E, V = 128, 32, 1000
    saved = (V + plain.max_position_embeddings + plain.type_vocab_size) * (H - E) - (E * H + H) + 2 * (H - E)
    assert BertModel(plain).num_parameters() - BertModel(factorised).num_parameters() == saved
    model = BertForPreTraining(factorised).eval()
    assert model.mlm.decoder_weight.shape == (V, E) and model.mlm.transform.weight.shape == (E, H)
    model.save_pretrained(tmp_path)
    again = BertForPreTraining.from_pretrained(tmp_path).eval()
    assert again.config.embedding_size == 32 and again.loading_info == {"newly_initialized": [], "unused": []}
    ids, mask, types = padded_batch(V, seed=6)
    with torch.no_grad():
        assert max_diff(model(ids, mask, types).prediction_logits, again(ids, mask, types).prediction_logits) == 0
    assert count_flops(factorised, [10]) - count_flops(plain, [10]) == 10 * 2 * E * H  # the projection
    with pytest.raises(CheckpointError, match="embedding"):
        BertForPreTraining.from_pretrained(tmp_path, embedding_size=None)  # the tables no longer fit


def test_presets_and_auto(tmp_path):
    config = preset_config("albert-tiny", vocab_size=100)
    assert type(config) is AlbertConfig and config.embedding_size == 64 and config.layer_sharing == "all"
    assert (config.hidden_act, config.pad_token_id, config.hidden_dropout_prob) == ("gelu_new", 0, 0.0)
    assert AlbertConfig.preset("xxlarge").intermediate_size == 16384
    with pytest.raises(ConfigError, match="unknown ALBERT preset"):
        AlbertConfig.preset("huge")
    AlbertForPreTraining(config).save_pretrained(tmp_path)
    assert type(AutoConfig.from_pretrained(tmp_path)) is AlbertConfig
    assert type(AutoModelForPreTraining.from_pretrained(tmp_path)) is AlbertForPreTraining


def test_paper_sizes_equal_transformers():
    """Table 1's configurations, counted on the meta device (no memory): equal to transformers' own count."""
    for name in ("base", "large", "xlarge", "xxlarge"):
        config = AlbertConfig.preset(name)
        with torch.device("meta"):
            ours, theirs = AlbertForPreTraining(config), transformers.AlbertForPreTraining(hf_config(config))
        assert ours.num_parameters() == theirs.num_parameters(), name

"""RoBERTa against `transformers` (the oracle): random-init small configs, padded batches, both directions."""
from __future__ import annotations

import pytest
import torch

from bertforge.model.auto import (AutoConfig, AutoModel, AutoModelForPreTraining, AutoModelForSequenceClassification,
                                  preset_config)
from bertforge.model.outputs import MaskedLMOutput
from bertforge.model.roberta import (RobertaConfig, RobertaForMaskedLM, RobertaForMultipleChoice,
                                     RobertaForQuestionAnswering, RobertaForSequenceClassification,
                                     RobertaForTokenClassification, RobertaModel)

from needs import require_module

transformers = require_module("transformers")
TOL = 1e-5


def small_config(**overrides) -> RobertaConfig:
    fields = dict(vocab_size=120, hidden_size=48, num_hidden_layers=2, num_attention_heads=4, intermediate_size=96,
                  max_position_embeddings=40)
    fields.update(overrides)
    return RobertaConfig(**fields)


def hf_config(config: RobertaConfig) -> "transformers.RobertaConfig":
    return transformers.RobertaConfig(**{k: v for k, v in config.to_dict().items() if k != "model_type"})


def padded_batch(vocab: int, batch: int = 4, seq: int = 17, seed: int = 0):
    """`<s> ... </s>` rows of different lengths, padded with RoBERTa's pad id 1."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, vocab, (batch, seq), generator=g)
    lengths = torch.tensor([seq, seq - 5, 3, seq - 1])[:batch]
    mask = (torch.arange(seq)[None] < lengths[:, None]).long()
    ids[:, 0] = 0
    ids[torch.arange(batch), lengths - 1] = 2
    ids = torch.where(mask.bool(), ids, torch.ones_like(ids))
    return ids, mask


def max_diff(a: torch.Tensor, b: torch.Tensor, real: torch.Tensor | None = None) -> float:
    if real is not None:
        a, b = a[real], b[real]
    return (a - b).abs().max().item()


@pytest.mark.parametrize("act", ["gelu", "relu"])  # HF's lm_head uses gelu whatever hidden_act says
def test_masked_lm_matches_transformers_both_ways(tmp_path, act):
    config = small_config(hidden_act=act)
    torch.manual_seed(0)
    theirs = transformers.RobertaForMaskedLM(hf_config(config)).eval()
    theirs.save_pretrained(tmp_path / "theirs")
    ours = RobertaForMaskedLM.from_pretrained(tmp_path / "theirs").eval()
    assert ours.loading_info == {"newly_initialized": [], "unused": []}

    ids, mask = padded_batch(config.vocab_size)
    labels = torch.full_like(ids, -100)
    labels[0, 3], labels[1, 5], labels[3, 10] = 7, 9, 11
    real = mask.bool()
    with torch.no_grad():
        a = ours(ids, attention_mask=mask, output_hidden_states=True)
        b = theirs(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        a_lab = ours(ids, attention_mask=mask, labels=labels)
        b_lab = theirs(input_ids=ids, attention_mask=mask, labels=labels)
    assert max_diff(a.logits, b.logits, real) <= TOL
    for x, y in zip(a.hidden_states, b.hidden_states, strict=True):
        assert max_diff(x, y, real) <= TOL
    assert max_diff(a_lab.logits, b_lab.logits[labels != -100]) <= TOL
    assert abs(a_lab.loss.item() - b_lab.loss.item()) <= TOL

    # and back: our folder loads in transformers with nothing missing or unexpected
    ours.save_pretrained(tmp_path / "ours")
    again, info = transformers.RobertaForMaskedLM.from_pretrained(tmp_path / "ours", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    with torch.no_grad():
        c = again.eval()(input_ids=ids, attention_mask=mask)
    assert max_diff(c.logits, a.logits, real) <= TOL


def test_base_model_and_sequence_classification_match_both_ways(tmp_path):
    config = small_config(id2label={0: "neg", 1: "pos", 2: "neutral"})
    ids, mask = padded_batch(config.vocab_size, seed=1)
    real = mask.bool()
    for ours_cls, hf_cls in ((RobertaModel, transformers.RobertaModel),
                             (RobertaForSequenceClassification, transformers.RobertaForSequenceClassification)):
        torch.manual_seed(1)
        ours = ours_cls(config).eval()
        ours.save_pretrained(tmp_path / ours_cls.__name__)
        theirs, info = hf_cls.from_pretrained(tmp_path / ours_cls.__name__, output_loading_info=True)
        assert not info["missing_keys"] and not info["unexpected_keys"], ours_cls.__name__
        theirs.eval().save_pretrained(tmp_path / f"{ours_cls.__name__}-hf")
        back = ours_cls.from_pretrained(tmp_path / f"{ours_cls.__name__}-hf").eval()
        assert back.loading_info == {"newly_initialized": [], "unused": []}
        with torch.no_grad():
            a, b, c = (m(input_ids=ids, attention_mask=mask) for m in (ours, theirs, back))
        if ours_cls is RobertaModel:
            assert max_diff(a.last_hidden_state, b.last_hidden_state, real) <= TOL
            assert max_diff(a.pooler_output, b.pooler_output) <= TOL
            assert max_diff(c.last_hidden_state, b.last_hidden_state, real) <= TOL
        else:
            assert a.logits.shape == (4, 3)
            assert max_diff(a.logits, b.logits) <= TOL and max_diff(c.logits, b.logits) <= TOL


@pytest.mark.parametrize("ours_cls,hf_name", [
    (RobertaForTokenClassification, "RobertaForTokenClassification"),
    (RobertaForQuestionAnswering, "RobertaForQuestionAnswering"),
    (RobertaForMultipleChoice, "RobertaForMultipleChoice"),
])
def test_other_heads_load_transformers_checkpoints(tmp_path, ours_cls, hf_name):
    config = small_config()
    torch.manual_seed(2)
    theirs = getattr(transformers, hf_name)(hf_config(config)).eval()
    theirs.save_pretrained(tmp_path)
    ours = ours_cls.from_pretrained(tmp_path).eval()
    assert ours.loading_info == {"newly_initialized": [], "unused": []}
    ids, mask = padded_batch(config.vocab_size, seed=2)
    if ours_cls is RobertaForMultipleChoice:
        ids, mask = ids.reshape(2, 2, -1), mask.reshape(2, 2, -1)
    with torch.no_grad():
        a, b = ours(input_ids=ids, attention_mask=mask), theirs(input_ids=ids, attention_mask=mask)
    if ours_cls is RobertaForQuestionAnswering:
        real = mask.bool()
        assert max_diff(a.start_logits, b.start_logits, real) <= TOL
        assert max_diff(a.end_logits, b.end_logits, real) <= TOL
    elif ours_cls is RobertaForTokenClassification:
        assert max_diff(a.logits, b.logits, mask.bool()) <= TOL
    else:
        assert max_diff(a.logits, b.logits) <= TOL


def test_positions_follow_the_padding_offset_and_length_is_checked():
    config = small_config(max_position_embeddings=12)
    model = RobertaModel(config)
    ids = torch.tensor([[0, 5, 6, 2, 1, 1], [0, 7, 2, 1, 1, 1]])
    assert model.default_position_ids(ids, None).tolist() == [[2, 3, 4, 5, 1, 1], [2, 3, 4, 1, 1, 1]]
    assert config.max_sequence_length == 10
    with pytest.raises(ValueError, match="exceeds the 10 positions RoBERTa has"):
        model(torch.full((1, 11), 5))


def test_family_presets_config_and_pretraining_call(tmp_path):
    config = preset_config("roberta-tiny", vocab_size=100)
    assert type(config) is RobertaConfig and config.max_position_embeddings == 514
    assert (config.pad_token_id, config.bos_token_id, config.eos_token_id, config.type_vocab_size) == (1, 0, 2, 1)
    assert config.layer_norm_eps == 1e-5
    for size in ("tiny", "mini", "small", "medium", "base", "large"):
        assert RobertaConfig.preset(size).max_position_embeddings == 514

    RobertaForMaskedLM(config).save_pretrained(tmp_path)
    assert type(AutoConfig.from_pretrained(tmp_path)) is RobertaConfig
    assert type(AutoModel.from_pretrained(tmp_path)) is RobertaModel
    model = AutoModelForPreTraining.from_pretrained(tmp_path)
    assert type(model) is RobertaForMaskedLM
    head = AutoModelForSequenceClassification.from_pretrained(tmp_path)
    assert type(head) is RobertaForSequenceClassification
    assert "classifier.out_proj.weight" in head.loading_info["newly_initialized"]
    assert "lm_head.dense.weight" in head.loading_info["unused"]

    # the pre-training loop's call: input_ids, attention_mask, token_type_ids, labels (and causal for "ltr")
    ids, mask = padded_batch(100, seed=3)
    labels = torch.where(mask.bool() & (torch.arange(ids.shape[1]) % 3 == 1), ids, torch.full_like(ids, -100))
    for causal in (False, True):
        out = model(ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids), labels=labels, causal=causal)
        assert isinstance(out, MaskedLMOutput) and out.loss.isfinite()
        out.loss.backward()


def test_older_checkpoints_with_tied_decoder_and_buffers_load(tmp_path):
    """transformers v4 wrote the tied `lm_head.decoder.*` tensors and the `position_ids` buffer."""
    from safetensors.torch import load_file, save_file
    config = small_config()
    theirs = transformers.RobertaForMaskedLM(hf_config(config)).eval()
    theirs.save_pretrained(tmp_path)
    tensors = load_file(str(tmp_path / "model.safetensors"))
    tensors["lm_head.decoder.weight"] = tensors["roberta.embeddings.word_embeddings.weight"].clone()
    tensors["lm_head.decoder.bias"] = tensors["lm_head.bias"].clone()
    tensors["roberta.embeddings.position_ids"] = torch.arange(config.max_position_embeddings)[None]
    save_file(tensors, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    ours = RobertaForMaskedLM.from_pretrained(tmp_path).eval()
    assert ours.loading_info == {"newly_initialized": [], "unused": []}
    ids, mask = padded_batch(config.vocab_size, seed=4)
    with torch.no_grad():
        diff = max_diff(ours(ids, attention_mask=mask).logits, theirs(input_ids=ids, attention_mask=mask).logits,
                        mask.bool())
    assert diff <= TOL

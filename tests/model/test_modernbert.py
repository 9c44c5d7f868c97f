"""ModernBERT: the modern options of the shared parts, against `transformers`' ModernBERT (the oracle) in both
directions, and the packed path against the padded one for every option on its own and all together."""
from __future__ import annotations

import json

import pytest
import torch

from bertforge import BertConfig, BertForPreTraining
from bertforge.checkpoint import internal_to_hf_state_dict
from bertforge.config import BERTFORGE_ONLY_KEY, ConfigError
from bertforge.model.auto import AutoModelForMaskedLM, AutoModelForSequenceClassification, preset_config
from bertforge.model.modernbert import (ModernBertConfig, ModernBertForMaskedLM, ModernBertForMultipleChoice,
                                        ModernBertForQuestionAnswering, ModernBertForSequenceClassification,
                                        ModernBertForTokenClassification, ModernBertModel)
from bertforge.model.packing import PackedBatch

from needs import require_module

transformers = require_module("transformers")

SPECIAL = {"bos_token_id": 1, "eos_token_id": 2, "cls_token_id": 1, "sep_token_id": 2}


def small_config(**overrides) -> ModernBertConfig:
    fields = dict(vocab_size=120, hidden_size=48, num_hidden_layers=4, num_attention_heads=4, intermediate_size=72,
                  pad_token_id=0, max_position_embeddings=64, local_attention=6, global_attn_every_n_layers=2,
                  extra=dict(SPECIAL))
    fields.update(overrides)
    return ModernBertConfig(**fields)


def random_batch(vocab: int = 120, seq: int = 21, seed: int = 0):
    """Mixed lengths (several attention groups), one of them a single token far shorter than the window."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (5, seq), generator=g)
    lengths = torch.tensor([seq, seq - 6, 1, 9, seq - 1])
    mask = (torch.arange(seq)[None] < lengths[:, None]).long()
    return ids * mask, mask


def hf_from(folder, cls_name: str):
    return getattr(transformers, cls_name).from_pretrained(folder, attn_implementation="eager").eval()


def assert_saves_back(ours, theirs, folder) -> None:
    """Ours saved again loads in transformers' class with every tensor as it was."""
    ours.save_pretrained(folder)
    again = type(theirs).from_pretrained(folder)
    for name, tensor in theirs.state_dict().items():
        assert torch.equal(again.state_dict()[name], tensor), name


# ---- ours saved -> transformers loads, same outputs --------------------------------------------------------------
@pytest.mark.parametrize("overrides", [
    {},                                                            # ModernBERT's layout: local every other layer
    {"local_attention": None},                                     # all layers global
    {"attention_bias": True, "mlp_bias": True, "norm_bias": True, "head_bias": True, "decoder_bias": False},
    {"global_attn_every_n_layers": 3, "local_attention": 4, "hidden_act": "gelu_pytorch_tanh",
     "head_act": "silu", "rope_theta": 5000.0, "local_rope_theta": 300.0},
])
def test_masked_lm_matches_transformers_both_ways(tmp_path, overrides):
    config = small_config(**overrides)
    torch.manual_seed(0)
    ours = ModernBertForMaskedLM(config).eval()
    ours.save_pretrained(tmp_path / "ours")
    assert BERTFORGE_ONLY_KEY not in json.loads((tmp_path / "ours" / "config.json").read_text())
    theirs = hf_from(tmp_path / "ours", "ModernBertForMaskedLM")
    ids, mask = random_batch()
    labels = torch.full_like(ids, -100)
    labels[0, 3], labels[1, 14], labels[2, 0], labels[4, 19] = 7, 9, 11, 13
    real = mask.bool()
    with torch.no_grad():
        full = ours(ids, attention_mask=mask, output_hidden_states=True)
        sparse = ours(ids, attention_mask=mask, labels=labels)
        ref = theirs(input_ids=ids, attention_mask=mask, labels=labels, output_hidden_states=True)
    assert (full.logits[real] - ref.logits[real]).abs().max() < 1e-5
    assert len(full.hidden_states) == len(ref.hidden_states) == config.num_hidden_layers + 1
    for mine, hf in zip(full.hidden_states, ref.hidden_states):
        assert (mine[real] - hf[real]).abs().max() < 1e-5
    # the decoder ran on the 4 labelled rows only, in row-major order
    assert sparse.logits.shape == (4, config.vocab_size)
    assert (sparse.logits - ref.logits[labels != -100]).abs().max() < 1e-5
    assert abs(sparse.loss.item() - ref.loss.item()) < 1e-5

    theirs.save_pretrained(tmp_path / "theirs")
    again = ModernBertForMaskedLM.from_pretrained(tmp_path / "theirs").eval()
    assert again.loading_info == {"newly_initialized": [], "unused": []}
    mine, read_back = config.to_dict(), again.config.to_dict()
    assert {k: read_back[k] for k in mine} == mine
    with torch.no_grad():
        back = again(ids, attention_mask=mask)
    assert (back.logits[real] - ref.logits[real]).abs().max() < 1e-5


def test_training_step_matches_transformers(tmp_path):
    """Same weights, same batch: loss, every gradient and the weights after one AdamW step agree."""
    config = small_config()
    torch.manual_seed(1)
    ours = ModernBertForMaskedLM(config).train()
    ours.save_pretrained(tmp_path)
    theirs = transformers.ModernBertForMaskedLM.from_pretrained(tmp_path, attn_implementation="sdpa").train()
    ids, mask = random_batch(seed=2)
    labels = torch.where(mask.bool() & (torch.rand(ids.shape, generator=torch.Generator().manual_seed(3)) < 0.3),
                         ids, torch.full_like(ids, -100))
    losses = []
    for model, kwargs in ((ours, dict(labels=labels)), (theirs, dict(labels=labels))):
        optim = torch.optim.AdamW(model.parameters(), lr=1e-3)
        loss = model(ids, attention_mask=mask, **kwargs).loss
        loss.backward()
        losses.append(loss.item())
        optim.step()
    assert abs(losses[0] - losses[1]) < 1e-5
    after_ours, after_theirs = internal_to_hf_state_dict(ours), theirs.state_dict()
    for name, tensor in after_ours.items():
        assert (tensor - after_theirs[name]).abs().max() < 1e-5, name


# ---- transformers saved -> ours loads, every task head -------------------------------------------------------
@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_sequence_classification_loads_from_transformers(tmp_path, pooling):
    hf_config = transformers.ModernBertConfig(**{**small_config().to_dict(), "num_labels": 3,
                                                   "classifier_pooling": pooling})
    torch.manual_seed(0)
    theirs = transformers.ModernBertForSequenceClassification(hf_config).eval()
    theirs.config._attn_implementation = "eager"
    theirs.save_pretrained(tmp_path)
    ours = AutoModelForSequenceClassification.from_pretrained(tmp_path).eval()
    assert isinstance(ours, ModernBertForSequenceClassification)
    assert ours.loading_info == {"newly_initialized": [], "unused": []}
    ids, mask = random_batch()
    labels = torch.tensor([0, 2, 1, 1, 0])
    with torch.no_grad():
        a = ours(ids, attention_mask=mask, labels=labels)
        b = theirs(input_ids=ids, attention_mask=mask, labels=labels)
    assert (a.logits - b.logits).abs().max() < 1e-5
    assert abs(a.loss.item() - b.loss.item()) < 1e-5
    assert_saves_back(ours, theirs, tmp_path / "back")


def test_token_classification_and_question_answering_load_from_transformers(tmp_path):
    hf_config = transformers.ModernBertConfig(**small_config().to_dict(), num_labels=5)
    ids, mask = random_batch()
    real = mask.bool()
    torch.manual_seed(0)
    theirs = transformers.ModernBertForTokenClassification(hf_config).eval()
    theirs.config._attn_implementation = "eager"
    theirs.save_pretrained(tmp_path / "ner")
    ours = ModernBertForTokenClassification.from_pretrained(tmp_path / "ner").eval()
    assert ours.loading_info == {"newly_initialized": [], "unused": []}
    labels = torch.randint(0, 5, ids.shape, generator=torch.Generator().manual_seed(4)).masked_fill(~real, -100)
    with torch.no_grad():
        a = ours(ids, attention_mask=mask, labels=labels)
        b = theirs(input_ids=ids, attention_mask=mask, labels=labels)
    assert (a.logits[real] - b.logits[real]).abs().max() < 1e-5
    assert abs(a.loss.item() - b.loss.item()) < 1e-5
    assert_saves_back(ours, theirs, tmp_path / "ner-back")

    qa_config = transformers.ModernBertConfig(**small_config().to_dict())
    theirs = transformers.ModernBertForQuestionAnswering(qa_config).eval()
    theirs.config._attn_implementation = "eager"
    theirs.save_pretrained(tmp_path / "qa")
    ours = ModernBertForQuestionAnswering.from_pretrained(tmp_path / "qa").eval()
    assert ours.loading_info == {"newly_initialized": [], "unused": []}
    start, end = torch.tensor([2, 5]), torch.tensor([4, 9])
    full_ids, full_mask = ids[[0, 4]], torch.ones_like(ids[[0, 4]])  # no padding: HF scores padded slots too
    with torch.no_grad():
        a = ours(ids, attention_mask=mask)
        b = theirs(input_ids=ids, attention_mask=mask)
        c = ours(full_ids, attention_mask=full_mask, start_positions=start, end_positions=end)
        d = theirs(input_ids=full_ids, attention_mask=full_mask, start_positions=start, end_positions=end)
    assert (a.start_logits[real] - b.start_logits[real]).abs().max() < 1e-5
    assert (a.end_logits[real] - b.end_logits[real]).abs().max() < 1e-5
    assert abs(c.loss.item() - d.loss.item()) < 1e-5
    assert_saves_back(ours, theirs, tmp_path / "qa-back")


def test_multiple_choice_and_bare_model_load_from_transformers(tmp_path):
    hf_config = transformers.ModernBertConfig(**small_config().to_dict())
    torch.manual_seed(0)
    theirs = transformers.ModernBertForMultipleChoice(hf_config).eval()
    theirs.config._attn_implementation = "eager"
    theirs.save_pretrained(tmp_path / "mc")
    ours = ModernBertForMultipleChoice.from_pretrained(tmp_path / "mc").eval()
    assert ours.loading_info == {"newly_initialized": [], "unused": []}
    ids, mask = random_batch()
    ids, mask = ids[:4].reshape(2, 2, -1), mask[:4].reshape(2, 2, -1)
    labels = torch.tensor([1, 0])
    with torch.no_grad():
        a = ours(ids, attention_mask=mask, labels=labels)
        b = theirs(input_ids=ids, attention_mask=mask, labels=labels)
    assert (a.logits - b.logits).abs().max() < 1e-5
    assert abs(a.loss.item() - b.loss.item()) < 1e-5
    assert_saves_back(ours, theirs, tmp_path / "mc-back")

    bare = transformers.ModernBertModel(hf_config).eval()
    bare.config._attn_implementation = "eager"
    bare.save_pretrained(tmp_path / "bare")
    ours = ModernBertModel.from_pretrained(tmp_path / "bare").eval()
    ids, mask = random_batch()
    with torch.no_grad():
        a = ours(ids, attention_mask=mask).last_hidden_state
        b = bare(input_ids=ids, attention_mask=mask).last_hidden_state
    assert (a[mask.bool()] - b[mask.bool()]).abs().max() < 1e-5


# ---- the speed machinery: packed == padded, for each option and all together ------------------------------------
OPTIONS = {
    "pre_norm": dict(pre_norm=True),
    "glu": dict(feed_forward_glu=True, intermediate_size=96),
    "no_bias": dict(attention_bias=False, mlp_bias=False, norm_bias=False, head_bias=False, decoder_bias=False),
    "rotary": dict(rope_theta=10000.0),
    "local": dict(local_attention=4, global_attn_every_n_layers=2),
    "rotary_local": dict(rope_theta=160000.0, local_rope_theta=10.0, local_attention=4, global_attn_every_n_layers=2),
    "head_act": dict(head_act="silu"),
}
OPTIONS["all"] = {k: v for opts in OPTIONS.values() for k, v in opts.items()}


@pytest.mark.parametrize("name", list(OPTIONS))
def test_packed_equals_padded_with_each_option(name):
    config = BertConfig.preset("tiny", vocab_size=120, num_hidden_layers=3, hidden_dropout_prob=0.0,
                               attention_probs_dropout_prob=0.0, **OPTIONS[name])
    torch.manual_seed(0)
    model = BertForPreTraining(config)
    ids, mask = random_batch()
    assert len(PackedBatch.from_mask(mask, *ids.shape, ids.device).groups) > 1  # attention groups are in play
    labels = torch.full_like(ids, -100)
    labels[0, 2], labels[2, 0], labels[3, 8], labels[4, 17] = 5, 6, 7, 8
    nsp = torch.tensor([0, 1, 0, 1, 1])
    outs, grads = [], []
    for unpad in (True, False):
        model.zero_grad()
        out = model(ids, attention_mask=mask, labels=labels, next_sentence_label=nsp, unpad=unpad)
        out.loss.backward()
        outs.append(out)
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    a, b = outs
    assert torch.isfinite(a.prediction_logits).all() and torch.isfinite(b.prediction_logits).all()
    assert (a.prediction_logits - b.prediction_logits).abs().max() < 1e-5
    assert (a.seq_relationship_logits - b.seq_relationship_logits).abs().max() < 1e-5
    assert abs(a.loss.item() - b.loss.item()) < 1e-5
    assert grads[0].keys() == grads[1].keys() and grads[0]
    for n in grads[0]:
        assert (grads[0][n] - grads[1][n]).abs().max() < 1e-5, n


@pytest.mark.parametrize("training", [False, True])
def test_local_attention_sees_only_its_window(training):
    """A local layer: a token's output ignores tokens beyond its half-window (local_attention=6: 3 each side),
    in SDPA's path and in the explicit attention-dropout path (training, same dropout masks on both runs)."""
    model = ModernBertModel(small_config(num_hidden_layers=2, attention_probs_dropout_prob=0.3)).train(training)
    ids, mask = random_batch()
    changed = ids.clone()
    changed[0, 15] = 99
    outs = []
    with torch.no_grad():
        layer = model.encoder.layers[1]  # layer 1 is local
        batch = PackedBatch.from_mask(None, 1, ids.shape[1], ids.device)
        for row in (ids[0], changed[0]):
            x = model.embeddings.word_embeddings.weight[row]
            local_batch, rope = model.encoder._contexts(x, batch, None)[False]
            torch.manual_seed(5)
            outs.append(layer(x, local_batch, rope))
    differs = (outs[0] - outs[1]).abs().amax(dim=-1) > 1e-6
    assert differs.nonzero().squeeze(1).tolist() == [12, 13, 14, 15, 16, 17, 18]


def test_rotary_backward_is_the_gradient_and_matches_transformers_rotation():
    from transformers.models.modernbert.modeling_modernbert import apply_rotary_pos_emb
    from bertforge.model.rotary import RotaryEmbedding, apply_rotary
    T, h, d = 7, 2, 8
    positions = torch.tensor([0, 1, 2, 0, 1, 5, 9])
    cos, sin = RotaryEmbedding(d, 100.0)(positions, torch.float64, h)
    qkv = torch.randn(T, 3, h, d, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: apply_rotary(t, cos, sin), (qkv,))
    hf_rotary = transformers.ModernBertConfig(hidden_size=h * d, num_attention_heads=h, num_hidden_layers=1,
                                              rope_parameters={"full_attention": {"rope_type": "default",
                                                                                  "rope_theta": 100.0}})
    from transformers.models.modernbert.modeling_modernbert import ModernBertRotaryEmbedding
    hf_cos, hf_sin = ModernBertRotaryEmbedding(hf_rotary)(qkv, positions[None], "full_attention")
    q, k = qkv[None, :, 0].transpose(1, 2), qkv[None, :, 1].transpose(1, 2)      # [1, heads, T, d]
    hf_q, hf_k = apply_rotary_pos_emb(q, k, hf_cos, hf_sin)
    ours = apply_rotary(qkv, cos, sin)
    assert (ours[:, 0] - hf_q[0].transpose(0, 1)).abs().max() < 1e-6
    assert (ours[:, 1] - hf_k[0].transpose(0, 1)).abs().max() < 1e-6
    assert torch.equal(ours[:, 2], qkv[:, 2])


def test_bf16_autocast_runs_and_stays_close():
    model = ModernBertForMaskedLM(small_config()).eval()
    ids, mask = random_batch()
    labels = torch.where(mask.bool(), ids, torch.full_like(ids, -100))
    with torch.no_grad():
        ref = model(ids, attention_mask=mask, labels=labels)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low = model(ids, attention_mask=mask, labels=labels)
    assert low.loss.dtype == torch.float32 and abs(low.loss.item() - ref.loss.item()) < 0.05


# ---- configs -----------------------------------------------------------------------------------------------------
def test_bert_config_json_is_unchanged_and_modern_options_are_marked():
    plain = BertConfig.preset("tiny").to_dict()
    assert not {"pre_norm", "rope_theta", "norm_bias", "local_attention", BERTFORGE_ONLY_KEY} & plain.keys()
    modern = BertConfig.preset("tiny", pre_norm=True, rope_theta=10000.0).to_dict()
    assert modern["pre_norm"] is True and "pre_norm" in modern[BERTFORGE_ONLY_KEY]
    assert BertConfig.from_dict(modern) == BertConfig.preset("tiny", pre_norm=True, rope_theta=10000.0)


def test_transformers4_config_and_presets():
    old = {"model_type": "modernbert", "vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 6,
           "num_attention_heads": 2, "intermediate_size": 48, "global_rope_theta": 160000.0,
           "local_rope_theta": 10000.0, "global_attn_every_n_layers": 3, "local_attention": 128, "norm_eps": 1e-5,
           "pad_token_id": 0}
    config = ModernBertConfig.from_dict(old)
    assert (config.rope_theta, config.local_rope_theta, config.global_attn_every_n_layers) == (160000.0, 10000.0, 3)
    assert [config.is_global_layer(i) for i in range(6)] == [True, False, False, True, False, False]
    hf = transformers.ModernBertConfig(**config.to_dict())
    assert hf.layer_types == ["full_attention", "sliding_attention", "sliding_attention"] * 2
    mini = preset_config("modernbert-mini", vocab_size=8000, pad_token_id=0)
    assert isinstance(mini, ModernBertConfig) and (mini.num_hidden_layers, mini.hidden_size) == (4, 256)


@pytest.mark.parametrize("bad, field", [
    ({"layer_types": ["sliding_attention", "full_attention"]}, "layer_types"),
    ({"layer_types": ["full_attention"]}, "layer_types"),
    ({"rope_parameters": {"full_attention": {"rope_type": "linear", "rope_theta": 1.0}}}, "rope_type"),
    ({"local_attention": 0}, "local_attention"),
    ({"norm_bias": "no"}, "norm_bias"),
    ({"classifier_pooling": "max"}, "classifier_pooling"),
])
def test_bad_config_fields_are_named(tmp_path, bad, field):
    data = {"model_type": "modernbert", "num_hidden_layers": 2, "hidden_size": 32, "num_attention_heads": 2, **bad}
    (tmp_path / "config.json").write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=field):
        ModernBertConfig.from_pretrained(tmp_path)


def test_auto_class_and_bertforge_only_checkpoint(tmp_path):
    torch.manual_seed(0)
    model = ModernBertForMaskedLM(small_config(pre_norm=False))
    model.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert "pre_norm" in saved[BERTFORGE_ONLY_KEY] and saved["pre_norm"] is False
    again = AutoModelForMaskedLM.from_pretrained(tmp_path)
    assert isinstance(again, ModernBertForMaskedLM) and again.config.pre_norm is False
    for a, b in zip(model.state_dict().values(), again.state_dict().values()):
        assert torch.equal(a, b)


# ---- the whole pipeline ---------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_pretrain_modernbert_preset_then_finetune_then_load_in_transformers(train_data, vocab_dir, shared_data,
                                                                            tmp_path):
    from bertforge.tasks.finetune import FinetuneSettings, finetune
    from bertforge.pretraining.pretrain import pretrain
    pretrained = tmp_path / "pretrained"
    result = pretrain(train_data, pretrained, vocab=str(vocab_dir), model="modernbert-tiny", objective="mlm",
                      max_steps=2, batch_size=4, lr=1e-3, seq_len_schedule="64:1", eval_batches=1, progress=False)
    assert result.step == 2 and torch.isfinite(torch.tensor(result.final_eval["mlm_loss"]))
    saved = json.loads((pretrained / "config.json").read_text())
    assert saved["model_type"] == "modernbert" and saved["architectures"] == ["ModernBertForMaskedLM"]

    tuned = tmp_path / "mrpc"
    report = finetune(FinetuneSettings(task="mrpc", model=str(pretrained), output=str(tuned),
                                       data=str(shared_data / "glue" / "MRPC"), epochs=1, batch_size=8,
                                       learning_rates=[1e-4], max_train_samples=16, max_eval_samples=16,
                                       progress=False), say=lambda *_: None)
    assert 0.0 <= report.eval["accuracy"] <= 1.0
    ours = AutoModelForSequenceClassification.from_pretrained(tuned).eval()
    theirs = transformers.ModernBertForSequenceClassification.from_pretrained(tuned).eval()
    ids = torch.tensor([[2, 1996, 3185, 2001, 2307, 3, 2023, 2143, 3, 0, 0]])  # ids of the prepared vocab
    mask = (ids != 0).long()
    with torch.no_grad():
        a = ours(input_ids=ids, attention_mask=mask).logits
        b = theirs(input_ids=ids, attention_mask=mask).logits
    assert torch.allclose(a, b, atol=1e-5), (a, b)

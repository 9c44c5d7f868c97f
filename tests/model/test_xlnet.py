"""XLNet against `transformers` (the oracle): random-init small checkpoints saved by transformers load in
bertforge with equal outputs, and bertforge's saves load back in transformers; on left-padded batches with
token types, with and without the two-stream inputs (perm_mask, target_mapping); and the LM head learns a
permutation target."""
from __future__ import annotations

import json

import pytest
import torch

from bertforge.checkpoint import CheckpointError, _expected_hf_names
from bertforge.config import ConfigError
from bertforge.model.auto import AutoModel, AutoModelForSequenceClassification, preset_config
from bertforge.model.xlnet import (XLNetConfig, XLNetForMultipleChoice, XLNetForQuestionAnsweringSimple,
                                   XLNetForSequenceClassification, XLNetForTokenClassification, XLNetLMHeadModel,
                                   XLNetModel)

from needs import require_module

transformers = require_module("transformers")
TOL = 1e-5
VOCAB, PAD, SEP, CLS = 100, 5, 4, 3  # XLNet's special ids (as in its spiece vocabulary)


def hf_config(**overrides) -> "transformers.XLNetConfig":
    fields = dict(d_model=64, n_layer=2, n_head=4, d_inner=128, vocab_size=VOCAB)
    fields.update(overrides)
    return transformers.XLNetConfig(**fields)


def left_padded_batch(batch: int = 4, seq: int = 13, seed: int = 0):
    """Rows as XLNet's tokenizer makes them: padding on the LEFT (type 3), then A (type 0) <sep>, B (type 1)
    <sep>, and <cls> (type 2) last."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(6, VOCAB, (batch, seq), generator=g)
    lengths = torch.tensor([seq, seq - 4, 5, seq - 1, 7, seq])[:batch]
    mask = (torch.arange(seq)[None] >= (seq - lengths)[:, None]).long()
    start = seq - lengths
    middle = start + lengths // 2
    types = (torch.arange(seq)[None] >= middle[:, None]).long()
    ids[torch.arange(batch), middle - 1] = SEP
    ids[:, -2], ids[:, -1] = SEP, CLS
    types[:, -1] = 2
    ids = torch.where(mask.bool(), ids, torch.full_like(ids, PAD))
    types = torch.where(mask.bool(), types, torch.full_like(types, 3))
    return ids, mask, types


def permutation_inputs(mask: torch.Tensor, n_predict: int = 3, seed: int = 1):
    """A random factorisation order over each row's real tokens; the last `n_predict` of it are predicted.
    perm_mask[b, i, j] = 1 when j does not come before i in the order; target_mapping one-hot [B, P, L]."""
    g = torch.Generator().manual_seed(seed)
    B, L = mask.shape
    perm = torch.zeros(B, L, L)
    target = torch.zeros(B, n_predict, L)
    for b in range(B):
        real = mask[b].nonzero().flatten()
        order = real[torch.randperm(len(real), generator=g)]
        rank = torch.full((L,), -1)
        rank[order] = torch.arange(len(order))
        perm[b] = (rank[None, :] >= rank[:, None]).float() * mask[b][None, :]
        for p, position in enumerate(order[-n_predict:]):
            target[b, p, position] = 1.0
    return perm, target


def hf_saved(cls_name: str, folder, seed: int = 0, **overrides):
    torch.manual_seed(seed)
    model = getattr(transformers, cls_name)(hf_config(**overrides)).eval()
    model.save_pretrained(folder)
    return model


def assert_close(ours: torch.Tensor, theirs: torch.Tensor) -> None:
    assert ours.shape == theirs.shape
    assert (ours - theirs).abs().max().item() < TOL


def assert_saves_back(ours, theirs, folder) -> None:
    """Ours saved again loads in transformers' class with every tensor as it was."""
    ours.save_pretrained(folder)
    again = type(theirs).from_pretrained(folder).eval()
    for name, tensor in theirs.state_dict().items():
        assert torch.equal(again.state_dict()[name], tensor), name
    return again


HEADS = [("XLNetModel", XLNetModel, ("last_hidden_state",)),
         ("XLNetLMHeadModel", XLNetLMHeadModel, ("logits",)),
         ("XLNetForSequenceClassification", XLNetForSequenceClassification, ("logits",)),
         ("XLNetForTokenClassification", XLNetForTokenClassification, ("logits",)),
         ("XLNetForQuestionAnsweringSimple", XLNetForQuestionAnsweringSimple, ("start_logits", "end_logits"))]


# ---- each class, both ways, on a left-padded batch with token types ----------------------------------------------
@pytest.mark.parametrize("hf_name, ours_cls, fields", HEADS, ids=[h[0] for h in HEADS])
def test_each_class_matches_transformers_both_ways(tmp_path, hf_name, ours_cls, fields):
    theirs = hf_saved(hf_name, tmp_path / "hf", num_labels=3 if "Token" in hf_name or "Sequence" in hf_name else 2)
    ours = ours_cls.from_pretrained(tmp_path / "hf").eval()
    assert ours.loading_info["newly_initialized"] == []
    ids, mask, types = left_padded_batch()
    with torch.no_grad():
        a = ours(ids, attention_mask=mask, token_type_ids=types)
        b = theirs(ids, attention_mask=mask, token_type_ids=types)
        c = ours(ids, input_mask=1 - mask, token_type_ids=types)  # transformers' other mask convention
        for field in fields:
            assert_close(getattr(a, field), getattr(b, field))
            assert_close(getattr(c, field), getattr(b, field))
        again = assert_saves_back(ours, theirs, tmp_path / "ours")
        d = again(ids, attention_mask=mask, token_type_ids=types)
        for field in fields:
            assert_close(getattr(a, field), getattr(d, field))


def test_losses_match_transformers(tmp_path):
    ids, mask, types = left_padded_batch()
    with torch.no_grad():
        for hf_name, cls, labels in [
            ("XLNetForSequenceClassification", XLNetForSequenceClassification, {"labels": torch.tensor([0, 2, 1, 2])}),
            ("XLNetForTokenClassification", XLNetForTokenClassification,
             {"labels": torch.where(mask.bool(), ids % 3, torch.full_like(ids, -100))}),
            ("XLNetForQuestionAnsweringSimple", XLNetForQuestionAnsweringSimple,
             {"start_positions": torch.tensor([3, 5, 20, 9]), "end_positions": torch.tensor([4, 8, 10, 11])}),
            ("XLNetLMHeadModel", XLNetLMHeadModel, {"labels": torch.where(mask.bool(), ids, -100)})]:
            theirs = hf_saved(hf_name, tmp_path / hf_name, num_labels=3 if "QuestionAnswering" not in hf_name else 2)
            ours = cls.from_pretrained(tmp_path / hf_name).eval()
            a = ours(ids, attention_mask=mask, token_type_ids=types, **labels).loss
            b = theirs(ids, attention_mask=mask, token_type_ids=types, **labels).loss
            assert abs(a.item() - b.item()) < TOL, hf_name


def test_multiple_choice_matches_transformers_both_ways(tmp_path):
    theirs = hf_saved("XLNetForMultipleChoice", tmp_path / "hf")
    ours = XLNetForMultipleChoice.from_pretrained(tmp_path / "hf").eval()
    ids, mask, types = left_padded_batch(batch=6)
    ids, mask, types = (t.reshape(2, 3, -1) for t in (ids, mask, types))
    labels = torch.tensor([2, 0])
    with torch.no_grad():
        a = ours(ids, attention_mask=mask, token_type_ids=types, labels=labels)
        b = theirs(ids, attention_mask=mask, token_type_ids=types, labels=labels)
        assert_close(a.logits, b.logits)
        assert abs(a.loss.item() - b.loss.item()) < TOL
        again = assert_saves_back(ours, theirs, tmp_path / "ours")
        assert_close(a.logits, again(ids, attention_mask=mask, token_type_ids=types).logits)


# ---- the two streams ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("hf_name, ours_cls, field", [("XLNetModel", XLNetModel, "last_hidden_state"),
                                                     ("XLNetLMHeadModel", XLNetLMHeadModel, "logits")])
def test_two_stream_matches_transformers_both_ways(tmp_path, hf_name, ours_cls, field):
    """perm_mask + target_mapping: the query stream's outputs, one per prediction, with left padding."""
    theirs = hf_saved(hf_name, tmp_path / "hf")
    ours = ours_cls.from_pretrained(tmp_path / "hf").eval()
    ids, mask, types = left_padded_batch()
    perm, target = permutation_inputs(mask)
    inputs = dict(attention_mask=mask, token_type_ids=types, perm_mask=perm, target_mapping=target)
    with torch.no_grad():
        a = getattr(ours(ids, **inputs), field)
        assert a.shape[1] == target.shape[1]
        assert_close(a, getattr(theirs(ids, **inputs), field))
        again = assert_saves_back(ours, theirs, tmp_path / "ours")
        assert_close(a, getattr(again(ids, **inputs), field))
        # perm_mask alone: the content stream only, each token seeing those before it in the order
        assert_close(ours(ids, attention_mask=mask, perm_mask=perm).last_hidden_state
                     if ours_cls is XLNetModel else ours(ids, attention_mask=mask, perm_mask=perm).logits,
                     getattr(theirs(ids, attention_mask=mask, perm_mask=perm), field))


def test_two_stream_loss_and_gradients_match_transformers(tmp_path):
    theirs = hf_saved("XLNetLMHeadModel", tmp_path / "hf")
    ours = XLNetLMHeadModel.from_pretrained(tmp_path / "hf").eval()
    ids, mask, types = left_padded_batch()
    perm, target = permutation_inputs(mask)
    labels = torch.einsum("bpl,bl->bp", target, ids.float()).long()  # the predicted tokens
    inputs = dict(attention_mask=mask, token_type_ids=types, perm_mask=perm, target_mapping=target, labels=labels)
    a, b = ours(ids, **inputs).loss, theirs(ids, **inputs).loss
    assert abs(a.item() - b.item()) < TOL
    a.backward()
    b.backward()
    hf_params = dict(theirs.named_parameters())
    mine = dict(ours.named_parameters())
    for hf_name, (name, _, _) in _expected_hf_names(ours).items():
        grad = hf_params[hf_name].grad
        assert (mine[name].grad - grad).abs().max().item() < 1e-5 * max(1.0, grad.abs().max().item()), hf_name


@pytest.mark.parametrize("overrides", [{"attn_type": "uni"}, {"attn_type": "uni", "same_length": True},
                                       {"clamp_len": 3, "ff_activation": "relu"},
                                       {"summary_type": "first", "summary_activation": "linear"},
                                       {"summary_type": "mean", "summary_use_proj": False}])
def test_config_options_match_transformers(tmp_path, overrides):
    theirs = hf_saved("XLNetForSequenceClassification", tmp_path / "hf", **overrides)
    ours = XLNetForSequenceClassification.from_pretrained(tmp_path / "hf").eval()
    ids, mask, types = left_padded_batch()
    perm, target = permutation_inputs(mask)
    # transformers' "uni" path cannot take a [batch > 1] padding or perm mask (an in-place broadcast fails),
    # so there both models see whole rows and the query stream without a perm_mask (its causal mask orders)
    uni = overrides.get("attn_type") == "uni"
    padding = {} if uni else {"attention_mask": mask}
    with torch.no_grad():
        logits = ours(ids, token_type_ids=types, **padding).logits
        assert_close(logits, theirs(ids, token_type_ids=types, **padding).logits)
        again = assert_saves_back(ours, theirs, tmp_path / "ours")  # the options survive our config.json
        assert_close(logits, again(ids, token_type_ids=types, **padding).logits)
        lm = XLNetLMHeadModel.from_pretrained(tmp_path / "hf").eval()
        hf_lm = transformers.XLNetLMHeadModel.from_pretrained(tmp_path / "hf").eval()
        inputs = dict(target_mapping=target, **padding, **({} if uni else {"perm_mask": perm}))
        assert_close(lm(ids, **inputs).logits, hf_lm(ids, **inputs).logits)


def test_left_padding_does_not_change_a_rows_outputs(tmp_path):
    """A row alone (no padding) and the same row behind left padding give the same real-token outputs."""
    hf_saved("XLNetModel", tmp_path)
    ours = XLNetModel.from_pretrained(tmp_path).eval()
    ids, mask, types = left_padded_batch()
    row = 1
    real = mask[row].bool()
    with torch.no_grad():
        padded = ours(ids, attention_mask=mask, token_type_ids=types).last_hidden_state[row][real]
        alone = ours(ids[row:row + 1, real], token_type_ids=types[row:row + 1, real]).last_hidden_state[0]
    assert_close(padded, alone)


@pytest.mark.parametrize("overrides, remembered", [  # segments of 7, 13 and 13 tokens
    ({}, 33), ({"mem_len": 6}, 6), ({"reuse_len": 4, "mem_len": 9}, 9), ({"attn_type": "uni", "mem_len": 20}, 20),
    ({"attn_type": "uni", "same_length": True}, 33)])
def test_segment_recurrence_matches_transformers(tmp_path, overrides, remembered):
    """Three segments in turn, each attending to the memory the previous calls left (mem_len cuts it,
    reuse_len keeps a segment's first tokens only): outputs and memories equal transformers' ([M, B, H] there)."""
    theirs = hf_saved("XLNetLMHeadModel", tmp_path, **overrides)
    ours = XLNetLMHeadModel.from_pretrained(tmp_path).eval()
    uni = overrides.get("attn_type") == "uni"  # transformers' "uni" takes no padding or perm mask in a batch
    first = torch.randint(6, VOCAB, (4, 7), generator=torch.Generator().manual_seed(3))
    ids, mask, types = left_padded_batch()
    perm, target = permutation_inputs(mask)
    segments = [dict(input_ids=first),
                dict(input_ids=ids, token_type_ids=types, **({} if uni else {"attention_mask": mask})),
                dict(input_ids=ids.flip(0), target_mapping=target.flip(0),
                     **({} if uni else {"attention_mask": mask.flip(0), "perm_mask": perm.flip(0)}))]
    mine = reference = None
    with torch.no_grad():
        for inputs in segments:
            a = ours(**inputs, mems=mine, use_mems=True)
            b = theirs(**inputs, mems=reference, use_mems=True)
            assert_close(a.logits, b.logits)
            assert len(a.mems) == len(b.mems) == 2
            for m, r in zip(a.mems, b.mems):
                assert_close(m, r.transpose(0, 1))
            mine, reference = a.mems, b.mems
    assert mine[0].shape[1] == remembered


# ---- learning ------------------------------------------------------------------------------------------------------
def test_lm_head_learns_a_permutation_target():
    """Toy rows count up from a random start; a fixed factorisation order hides the last three tokens of the
    order from the rest, and the query stream must name them from the visible ones and their offsets."""
    torch.manual_seed(0)
    config = XLNetConfig(vocab_size=40, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=128, hidden_dropout_prob=0.0, summary_last_dropout=0.0, pad_token_id=0)
    model = XLNetLMHeadModel(config)
    L, B = 8, 16
    order = torch.tensor([3, 0, 6, 1, 7, 4, 2, 5])  # position order[k] is the k-th in the factorisation
    rank = torch.empty(L, dtype=torch.long)
    rank[order] = torch.arange(L)
    perm = (rank[None, :] >= rank[:, None]).float().expand(B, L, L)
    targets = order[-3:]
    target_mapping = torch.zeros(B, 3, L)
    target_mapping[:, torch.arange(3), targets] = 1.0
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(120):
        start = torch.randint(1, 30, (B, 1))
        ids = start + torch.arange(L)[None]
        loss = model(ids, perm_mask=perm, target_mapping=target_mapping, labels=ids[:, targets]).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert sum(losses[-10:]) / 10 < 0.2 * sum(losses[:5]) / 5, (losses[:5], losses[-10:])


# ---- configs, registration and bad input ---------------------------------------------------------------------------
def test_config_json_round_trips_with_transformers_names(tmp_path):
    hf_saved("XLNetForSequenceClassification", tmp_path / "hf", clamp_len=7, num_labels=3)
    ours = AutoModelForSequenceClassification.from_pretrained(tmp_path / "hf")
    assert isinstance(ours, XLNetForSequenceClassification)
    assert (ours.config.hidden_size, ours.config.num_hidden_layers, ours.config.clamp_len) == (64, 2, 7)
    ours.save_pretrained(tmp_path / "ours")
    saved = json.loads((tmp_path / "ours" / "config.json").read_text())
    assert saved["d_model"] == 64 and saved["d_head"] == 16 and saved["model_type"] == "xlnet"
    assert not {"hidden_size", "max_position_embeddings", "type_vocab_size"} & set(saved)
    hf = transformers.AutoConfig.from_pretrained(tmp_path / "ours")
    assert (hf.d_model, hf.n_layer, hf.clamp_len, hf.num_labels) == (64, 2, 7, 3)
    assert isinstance(AutoModel.from_pretrained(tmp_path / "ours"), XLNetModel)
    assert isinstance(preset_config("xlnet-tiny"), XLNetConfig)


@pytest.mark.parametrize("field, value", [("bi_data", True), ("attn_type", "both"), ("d_head", 8),
                                          ("summary_type", "cls_index")])
def test_bad_config_fields_are_named(tmp_path, field, value):
    hf_saved("XLNetModel", tmp_path)
    data = json.loads((tmp_path / "config.json").read_text())
    data[field] = value
    (tmp_path / "config.json").write_text(json.dumps(data))
    with pytest.raises(CheckpointError, match=field):
        XLNetModel.from_pretrained(tmp_path)


def test_config_that_does_not_fit_the_weights_names_d_model(tmp_path):
    hf_saved("XLNetModel", tmp_path)
    data = json.loads((tmp_path / "config.json").read_text())
    data.update(d_model=32, d_head=8)
    (tmp_path / "config.json").write_text(json.dumps(data))
    with pytest.raises(CheckpointError, match="'d_model' is 32"):
        XLNetModel.from_pretrained(tmp_path)


def test_refusals_are_one_line():
    model = XLNetModel(XLNetConfig(vocab_size=20, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                   intermediate_size=32, pad_token_id=0))
    ids = torch.randint(0, 20, (2, 5))
    with pytest.raises(ValueError, match="mems must be 1 tensors"):
        model(ids, mems=[torch.zeros(3, 2, 16)])  # transformers' [memory, batch, hidden] layout
    with pytest.raises(ValueError, match="not both"):
        model(ids, attention_mask=torch.ones(2, 5), input_mask=torch.zeros(2, 5))
    with pytest.raises(ValueError, match="perm_mask must be"):
        model(ids, perm_mask=torch.zeros(2, 5, 4))
    with pytest.raises(ConfigError, match="d_model"):
        XLNetConfig(hidden_size=15, num_attention_heads=3)

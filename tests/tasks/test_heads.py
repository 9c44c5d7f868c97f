"""The four fine-tuning heads against `transformers`: same outputs and losses, checkpoints load both ways."""
from __future__ import annotations

import json

import pytest
import torch

from bertforge import (BertConfig, BertForMultipleChoice, BertForQuestionAnswering, BertForSequenceClassification,
                       BertForTokenClassification)

from needs import require_module

transformers = require_module("transformers")

TOL = 1e-5


def small_config(**kw) -> BertConfig:
    return BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=64, max_position_embeddings=64, **kw)


def batch(vocab: int = 100, b: int = 3, seq: int = 13, seed: int = 0, lengths=(13, 9, 4)):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (b, seq), generator=g)
    mask = (torch.arange(seq)[None] < torch.tensor(lengths)[:b, None]).long()
    types = (torch.arange(seq)[None] >= 3).long() * mask
    return ids * mask, mask, types


def roundtrip(ours_cls, hf_cls, config, tmp_path):
    torch.manual_seed(0)
    ours = ours_cls(config).eval()
    ours.save_pretrained(tmp_path / "ours")
    theirs = hf_cls.from_pretrained(tmp_path / "ours").eval()
    theirs.save_pretrained(tmp_path / "theirs")
    back = ours_cls.from_pretrained(tmp_path / "theirs").eval()
    assert back.loading_info.get("newly_initialized", []) == []
    assert back.loading_info.get("unused", []) == []
    return ours, theirs, back


@pytest.mark.parametrize("num_labels", [3, 1])
def test_sequence_classification_parity(tmp_path, num_labels):
    id2label = {i: f"L{i}" for i in range(num_labels)}
    config = small_config(id2label=id2label)
    ours, theirs, back = roundtrip(BertForSequenceClassification, transformers.BertForSequenceClassification,
                                   config, tmp_path)
    assert theirs.config.num_labels == num_labels
    assert theirs.config.id2label == id2label
    assert back.config.id2label == id2label
    saved = json.loads((tmp_path / "ours" / "config.json").read_text())
    assert saved["label2id"] == {v: k for k, v in id2label.items()}
    ids, mask, types = batch()
    labels = torch.tensor([0.5, 2.0, 4.1]) if num_labels == 1 else torch.tensor([0, 2, 1])
    with torch.no_grad():
        a = ours(ids, attention_mask=mask, token_type_ids=types, labels=labels)
        b = theirs(input_ids=ids, attention_mask=mask, token_type_ids=types, labels=labels)
        c = back(ids, attention_mask=mask, token_type_ids=types)
    assert a.logits.shape == (3, num_labels)
    assert (a.logits - b.logits).abs().max() < TOL
    assert (c.logits - b.logits).abs().max() < TOL
    assert abs(a.loss.item() - b.loss.item()) < TOL


def test_token_classification_parity(tmp_path):
    config = small_config(id2label={i: t for i, t in enumerate(["O", "B-PER", "I-PER", "B-LOC", "I-LOC"])})
    ours, theirs, back = roundtrip(BertForTokenClassification, transformers.BertForTokenClassification,
                                   config, tmp_path)
    ids, mask, types = batch()
    labels = torch.randint(0, 5, ids.shape, generator=torch.Generator().manual_seed(1))
    labels[mask == 0] = -100
    labels[:, 0] = -100
    labels[0, 4] = -100
    with torch.no_grad():
        a = ours(ids, attention_mask=mask, token_type_ids=types, labels=labels)
        b = theirs(input_ids=ids, attention_mask=mask, token_type_ids=types, labels=labels)
        c = back(ids, attention_mask=mask, token_type_ids=types)
    real = mask.bool()
    assert (a.logits[real] - b.logits[real]).abs().max() < TOL
    assert (c.logits[real] - b.logits[real]).abs().max() < TOL
    assert (a.logits[~real] == 0).all()  # nothing computed on padding
    assert abs(a.loss.item() - b.loss.item()) < TOL


def test_question_answering_parity(tmp_path):
    config = small_config()
    ours, theirs, back = roundtrip(BertForQuestionAnswering, transformers.BertForQuestionAnswering, config, tmp_path)
    ids, mask, types = batch(lengths=(13, 13, 13))  # no padding: HF's loss also sees no padding then
    start, end = torch.tensor([3, 5, 13]), torch.tensor([4, 8, 20])  # the last one is out of range: ignored
    with torch.no_grad():
        a = ours(ids, attention_mask=mask, token_type_ids=types, start_positions=start, end_positions=end)
        b = theirs(input_ids=ids, attention_mask=mask, token_type_ids=types, start_positions=start,
                   end_positions=end)
    assert (a.start_logits - b.start_logits).abs().max() < TOL
    assert (a.end_logits - b.end_logits).abs().max() < TOL
    assert abs(a.loss.item() - b.loss.item()) < TOL
    ids, mask, types = batch()
    with torch.no_grad():
        a = back(ids, attention_mask=mask, token_type_ids=types)
        b = theirs(input_ids=ids, attention_mask=mask, token_type_ids=types)
    real = mask.bool()
    assert (a.start_logits[real] - b.start_logits[real]).abs().max() < TOL
    assert (a.end_logits[real] - b.end_logits[real]).abs().max() < TOL
    assert (a.start_logits[~real] < -1e30).all()  # padding can never be picked as an answer


def test_multiple_choice_parity(tmp_path):
    config = small_config()
    ours, theirs, back = roundtrip(BertForMultipleChoice, transformers.BertForMultipleChoice, config, tmp_path)
    ids, mask, types = batch(b=2, seed=3, lengths=(13, 9))
    ids, mask, types = (t.unsqueeze(0).expand(3, 2, 13).reshape(3, 2, 13).clone() for t in (ids, mask, types))
    ids[:, 1, 2] = 7  # make the choices differ
    labels = torch.tensor([0, 1, 1])
    with torch.no_grad():
        a = ours(ids, attention_mask=mask, token_type_ids=types, labels=labels)
        b = theirs(input_ids=ids, attention_mask=mask, token_type_ids=types, labels=labels)
        c = back(ids, attention_mask=mask, token_type_ids=types)
    assert a.logits.shape == (3, 2)
    assert (a.logits - b.logits).abs().max() < TOL
    assert (c.logits - b.logits).abs().max() < TOL
    assert abs(a.loss.item() - b.loss.item()) < TOL


def test_classifier_starts_fresh_on_an_encoder_only_checkpoint(tmp_path):
    from bertforge import BertModel
    BertModel(small_config()).save_pretrained(tmp_path / "enc")
    model = BertForSequenceClassification.from_pretrained(tmp_path / "enc", id2label={0: "neg", 1: "pos"})
    assert sorted(model.loading_info["newly_initialized"]) == ["classifier.bias", "classifier.weight"]
    assert model.config.label2id == {"neg": 0, "pos": 1}

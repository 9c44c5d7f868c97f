"""The unpadded path must give what the padded one gives, on real tokens, for every class and for grads."""
from __future__ import annotations

import torch

from bertforge import BertConfig, BertForPreTraining, BertModel


def batch(seq=20):
    torch.manual_seed(3)
    ids = torch.randint(5, 200, (5, seq))
    lengths = torch.tensor([seq, 1, 7, seq - 3, 12])
    mask = (torch.arange(seq)[None] < lengths[:, None]).long()
    return ids * mask, mask


def test_unpadded_equals_padded_forward_and_backward():
    config = BertConfig.preset("tiny", vocab_size=200, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = BertForPreTraining(config)
    ids, mask = batch()
    labels = torch.full_like(ids, -100)
    labels[0, 2], labels[2, 6], labels[4, 0] = 5, 6, 7
    nsp = torch.tensor([0, 1, 0, 1, 1])
    grads = []
    outs = []
    for unpad in (True, False):
        model.zero_grad()
        out = model(ids, attention_mask=mask, labels=labels, next_sentence_label=nsp, unpad=unpad)
        out.loss.backward()
        outs.append(out)
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    a, b = outs
    assert torch.allclose(a.prediction_logits, b.prediction_logits, atol=1e-5)
    assert torch.allclose(a.seq_relationship_logits, b.seq_relationship_logits, atol=1e-5)
    assert abs(a.loss.item() - b.loss.item()) < 1e-5
    for name in grads[0]:
        assert torch.allclose(grads[0][name], grads[1][name], atol=1e-5), name


def test_padding_does_not_change_a_sequence():
    """A sentence alone and the same sentence in a padded batch give the same vectors."""
    model = BertModel(BertConfig.preset("tiny", vocab_size=200)).eval()
    ids, mask = batch()
    with torch.no_grad():
        together = model(ids, attention_mask=mask)
        alone = model(ids[2:3, :7])
    assert torch.allclose(together.last_hidden_state[2, :7], alone.last_hidden_state[0], atol=1e-5)
    assert torch.allclose(together.pooler_output[2], alone.pooler_output[0], atol=1e-5)
    assert together.last_hidden_state[2, 7:].abs().max() == 0  # padded rows are zeros, never garbage


def test_causal_mask_hides_the_future():
    model = BertModel(BertConfig.preset("tiny", vocab_size=200)).eval()
    ids, mask = batch()
    changed = ids.clone()
    changed[0, 10:] = 9
    with torch.no_grad():
        a = model(ids, attention_mask=mask, causal=True).last_hidden_state
        b = model(changed, attention_mask=mask, causal=True).last_hidden_state
        c = model(ids, attention_mask=mask, causal=False).last_hidden_state
        d = model(changed, attention_mask=mask, causal=False).last_hidden_state
    assert torch.allclose(a[0, :10], b[0, :10], atol=1e-6)
    assert not torch.allclose(c[0, :10], d[0, :10], atol=1e-4)


def test_bf16_autocast_runs_and_stays_close():
    model = BertForPreTraining(BertConfig.preset("tiny", vocab_size=200)).eval()
    ids, mask = batch()
    labels = torch.where(mask.bool() & (torch.rand(ids.shape) < 0.3), ids, torch.full_like(ids, -100))
    device_type = "cuda" if torch.cuda.is_available() else "cpu"
    model.to(device_type)
    ids, mask, labels = ids.to(device_type), mask.to(device_type), labels.to(device_type)
    with torch.no_grad():
        ref = model(ids, attention_mask=mask, labels=labels)
        with torch.autocast(device_type, dtype=torch.bfloat16):
            low = model(ids, attention_mask=mask, labels=labels)
    assert low.loss.dtype == torch.float32  # losses are computed in fp32
    assert abs(low.loss.item() - ref.loss.item()) < 0.05
    assert torch.isfinite(low.prediction_logits).all()


def test_labels_on_padding_are_rejected():
    model = BertForPreTraining(BertConfig.preset("tiny", vocab_size=200))
    ids, mask = batch()
    labels = torch.full_like(ids, -100)
    labels[1, 5] = 3  # sequence 1 has length 1
    try:
        model(ids, attention_mask=mask, labels=labels)
    except ValueError as err:
        assert "padding" in str(err)
    else:
        raise AssertionError("labels on padding must raise")

"""The attention scatter's hand-written backward against autograd's own, in both gradient layouts SDPA gives."""
from __future__ import annotations

import pytest
import torch

from bertforge.model.attention import _ScatterToHeads


def reference_scatter(heads_major, indices, B, L):
    three, h, _, d = heads_major.shape
    grid = heads_major.new_zeros(three, h, B * L, d).index_copy(2, indices, heads_major)
    return grid.view(three, h, B, L, d).unbind(0)


@pytest.mark.parametrize("layout", ["heads-batch-seq", "heads-seq-batch"])
def test_scatter_to_heads_matches_autograd(layout):
    torch.manual_seed(0)
    h, B, L, d = 3, 4, 7, 5
    lengths = [7, 3, 5, 1]
    indices = torch.cat([torch.arange(n) + b * L for b, n in enumerate(lengths)])
    token_major = torch.randn(int(sum(lengths)), 3, h, d)           # like the QKV projection's output
    grads = []
    for _ in range(3):
        g = torch.randn(h, B, L, d)
        if layout == "heads-seq-batch":                              # CPU flash attention's gradient layout
            g = g.transpose(1, 2).contiguous().transpose(1, 2)
        grads.append(g)
    results = []
    for fn in (_ScatterToHeads.apply, reference_scatter):
        x = token_major.clone().requires_grad_()
        outs = fn(x.permute(1, 2, 0, 3), indices, B, L)
        torch.autograd.backward(outs, grads)
        results.append((torch.stack(outs).detach(), x.grad))
    (ours, our_grad), (ref, ref_grad) = results
    assert torch.equal(ours, ref)
    assert torch.equal(our_grad, ref_grad)
    assert ours[:, :, 1, 3:].abs().sum() == 0 and ours[:, :, 3, 1:].abs().sum() == 0   # padding stays zero


def _attention_inputs(mask_kind: str):
    torch.manual_seed(0)
    h, B, L, d = 2, 3, 6, 4
    q, k, v = (torch.randn(h, B, L, d, requires_grad=True) for _ in range(3))
    keys = torch.arange(L)[None, :] < torch.tensor([6, 4, 1])[:, None]         # [B, L], real keys
    if mask_kind == "none":
        mask = None
    elif mask_kind == "padding":
        mask = keys[None, :, None, :]                                             # [1, B, 1, L]
    else:                                                                         # causal and padding
        mask = (keys[:, None, :] & torch.ones(L, L, dtype=torch.bool).tril())[None]  # [1, B, L, L]
    return q, k, v, mask


@pytest.mark.parametrize("mask_kind", ["none", "padding", "causal"])
def test_explicit_attention_without_dropout_is_sdpa(mask_kind):
    from bertforge.model.attention import attention_with_dropout
    q, k, v, mask = _attention_inputs(mask_kind)
    grad = torch.randn_like(q)
    results = []
    for fn in (lambda: attention_with_dropout(q, k, v, mask, 0.0),
               lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)):
        y = fn()
        dq, dk, dv = torch.autograd.grad(y, (q, k, v), grad)
        results.append((y, dq, dk, dv))
    for ours, ref in zip(*results):
        torch.testing.assert_close(ours, ref, atol=1e-5, rtol=1e-5)


def test_explicit_attention_drops_the_probabilities():
    """Dropout acts on softmax's output (as in BERT and SDPA), with the module's mask, rescaled by 1 / (1 - p)."""
    from bertforge.model.attention import attention_with_dropout
    from bertforge.model.dropout import keep_mask
    q, k, v, mask = _attention_inputs("padding")
    torch.manual_seed(7)
    ours = attention_with_dropout(q, k, v, mask, 0.25)
    probs = torch.softmax((q @ k.transpose(-1, -2)) / 2.0 + torch.zeros(mask.shape).masked_fill(~mask, -torch.inf),
                          dim=-1)
    torch.manual_seed(7)
    keep = keep_mask(probs.shape, 0.25)
    torch.testing.assert_close(ours, (probs * keep / 0.75) @ v)
    assert not torch.allclose(ours, probs @ v)


def test_model_takes_the_explicit_path_only_when_training_with_dropout(monkeypatch):
    from bertforge import BertConfig, BertModel
    from bertforge.model import attention as attention_module
    calls = []
    real = attention_module.attention_with_dropout
    monkeypatch.setattr(attention_module, "attention_with_dropout", lambda *a: calls.append(1) or real(*a))
    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16)
    model = BertModel(config)
    ids = torch.randint(5, 50, (3, 9))
    mask = (torch.arange(9)[None, :] < torch.tensor([9, 5, 2])[:, None]).long()
    model.eval()(ids, attention_mask=mask)
    assert calls == []
    model.train()(ids, attention_mask=mask)[0].sum().backward()
    assert len(calls) == 2


@pytest.mark.parametrize("layout", ["heads-batch-seq", "heads-seq-batch"])
def test_unpadded_split_matches_autograd(layout):
    """Without padding the Function only splits q/k/v (no index); its backward writes the projection's layout."""
    torch.manual_seed(1)
    h, B, L, d = 3, 2, 5, 4
    token_major = torch.randn(B * L, 3, h, d)
    grads = [torch.randn(h, B, L, d) for _ in range(3)]
    if layout == "heads-seq-batch":
        grads = [g.transpose(1, 2).contiguous().transpose(1, 2) for g in grads]
    results = []
    for fn in (lambda hm: _ScatterToHeads.apply(hm, None, B, L),
               lambda hm: hm.contiguous().view(3, h, B, L, d).unbind(0)):
        x = token_major.clone().requires_grad_()
        outs = fn(x.permute(1, 2, 0, 3))
        torch.autograd.backward(outs, grads)
        results.append((torch.stack(outs).detach(), x.grad))
    assert torch.equal(results[0][0], results[1][0])
    assert torch.equal(results[0][1], results[1][1])

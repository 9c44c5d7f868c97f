"""Attention's scatter into per-group grids and gather back, against autograd's own, and the explicit path."""
from __future__ import annotations

import pytest
import torch

from bertforge.model.attention import _GatherFromGroups, _ScatterToGroups
from bertforge.model.packing import PackedBatch


def packed_batch(lengths, L):
    mask = (torch.arange(L)[None] < torch.tensor(lengths)[:, None]).long()
    return PackedBatch.from_mask(mask, len(lengths), L, torch.device("cpu"))


def reference_scatter(heads_major, groups):
    out = []
    for g in groups:
        rows = heads_major[:, :, g.start:g.stop]
        three, h, _, d = rows.shape
        grid = rows if g.slots is None else rows.new_zeros(three, h, g.count * g.length, d).index_copy(2, g.slots,
                                                                                                        rows)
        out.extend(grid.reshape(three, h, g.count, g.length, d).unbind(0))
    return out


def reference_gather(groups, ys):
    parts = []
    for g, y in zip(groups, ys):
        h, d = y.shape[0], y.shape[-1]
        flat = y.reshape(h, g.count * g.length, d)
        parts.append(flat if g.slots is None else flat.index_select(1, g.slots))
    joined = torch.cat(parts, dim=1)
    return joined.transpose(0, 1).reshape(joined.shape[1], -1)


CASES = {"groups": ([7, 1, 2, 7, 6, 3, 0], 7), "no padding": ([5, 5, 5], 5), "one group": ([4, 3, 4], 4)}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("layout", ["heads-count-length", "heads-length-count"])
def test_scatter_and_gather_match_autograd(case, layout):
    torch.manual_seed(0)
    lengths, L = CASES[case]
    batch = packed_batch(lengths, L)
    if case == "groups":
        assert len(batch.groups) > 1
    h, d = 3, 5
    T = batch.groups[-1].stop
    token_major = torch.randn(T, 3, h, d)                                   # like the QKV projection's output
    grads = []
    for g in batch.groups:
        for _ in range(3):
            grad = torch.randn(h, g.count, g.length, d)
            if layout == "heads-length-count":                              # CPU flash attention's layout
                grad = grad.transpose(1, 2).contiguous().transpose(1, 2)
            grads.append(grad)
    results = []
    for fn in (lambda hm: _ScatterToGroups.apply(hm, batch.groups), lambda hm: reference_scatter(hm, batch.groups)):
        x = token_major.clone().requires_grad_()
        outs = fn(x.permute(1, 2, 0, 3))
        torch.autograd.backward(outs, grads)
        results.append(([o.detach() for o in outs], x.grad))
    (ours, our_grad), (ref, ref_grad) = results
    assert all(torch.equal(a, b) for a, b in zip(ours, ref))
    assert torch.equal(our_grad, ref_grad)
    for g, q in zip(batch.groups, ours[::3]):                               # padded slots stay zero
        real = torch.zeros(g.count * g.length, dtype=torch.bool)
        if g.slots is not None:
            real[g.slots] = True
            assert q.reshape(h, -1, d)[:, ~real].abs().sum() == 0

    ys = [torch.randn(h, g.count, g.length, d) for g in batch.groups]
    if layout == "heads-length-count":
        ys = [y.transpose(1, 2).contiguous().transpose(1, 2) for y in ys]
    grad = torch.randn(T, h * d)
    results = []
    for fn in (lambda *a: _GatherFromGroups.apply(batch.groups, *a), lambda *a: reference_gather(batch.groups, a)):
        inputs = [y.clone().requires_grad_() for y in ys]
        out = fn(*inputs)
        out.backward(grad)
        results.append((out.detach(), [i.grad for i in inputs]))
    (ours, our_grads), (ref, ref_grads) = results
    assert torch.equal(ours, ref)
    assert all(torch.equal(a, b) for a, b in zip(our_grads, ref_grads))


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
    assert len(calls) == 2 * 3  # two layers, three attention groups (lengths 9, 5 and 2)


def test_bf16_training_on_cpu_takes_the_explicit_path_and_agrees_with_sdpa(monkeypatch):
    """CPU bf16 training spells attention out (SDPA's bf16 backward is the slow one there); bf16 inference and
    fp32 training without dropout keep SDPA. Both paths give the same loss and gradients to bf16 precision."""
    from bertforge import BertConfig, BertForMaskedLM
    from bertforge.model import attention as attention_module
    from bertforge.model.kernels import Kernels
    calls = []
    real = attention_module.attention_with_dropout
    monkeypatch.setattr(attention_module, "attention_with_dropout", lambda *a: calls.append(1) or real(*a))
    config = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=16, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    model = BertForMaskedLM(config).train()
    ids = torch.randint(5, 50, (3, 9))
    mask = (torch.arange(9)[None, :] < torch.tensor([9, 5, 2])[:, None]).long()
    picked = (torch.rand(3, 9) < 0.4) & mask.bool()
    picked[0, 1] = True
    labels = torch.where(picked, ids, torch.full_like(ids, -100))

    def step(kernels):
        model.set_kernels(kernels).zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    model(ids, attention_mask=mask, labels=labels).loss.backward()  # fp32, no dropout: SDPA
    assert calls == []
    loss, grads = step(Kernels())
    assert len(calls) == 2 * 3  # two layers, three attention groups
    ref_loss, ref_grads = step(Kernels(explicit_attention_bf16=False))
    assert len(calls) == 2 * 3
    torch.testing.assert_close(loss, ref_loss, atol=2e-2, rtol=1e-2)
    for name, grad in grads.items():
        scale = ref_grads[name].abs().max().item() + 1e-6
        assert (grad - ref_grads[name]).abs().max().item() / scale < 0.1, name
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        model.set_kernels(Kernels())(ids, attention_mask=mask)
    assert len(calls) == 2 * 3  # inference keeps SDPA

"""Attention groups: the plan is optimal, the packed order is consistent, and grouping changes no number."""
from __future__ import annotations

import itertools

import pytest
import torch

from bertforge import BertConfig, BertForPreTraining
from bertforge.model.kernels import Kernels
from bertforge.model.packing import PackedBatch, plan_groups


def cost(groups, spans):
    return sum(len(g) * max(spans[i] for i in g) ** 2 for g in groups)


def brute_force(spans, n_groups):
    """Best split of the span-sorted sequences into exactly n_groups contiguous runs."""
    order = sorted(range(len(spans)), key=lambda i: spans[i])
    best = None
    for cuts in itertools.combinations(range(1, len(spans)), n_groups - 1):
        bounds = (0, *cuts, len(spans))
        groups = [order[a:b] for a, b in zip(bounds, bounds[1:])]
        c = cost(groups, spans)
        best = c if best is None else min(best, c)
    return best


@pytest.mark.parametrize("seed", range(6))
def test_plan_is_optimal_and_a_partition(seed):
    g = torch.Generator().manual_seed(seed)
    spans = torch.randint(1, 40, (9,), generator=g).tolist()
    groups = plan_groups(spans, max_groups=3, min_saving=0.0)
    assert sorted(i for grp in groups for i in grp) == list(range(len(spans)))
    assert all(grp == sorted(grp) for grp in groups)                   # batch order inside a group
    assert cost(groups, spans) == min(brute_force(spans, k) for k in (1, 2, 3) if k <= len(spans))


def test_plan_keeps_one_grid_unless_splitting_pays():
    assert plan_groups([128] * 31 + [120]) == [list(range(32))]      # saving 0.6 %: not worth a group
    assert len(plan_groups([128] * 16 + [30] * 16)) == 2
    assert len(plan_groups([5, 5, 5])) == 1


def test_packed_order_is_consistent():
    L = 10
    lengths = torch.tensor([10, 2, 9, 3, 0, 1])
    mask = (torch.arange(L)[None] < lengths[:, None]).long()
    batch = PackedBatch.from_mask(mask, 6, L, torch.device("cpu"))
    assert len(batch.groups) > 1
    ids = torch.arange(60).view(6, L) * mask
    packed = batch.pack(ids)
    assert sorted(packed.tolist()) == sorted(ids[mask.bool()].tolist())      # every real token once
    assert torch.equal(batch.unpack(packed), ids)
    positions = torch.zeros(6, L, dtype=torch.bool)
    positions[0, 4], positions[2, 8], positions[5, 0] = True, True, True
    assert packed[batch.rows_of(positions)].tolist() == [4, 28, 50]          # label order, not packed order
    cls_rows = batch.first_token_rows()
    assert packed[cls_rows[[0, 1, 2, 3, 5]]].tolist() == [0, 10, 20, 30, 50]
    for g in batch.groups:                                                   # a group's rows are its own
        seqs = {int(i) // L for i in batch.indices[g.start:g.stop]}
        assert len(seqs) <= g.count and g.length == max(int(lengths[s]) for s in seqs)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_groups_change_no_number(monkeypatch, causal, dropout):
    """The whole model with attention groups against one padded grid: same loss, logits and gradients."""
    config = BertConfig.preset("tiny", vocab_size=300, hidden_dropout_prob=0.0, attention_probs_dropout_prob=dropout)
    torch.manual_seed(0)
    model = BertForPreTraining(config).train()
    L = 24
    lengths = torch.tensor([24, 3, 17, 6, 24, 11, 2, 20])
    mask = (torch.arange(L)[None] < lengths[:, None]).long()
    ids = torch.randint(5, 300, (8, L)) * mask
    labels = torch.full_like(ids, -100)
    labels[mask.bool() & (torch.rand(8, L) < 0.3)] = 7
    labels[:, 0] = 9
    nsp = torch.randint(0, 2, (8,))
    results = []
    for max_groups in (4, 1):
        model.set_kernels(Kernels(attention_groups=max_groups))
        model.zero_grad()
        torch.manual_seed(1)
        out = model(ids, attention_mask=mask, labels=labels, next_sentence_label=nsp, causal=causal)
        out.loss.backward()
        n = len(PackedBatch.from_mask(mask, 8, L, torch.device("cpu"), max_groups=max_groups).groups)
        results.append((n, out, {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}))
    (n_grouped, a, grads_a), (n_single, b, grads_b) = results
    assert n_grouped > 1 and n_single == 1
    if dropout:  # the masks are drawn per group, so only the shapes and finiteness can be compared
        assert torch.isfinite(a.loss) and a.prediction_logits.shape == b.prediction_logits.shape
        return
    torch.testing.assert_close(a.prediction_logits, b.prediction_logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(a.seq_relationship_logits, b.seq_relationship_logits, atol=1e-5, rtol=1e-5)
    for k in grads_a:
        torch.testing.assert_close(grads_a[k], grads_b[k], atol=1e-5, rtol=1e-4, msg=k)

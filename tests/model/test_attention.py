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

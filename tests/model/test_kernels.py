"""The fast path (unpadding, attention groups, cheap CPU dropout, explicit attention, tiled decoder) against the
plain padded reference path, chosen by one `Kernels` object on the model."""
from __future__ import annotations

import pytest
import torch

from bertforge import BertConfig, BertForPreTraining
from bertforge.model.kernels import Kernels

MODERN = dict(pre_norm=True, feed_forward_glu=True, attention_bias=False, mlp_bias=False, norm_bias=False,
              rope_theta=10000.0, local_attention=4, global_attn_every_n_layers=2)


@pytest.mark.parametrize("options", [{}, MODERN], ids=["bert", "modern-options"])
def test_fast_and_reference_kernels_compute_the_same(options):
    config = BertConfig(vocab_size=300, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=32, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0, **options)
    torch.manual_seed(0)
    model = BertForPreTraining(config).train()
    L = 17
    lengths = torch.tensor([17, 9, 3, 12, 1, 16])
    mask = (torch.arange(L)[None] < lengths[:, None]).long()
    ids = torch.randint(5, 300, (6, L)) * mask
    labels = torch.full_like(ids, -100)
    labels[mask.bool() & (torch.rand(6, L) < 0.3)] = 11
    labels[:, 0] = 7
    nsp = torch.randint(0, 2, (6,))
    results = []
    # the export layout ([batch, seq, hidden], attention spelled out) applies to BERT's options; under the modern
    # ones (rotary, local attention) the model keeps the flat reference layout
    for kernels in (Kernels.fast(), Kernels.reference(), Kernels.export()):
        model.set_kernels(kernels)
        assert all(getattr(m, "kernels", kernels) is kernels for m in model.modules())
        model.zero_grad()
        out = model(ids, attention_mask=mask, labels=labels, next_sentence_label=nsp)
        out.loss.backward()
        results.append((out, {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}))
    (a, ga), *others = results
    for b, gb in others:
        torch.testing.assert_close(a.loss, b.loss, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(a.prediction_logits, b.prediction_logits, atol=1e-5, rtol=1e-5)
        for key in ga:
            torch.testing.assert_close(ga[key], gb[key], atol=1e-5, rtol=1e-4, msg=key)


def test_reference_kernels_use_torch_dropout():
    """With dropout on, the reference path draws torch's own masks: the same seed gives F.dropout's mask."""
    from bertforge.model.dropout import Dropout
    layer = Dropout(0.5).train()
    x = torch.ones(1000)
    layer.kernels = Kernels.reference()
    torch.manual_seed(3)
    ours = layer(x)
    torch.manual_seed(3)
    assert torch.equal(ours, torch.nn.functional.dropout(x, 0.5, training=True))
    layer.kernels = Kernels.fast()
    torch.manual_seed(3)
    assert not torch.equal(layer(x), ours), "the fast path draws its own (cheaper) masks"

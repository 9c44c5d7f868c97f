"""ModernBERT's local layers at long lengths: past a few windows, the sliding window is computed band by band
(Longformer's kernel, no global tokens) instead of under a [length, length] mask; outputs and gradients stay
those of the dense mask and of transformers' ModernBERT."""
from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from bertforge.model.encoder import BANDED_FROM
from bertforge.model.kernels import Kernels
from bertforge.model.modernbert import ModernBertConfig, ModernBertForMaskedLM, ModernBertModel
from bertforge.model.packing import PackedBatch

from needs import require_module

transformers = require_module("transformers")
TOL = 1e-5
WINDOW = 8
SPECIAL = {"bos_token_id": 1, "eos_token_id": 2, "cls_token_id": 1, "sep_token_id": 2}


def long_config(**overrides) -> ModernBertConfig:
    fields = dict(vocab_size=120, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=48,
                  pad_token_id=0, max_position_embeddings=4096, local_attention=WINDOW, global_attn_every_n_layers=3,
                  extra=dict(SPECIAL))
    fields.update(overrides)
    return ModernBertConfig(**fields)


def padded_batch(lengths=(300, 170, 45)):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 120, (len(lengths), max(lengths)), generator=g)
    mask = (torch.arange(max(lengths))[None] < torch.tensor(lengths)[:, None]).long()
    return ids * mask, mask


def test_long_rows_equal_transformers_and_the_dense_mask(tmp_path):
    """Rows 37 and 21 windows long (banded) and one of 5.6 windows (banded too: the batch's longest decides per
    group) give transformers' ModernBERT logits to 1e-5, and the reference kernels' (dense mask) gradients."""
    assert 300 > BANDED_FROM * WINDOW
    torch.manual_seed(0)
    ours = ModernBertForMaskedLM(long_config()).eval()
    ours.save_pretrained(tmp_path / "m")
    theirs = transformers.ModernBertForMaskedLM.from_pretrained(tmp_path / "m", attn_implementation="eager").eval()
    ids, mask = padded_batch()
    real = mask.bool()
    with torch.no_grad():
        want = theirs(input_ids=ids, attention_mask=mask).logits
        got = ours(ids, attention_mask=mask).logits
    torch.testing.assert_close(got[real], want[real], atol=TOL, rtol=0)

    grads = []
    for kernels in (Kernels.fast(), Kernels.reference()):
        model = ModernBertForMaskedLM(long_config())
        model.load_state_dict(ours.state_dict())
        model.set_kernels(kernels).train()
        labels = torch.where(real, ids, torch.full_like(ids, -100))
        model(ids, attention_mask=mask, labels=labels).loss.backward()
        grads.append({n: p.grad for n, p in model.named_parameters() if p.grad is not None})
    for name, grad in grads[0].items():
        torch.testing.assert_close(grad, grads[1][name], atol=1e-5, rtol=1e-4, msg=name)


class LargestTensor(TorchDispatchMode):
    """The most elements of any tensor an op produces while the mode is on."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


@pytest.mark.parametrize("kernels", ["fast", "reference"])
def test_a_local_layer_builds_no_length_by_length_tensor(kernels):
    """One local layer on a 2,048-token row: its largest tensor is far below 2,048 x 2,048 (banded), while the
    reference kernels (the probe's control) build the dense [length, length] mask."""
    model = ModernBertModel(long_config(num_hidden_layers=2, global_attn_every_n_layers=2)).eval()
    model.set_kernels(getattr(Kernels, kernels)())
    L = 2048
    ids = torch.randint(5, 120, (L,))
    batch = PackedBatch.from_mask(None, 1, L, ids.device)
    with torch.no_grad():
        x = model.embeddings.word_embeddings.weight[ids]
        with LargestTensor() as probe:
            local_batch, rope = model.encoder._contexts(x, batch, None)[False]
            model.encoder.layers[1](x, local_batch, rope)
    if kernels == "fast":
        assert probe.largest < L * L / 16
    else:
        assert probe.largest >= L * L

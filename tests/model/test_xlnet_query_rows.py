"""`target_positions`: the query stream at the predicted rows only gives transformers' numbers, which it computes
at every position through the one-hot `target_mapping`: with padding, segments, memory, "uni" attention and
clamped offsets."""
from __future__ import annotations

import pytest
import torch

from bertforge.model.xlnet import XLNetConfig, XLNetLMHeadModel

from needs import require_module

transformers = require_module("transformers")


@pytest.mark.parametrize("options", [{}, {"attn_type": "uni"}, {"clamp_len": 3}], ids=["bi", "uni", "clamped"])
@pytest.mark.parametrize("memory", [0, 5])
def test_target_positions_equal_transformers_target_mapping(options, memory, tmp_path):
    torch.manual_seed(0)
    config = XLNetConfig(vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, hidden_dropout_prob=0.0, initializer_range=0.2, **options)
    ours = XLNetLMHeadModel(config).eval()
    ours.save_pretrained(tmp_path)
    theirs = transformers.XLNetLMHeadModel.from_pretrained(tmp_path, mem_len=16).eval()
    B, L, P = (1 if options.get("attn_type") == "uni" else 3), 9, 4  # transformers' "uni" cannot mask a batch
    ids = torch.randint(10, 60, (B, L))
    mask = torch.ones(B, L, dtype=torch.long)
    mask[-1, :3] = 0  # left padding
    types = torch.zeros(B, L, dtype=torch.long)
    types[:, 5:] = 1
    types[:, -1] = 2
    perm = (torch.rand(B, L, L) < 0.4).float()
    positions = torch.stack([torch.randperm(L)[:P] for _ in range(B)])
    mapping = torch.nn.functional.one_hot(positions, L).float()
    labels = torch.randint(10, 60, (B, P))
    common = dict(input_ids=ids, attention_mask=mask, token_type_ids=types, perm_mask=perm, labels=labels)
    with torch.no_grad():
        mine_mems = theirs_mems = None
        if memory:
            past = torch.randint(10, 60, (B, memory))
            mine_mems = ours.bert(past, use_mems=True).mems
            theirs_mems = theirs.transformer(past, use_mems=True).mems
        mine = ours(**common, target_positions=positions, mems=mine_mems)
        ref = theirs(**common, target_mapping=mapping, mems=theirs_mems)
    assert torch.allclose(mine.logits, ref.logits, atol=1e-5)
    assert float(mine.loss) == pytest.approx(float(ref.loss), abs=1e-5)


def test_target_positions_and_mapping_together_are_refused():
    model = XLNetLMHeadModel(XLNetConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                         intermediate_size=16))
    ids = torch.randint(0, 20, (1, 4))
    with pytest.raises(ValueError, match="target_mapping or target_positions, not both"):
        model(ids, target_mapping=torch.zeros(1, 1, 4), target_positions=torch.zeros(1, 1, dtype=torch.long))

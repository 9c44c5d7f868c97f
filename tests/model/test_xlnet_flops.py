"""XLNet's FLOP count is what torch's own counter measures on a forward pass, and `info` can describe XLNet."""
from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from bertforge.model.flops import count_xlnet_flops
from bertforge.model.xlnet import XLNetConfig, XLNetLMHeadModel

CONFIG = XLNetConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=256, hidden_dropout_prob=0.0)


@pytest.mark.parametrize("predictions", [0, 8])
def test_the_count_is_torch_s_flop_counter(predictions):
    """With predictions, the query stream runs at those rows only (`target_positions`): what is counted."""
    torch.manual_seed(0)
    model = XLNetLMHeadModel(CONFIG).eval()
    B, L = 3, 48
    ids = torch.randint(10, 1000, (B, L))
    with FlopCounterMode(display=False) as counter:
        if predictions:
            positions = torch.stack([torch.randperm(L)[:predictions] for _ in range(B)])
            model(ids, perm_mask=torch.zeros(B, L, L), target_positions=positions)
        else:
            model.bert(ids)
    assert count_xlnet_flops(CONFIG, [L] * B, n_predicted=B * predictions) == counter.get_total_flops()


def test_info_describes_an_xlnet(capsys):
    from bertforge.cli import main
    assert main(["info", "--model", "xlnet-base"]) == 0
    out = capsys.readouterr().out
    assert "xlnet: layers 12  hidden 768" in out and "training FLOPs per token" in out
    per_token = XLNetLMHeadModel.flops_per_token
    with torch.device("meta"):
        model = XLNetLMHeadModel(XLNetConfig(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                                             intermediate_size=3072))
    assert f"{per_token(model, 128) / 1e6:.1f} MFLOP" in out

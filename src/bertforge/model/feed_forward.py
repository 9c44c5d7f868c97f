"""The position-wise feed-forward block: up-projection, activation, down-projection.

With `config.feed_forward_glu` the up-projection is twice as wide and its first half, activated, gates the
second (GLU variants, Shazeer 2020; GeGLU with gelu, as in ModernBERT): the same `up`/`down` names, one GEMM.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from bertforge.config import BertConfig
from bertforge.model.dropout import Dropout


def activation(name: str):
    """HF's `hidden_act` names -> functions ("gelu" is the exact erf form, as in the original BERT)."""
    table = {
        "gelu": F.gelu,
        "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
        "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
        "gelu_fast": lambda x: F.gelu(x, approximate="tanh"),
        "relu": F.relu,
        "silu": F.silu,
        "swish": F.silu,
        "tanh": torch.tanh,
    }
    return table[name]


class FeedForward(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.glu = config.feed_forward_glu
        width = 2 * config.intermediate_size if self.glu else config.intermediate_size
        self.up = nn.Linear(config.hidden_size, width, bias=config.mlp_bias)
        self.down = nn.Linear(config.intermediate_size, config.hidden_size, bias=config.mlp_bias)
        self.act = activation(config.hidden_act)
        self.dropout = Dropout(config.ffn_inner_dropout_prob)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.up(x)
        if self.glu:
            value, gate = h.chunk(2, dim=-1)
            h = self.act(value) * gate
        else:
            h = self.act(h)
        return self.down(self.dropout(h))

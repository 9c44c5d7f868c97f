"""The position-wise feed-forward block: up-projection, activation, down-projection."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from bertforge.config import BertConfig


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
        self.up = nn.Linear(config.hidden_size, config.intermediate_size)
        self.down = nn.Linear(config.intermediate_size, config.hidden_size)
        self.act = activation(config.hidden_act)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(self.act(self.up(x)))

"""The stack of encoder layers."""
from __future__ import annotations

import torch
from torch import nn

from bertforge.config import BertConfig
from bertforge.model.layer import EncoderLayer
from bertforge.model.packing import PackedBatch


class Encoder(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.num_hidden_layers))
        self.gradient_checkpointing = False

    def forward(self, x: torch.Tensor, batch: PackedBatch, collect: list[torch.Tensor] | None = None) -> torch.Tensor:
        """`collect`, when given, receives the input and every layer's output (packed)."""
        for layer in self.layers:
            if collect is not None:
                collect.append(x)
            if self.gradient_checkpointing and self.training:
                x = torch.utils.checkpoint.checkpoint(layer, x, batch, use_reentrant=False)
            else:
                x = layer(x, batch)
        if collect is not None:
            collect.append(x)
        return x

"""One Transformer encoder layer, post-LN as in the original BERT: x = LN(x + sublayer(x))."""
from __future__ import annotations

import torch
from torch import nn

from bertforge.config import BertConfig
from bertforge.model.attention import SelfAttention
from bertforge.model.feed_forward import FeedForward
from bertforge.model.packing import PackedBatch


class EncoderLayer(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.attention = SelfAttention(config)
        self.attention_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.feed_forward = FeedForward(config)
        self.output_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, x: torch.Tensor, batch: PackedBatch) -> torch.Tensor:
        x = self.attention_norm(x + self.dropout(self.attention(x, batch)))
        return self.output_norm(x + self.dropout(self.feed_forward(x)))

"""One Transformer encoder layer, post-LN as in the original BERT: x = LN(x + sublayer(x)).

The two halves (`attend`, `feed`) can be called on their own, so that under ALBERT-style partial sharing
a depth can run one layer's attention and another layer's feed-forward; a layer built without a half holds
no tensors for it and lends only the other.
"""
from __future__ import annotations

import torch
from torch import nn

from bertforge.config import BertConfig
from bertforge.model.attention import SelfAttention
from bertforge.model.dropout import Dropout
from bertforge.model.feed_forward import FeedForward
from bertforge.model.packing import PackedBatch


class EncoderLayer(nn.Module):
    def __init__(self, config: BertConfig, attention: bool = True, feed_forward: bool = True) -> None:
        super().__init__()
        if attention:
            self.attention = SelfAttention(config)
            self.attention_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        if feed_forward:
            self.feed_forward = FeedForward(config)
            self.output_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = Dropout(config.hidden_dropout_prob)

    def attend(self, x: torch.Tensor, batch: PackedBatch) -> torch.Tensor:
        return self.attention_norm(x + self.dropout(self.attention(x, batch)))

    def feed(self, x: torch.Tensor) -> torch.Tensor:
        return self.output_norm(x + self.dropout(self.feed_forward(x)))

    def forward(self, x: torch.Tensor, batch: PackedBatch) -> torch.Tensor:
        return self.feed(self.attend(x, batch))

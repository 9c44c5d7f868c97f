"""One Transformer encoder layer: post-LN as in the original BERT, x = LN(x + sublayer(x)), or pre-LN as in
ModernBERT (`config.pre_norm`), x = x + sublayer(LN(x)).

The two halves (`attend`, `feed`) can be called on their own, so that under ALBERT-style partial sharing
a depth can run one layer's attention and another layer's feed-forward; a layer built without a half holds
no tensors for it and lends only the other.

A decoder's layer (`config.add_cross_attention`) has a third sub-block between the two, `cross_attend`:
attention to the encoder's states (`model/cross_attention.py`), with its own norm and residual.

A pre-LN stack's first layer reads the embeddings' output, which is already normalised: like ModernBERT it
has no attention norm of its own (`first_norm=False`).
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from bertforge.config import BertConfig
from bertforge.model.attention import SelfAttention
from bertforge.model.cross_attention import CrossAttention, Memory
from bertforge.model.dropout import Dropout
from bertforge.model.feed_forward import FeedForward
from bertforge.model.packing import PackedBatch

Rope = Optional[tuple[torch.Tensor, torch.Tensor]]


def layer_norm(config: BertConfig, width: Optional[int] = None) -> nn.LayerNorm:
    """A LayerNorm of the model's eps, with or without bias (`config.norm_bias`)."""
    return nn.LayerNorm(width or config.hidden_size, eps=config.layer_norm_eps, bias=config.norm_bias)


class EncoderLayer(nn.Module):
    def __init__(self, config: BertConfig, attention: bool = True, feed_forward: bool = True,
                 first_norm: bool = True) -> None:
        super().__init__()
        self.pre_norm = config.pre_norm
        if attention:
            self.attention = SelfAttention(config)
            self.attention_norm = layer_norm(config) if first_norm or not config.pre_norm else nn.Identity()
            if config.add_cross_attention:
                self.cross_attention = CrossAttention(config)
                self.cross_attention_norm = layer_norm(config)
        if feed_forward:
            self.feed_forward = FeedForward(config)
            self.output_norm = layer_norm(config)
        self.dropout = Dropout(config.attention_output_dropout_prob)
        self.ffn_dropout = Dropout(config.ffn_output_dropout_prob)

    def attend(self, x: torch.Tensor, batch: PackedBatch, rope: Rope = None,
               rows: Optional[torch.Tensor] = None) -> torch.Tensor:
        """`rows`: only these packed rows come out (see `Encoder.forward`)."""
        residual = x if rows is None else x[rows]
        if self.pre_norm:
            return residual + self.dropout(self.attention(self.attention_norm(x), batch, rope, rows))
        return self.attention_norm(residual + self.dropout(self.attention(x, batch, rope, rows)))

    def cross_attend(self, x: torch.Tensor, batch: PackedBatch, memory: Memory) -> torch.Tensor:
        if self.pre_norm:
            return x + self.dropout(self.cross_attention(self.cross_attention_norm(x), batch, memory))
        return self.cross_attention_norm(x + self.dropout(self.cross_attention(x, batch, memory)))

    def feed(self, x: torch.Tensor) -> torch.Tensor:
        if self.pre_norm:
            return x + self.ffn_dropout(self.feed_forward(self.output_norm(x)))
        return self.output_norm(x + self.ffn_dropout(self.feed_forward(x)))

    def forward(self, x: torch.Tensor, batch: PackedBatch, rope: Rope = None,
                memory: Optional[Memory] = None, rows: Optional[torch.Tensor] = None) -> torch.Tensor:
        if memory is not None:  # cross-attention reads whole sequences: the rows are picked after it
            x = self.cross_attend(self.attend(x, batch, rope), batch, memory)
            return self.feed(x if rows is None else x[rows])
        return self.feed(self.attend(x, batch, rope, rows))

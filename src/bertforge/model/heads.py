"""The pre-training heads: pooler, masked-LM head (decoder tied to the word embeddings) and NSP."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from bertforge.config import BertConfig
from bertforge.model.feed_forward import activation
from bertforge.model.kernels import FAST, Kernels
from bertforge.model.tiled_linear import tiled_linear


class Pooler(nn.Module):
    """tanh(W h_[CLS] + b): the sentence vector NSP and the classification heads read."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, cls_hidden: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(cls_hidden))


class MaskedLMHead(nn.Module):
    """transform (dense + act + LayerNorm), then the vocabulary decoder whose weight IS the word embedding.

    With factorised embeddings the transform maps H -> E, so the tied decoder stays the E-wide table.
    ModernBERT's head is the same with its options: no transform bias (`head_bias`), its own activation
    (`head_act`), a bias-free norm (`norm_bias`); `decoder_bias=False` drops the decoder's bias.
    """

    kernels: Kernels = FAST  # set for the whole model by `set_kernels`

    def __init__(self, config: BertConfig, word_embeddings: nn.Embedding) -> None:
        super().__init__()
        self.transform = nn.Linear(config.hidden_size, config.embedding_dim, bias=config.head_bias)
        self.act = activation(config.head_act or config.hidden_act)
        self.norm = nn.LayerNorm(config.embedding_dim, eps=config.layer_norm_eps, bias=config.norm_bias)
        self.word_embeddings = [word_embeddings]  # a list: tied, not a second registered parameter
        self.bias = nn.Parameter(torch.zeros(config.vocab_size)) if config.decoder_bias else None

    @property
    def decoder_weight(self) -> torch.Tensor:
        return self.word_embeddings[0].weight

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """`hidden` holds only the rows to predict: the 30k-wide matmul never sees unmasked tokens."""
        h = self.norm(self.act(self.transform(hidden)))
        if self.kernels.tiled_decoder:
            return tiled_linear(h, self.decoder_weight, self.bias)
        return F.linear(h, self.decoder_weight, self.bias)


class NextSentenceHead(nn.Module):
    """Two-way classifier on the pooled [CLS]: BERT's next-sentence and ALBERT's sentence-order head (which
    adds dropout before it)."""

    def __init__(self, config: BertConfig, dropout: float = 0.0) -> None:
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(config.hidden_size, 2)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.dropout(pooled))

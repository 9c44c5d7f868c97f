"""Token + segment + position embeddings, then LayerNorm and dropout (BERT section 3, Figure 2)."""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from bertforge.config import BertConfig


class Embeddings(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        # DistilBERT-style students have no segments: type_vocab_size = 0 drops the table.
        self.token_type_embeddings = (nn.Embedding(config.type_vocab_size, config.hidden_size)
                                      if config.type_vocab_size > 0 else None)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor,
                token_type_ids: Optional[torch.Tensor]) -> torch.Tensor:
        """All arguments are flat [tokens] (already packed): the lookups touch real tokens only."""
        x = self.word_embeddings(input_ids) + self.position_embeddings(position_ids)
        if self.token_type_embeddings is not None:
            x = x + (self.token_type_embeddings(token_type_ids) if token_type_ids is not None
                     else self.token_type_embeddings.weight[0])
        return self.dropout(self.norm(x))

"""Token + segment + position embeddings, then LayerNorm and dropout (BERT section 3, Figure 2).

With ALBERT's factorised parameterisation the tables are E wide (E << H: the vocabulary costs V x E, not
V x H) and a projection E -> H feeds the first layer; LayerNorm and dropout act on the E-wide sum, as in ALBERT.

With rotary positions (`config.rope_theta`) or T5's relative bias there is no position table: positions enter
inside attention.
With that and no segments (`type_vocab_size=0`) and a bias-free norm, this is ModernBERT's embedding block.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from bertforge.config import BertConfig
from bertforge.model.dropout import Dropout


class Embeddings(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        E = config.embedding_dim
        self.word_embeddings = nn.Embedding(config.vocab_size, E, padding_idx=config.pad_token_id)
        self.position_embeddings = (nn.Embedding(config.max_position_embeddings, E) if config.absolute_positions
                                    else None)
        # DistilBERT-style students have no segments: type_vocab_size = 0 drops the table.
        self.token_type_embeddings = (nn.Embedding(config.type_vocab_size, E) if config.type_vocab_size > 0 else None)
        self.norm = nn.LayerNorm(E, eps=config.layer_norm_eps, bias=config.norm_bias)
        self.dropout = Dropout(config.embedding_dropout_prob)
        self.projection = nn.Linear(E, config.hidden_size) if config.embedding_projection else None

    def forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor,
                token_type_ids: Optional[torch.Tensor]) -> torch.Tensor:
        """All arguments are flat [tokens] (already packed): the lookups touch real tokens only."""
        # summed in BERT's order (word + segment + position): ONNX Runtime's embedding fusion then recognises
        # the positions as 0..seq-1 and computes them inside its kernel, with no position graph around it
        x = self.word_embeddings(input_ids)
        table = self.token_type_embeddings
        if table is not None:
            # one segment (RoBERTa): the 0/1 pair ids of a BERT-style tokenizer carry nothing for it, use row 0
            one_segment = token_type_ids is None or table.num_embeddings == 1
            x = x + (table.weight[0] if one_segment else table(token_type_ids))
        if self.position_embeddings is not None:
            x = x + self.position_embeddings(position_ids)
        x = self.dropout(self.norm(x))
        return self.projection(x) if self.projection is not None else x

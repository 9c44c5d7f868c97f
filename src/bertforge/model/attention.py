"""Multi-head self-attention through `scaled_dot_product_attention`.

Q, K and V come from one fused projection (one GEMM instead of three); the checkpoint layer splits it into
HF's `query`/`key`/`value` on save and joins them on load. Inputs are packed tokens: attention is the one
place that needs the [batch, heads, seq, head_dim] layout, so it scatters in and gathers out here.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from bertforge.config import BertConfig
from bertforge.model.packing import PackedBatch


class SelfAttention(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.out = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout_p = config.attention_probs_dropout_prob

    def forward(self, x: torch.Tensor, batch: PackedBatch) -> torch.Tensor:
        B, L, T = batch.batch_size, batch.seq_len, x.shape[0]
        h, d = self.num_heads, self.head_dim
        # Heads-major layout [3, heads, B*L, head_dim]: packed tokens go in with one index_copy_ along a
        # single dimension, q/k/v come out contiguous (SDPA's kernels then copy nothing), and padded slots
        # stay zero (their keys are masked anyway). SDPA takes any leading dims: here (heads, batch).
        heads_major = self.qkv(x).view(T, 3, h, d).permute(1, 2, 0, 3)
        if batch.is_packed:
            grid = heads_major.new_zeros(3, h, B * L, d).index_copy_(2, batch.indices, heads_major)
        else:
            grid = heads_major.contiguous()
        q, k, v = grid.view(3, h, B, L, d).unbind(0)                      # each [heads, B, L, head_dim]
        mask = batch.attention_mask
        y = F.scaled_dot_product_attention(
            q, k, v,
            attn_mask=mask.transpose(0, 1) if mask is not None else None,  # [1, B, 1|L, L]
            dropout_p=self.dropout_p if self.training else 0.0,
        )
        y = y.reshape(h, B * L, d)
        if batch.is_packed:
            y = y.index_select(1, batch.indices)                           # real tokens only
        return self.out(y.transpose(0, 1).reshape(T, h * d))

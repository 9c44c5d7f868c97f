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
        qkv = batch.unpack(self.qkv(x))                                   # [B, L, 3H]
        B, L, _ = qkv.shape
        q, k, v = qkv.view(B, L, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        mask = batch.attention_mask
        y = F.scaled_dot_product_attention(
            q, k, v,
            attn_mask=mask,
            dropout_p=self.dropout_p if self.training else 0.0,
            is_causal=False,
        )                                                                  # [B, heads, L, head_dim]
        y = y.transpose(1, 2).reshape(B, L, self.num_heads * self.head_dim)
        return self.out(batch.pack(y))

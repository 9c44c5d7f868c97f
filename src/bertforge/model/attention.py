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
        qkv = self.qkv(x).view(T, 3, self.num_heads, self.head_dim)
        if batch.is_packed:
            # One scatter from packed tokens into [3, B, heads, L, head_dim]: q, k and v come out contiguous
            # and padded keys are zeros (masked anyway), with no intermediate [B, L, 3H] copy.
            qkv_padded = qkv.new_zeros(3, B, self.num_heads, L, self.head_dim)
            qkv_padded.permute(1, 3, 0, 2, 4)[batch.rows, batch.cols] = qkv
        else:
            qkv_padded = qkv.view(B, L, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv_padded.unbind(0)                                    # each [B, heads, L, head_dim]
        y = F.scaled_dot_product_attention(
            q, k, v,
            attn_mask=batch.attention_mask,
            dropout_p=self.dropout_p if self.training else 0.0,
        )
        y = y.permute(0, 2, 1, 3)                                          # [B, L, heads, head_dim] (a view)
        y = y[batch.rows, batch.cols] if batch.is_packed else y.reshape(B * L, self.num_heads, self.head_dim)
        return self.out(y.reshape(T, self.num_heads * self.head_dim))

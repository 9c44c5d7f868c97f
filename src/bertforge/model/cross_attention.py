"""Cross-attention: a decoder's tokens attend to the encoder's states (an encoder–decoder's only new part).

A warm-started decoder (Rothe et al., 2020) is a BERT whose layers each gain this block between self-attention
and the feed-forward, freshly initialised. It runs on padded grids — the decoder's packed tokens are unpacked
to `[batch, target, H]`, attend to `[batch, source, H]`, and are packed again — because its keys come from
another sequence than its queries, so the packed self-attention's groups do not apply. Targets are short;
the copies cost little.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from bertforge.config import BertConfig
from bertforge.model.packing import PackedBatch


@dataclass
class Memory:
    """What the decoder attends to: the encoder's last hidden states and which of them are real tokens."""

    states: torch.Tensor   # [batch, source, H]
    mask: torch.Tensor     # [batch, source] bool, True at real tokens

    @classmethod
    def of(cls, states: torch.Tensor, attention_mask: torch.Tensor | None) -> "Memory":
        if attention_mask is None:
            attention_mask = torch.ones(states.shape[:2], dtype=torch.bool, device=states.device)
        return cls(states, attention_mask.bool())


class CrossAttention(nn.Module):
    """Multi-head attention with queries from the decoder and keys/values (one fused projection) from memory."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.query = nn.Linear(config.hidden_size, config.hidden_size, bias=config.attention_bias)
        self.kv = nn.Linear(config.hidden_size, 2 * config.hidden_size, bias=config.attention_bias)
        self.out = nn.Linear(config.hidden_size, config.hidden_size, bias=config.attention_bias)
        self.dropout_p = config.attention_probs_dropout_prob

    def forward(self, x: torch.Tensor, batch: PackedBatch, memory: Memory) -> torch.Tensor:
        h, d = self.num_heads, self.head_dim
        B, T = batch.batch_size, batch.seq_len
        S = memory.states.shape[1]
        q = self.query(batch.unpack(x)).view(B, T, h, d).transpose(1, 2)              # [B, h, T, d]
        k, v = self.kv(memory.states).view(B, S, 2, h, d).permute(2, 0, 3, 1, 4).unbind(0)  # each [B, h, S, d]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=memory.mask[:, None, None, :],
                                           dropout_p=self.dropout_p if self.training else 0.0)
        return self.out(batch.pack(y.transpose(1, 2).reshape(B, T, h * d)))

"""The stack of encoder layers, optionally sharing parameters across depth (ALBERT section 3.1).

Shared parameters are stored once: `layers` holds only the unique layers (all N when nothing is shared,
one under "all"; under "attention"/"ffn" layer 0 is complete and the others hold only their own half),
and `schedule` says whose attention and whose feed-forward run at each depth. So a state dict never sees
one tensor under two names, and `layer_sharing="none"` keeps BERT's names (`layers.N...`).
"""
from __future__ import annotations

import torch
from torch import nn

from bertforge.config import BertConfig
from bertforge.model.layer import EncoderLayer
from bertforge.model.packing import PackedBatch


def sharing_schedule(layer_sharing: str, num_layers: int) -> list[tuple[int, int]]:
    """(index of the layer whose attention runs, index of the layer whose feed-forward runs) per depth."""
    shared_attention = layer_sharing in ("all", "attention")
    shared_ffn = layer_sharing in ("all", "ffn")
    return [(0 if shared_attention else i, 0 if shared_ffn else i) for i in range(num_layers)]


class Encoder(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.schedule = sharing_schedule(config.layer_sharing, config.num_hidden_layers)
        attention_owners = {a for a, _ in self.schedule}
        ffn_owners = {f for _, f in self.schedule}
        self.layers = nn.ModuleList(
            EncoderLayer(config, attention=i in attention_owners, feed_forward=i in ffn_owners)
            for i in range(max(attention_owners | ffn_owners) + 1))
        self.gradient_checkpointing = False

    def forward(self, x: torch.Tensor, batch: PackedBatch, collect: list[torch.Tensor] | None = None) -> torch.Tensor:
        """`collect`, when given, receives the input and every layer's output (packed)."""
        for a, f in self.schedule:
            if collect is not None:
                collect.append(x)
            if a == f:
                step = self.layers[a]  # a whole layer: called as a module, so hooks on it still fire
            else:
                step = _Mixed(self.layers[a], self.layers[f])
            if self.gradient_checkpointing and self.training:
                x = torch.utils.checkpoint.checkpoint(step, x, batch, use_reentrant=False)
            else:
                x = step(x, batch)
        if collect is not None:
            collect.append(x)
        return x


class _Mixed:
    """One depth under partial sharing: one layer's attention, then another's feed-forward."""

    def __init__(self, attention_from: EncoderLayer, ffn_from: EncoderLayer) -> None:
        self.attention_from, self.ffn_from = attention_from, ffn_from

    def __call__(self, x: torch.Tensor, batch: PackedBatch) -> torch.Tensor:
        return self.ffn_from.feed(self.attention_from.attend(x, batch))

"""T5's relative position bias (Raffel et al. 2020, section 2.1), the relative-position idea XLNet and T5 share.

Instead of a position table added to the embeddings, each attention head adds a learned scalar to the score of
query i and key j that depends only on the offset j - i, read from a small table of *buckets*: every offset
below a few positions has a bucket of its own, longer ones share logarithmically wider buckets up to
`max_distance`, beyond which all offsets fall into the last one. Both directions get half of the buckets (an
encoder looks both ways). One table serves every layer, as in T5.

It acts where local attention does: on each attention group's mask. A group's grid columns are its sequences'
own positions (`model/packing.py`), so the bias of a `[length, length]` grid is the same for every sequence in
it, and the "may attend" mask becomes an additive float mask (bias, and -inf where a key may not be attended).
Unpadding, attention groups, local layers and both attention kernels then work unchanged.
"""
from __future__ import annotations

import dataclasses
import math

import torch
from torch import nn

from bertforge.config import BertConfig
from bertforge.model.packing import AttentionGroup, PackedBatch


def relative_position_bucket(offset: torch.Tensor, num_buckets: int, max_distance: int) -> torch.Tensor:
    """The bucket of each key-minus-query offset: half the buckets for keys after the query, half before; in each
    half, the first quarter of all buckets holds one offset each and the rest grow logarithmically to
    `max_distance` (everything farther shares the last)."""
    half = num_buckets // 2
    side = (offset > 0).long() * half
    distance = offset.abs()
    exact = half // 2
    scaled = torch.log(distance.float().clamp(min=1) / exact) / math.log(max_distance / exact) * (half - exact)
    far = (exact + scaled.long()).clamp(max=half - 1)  # .long() truncates toward zero, as T5's .to(long)
    return side + torch.where(distance < exact, distance, far)


class RelativePositionBias(nn.Module):
    """The learned `[buckets, heads]` table and the per-group biases it gives (see the module docstring)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.num_buckets = config.relative_attention_num_buckets
        self.max_distance = config.relative_attention_max_distance
        self.weight = nn.Parameter(torch.empty(self.num_buckets, config.num_attention_heads))
        nn.init.normal_(self.weight, std=config.initializer_range)

    def bias(self, length: int, device: torch.device) -> torch.Tensor:
        """`[heads, 1, length, length]`: the bias of query i (row) and key j (column) of a grid."""
        pos = torch.arange(length, device=device)
        buckets = relative_position_bucket(pos[None, :] - pos[:, None], self.num_buckets, self.max_distance)
        return self.weight[buckets].permute(2, 0, 1).unsqueeze(1)

    def _group(self, group: AttentionGroup, device: torch.device) -> AttentionGroup:
        bias = self.bias(group.length, device)
        if group.mask is not None:
            bias = bias.masked_fill(~group.mask, float("-inf"))
        return dataclasses.replace(group, mask=bias)

    def forward(self, batch: PackedBatch) -> PackedBatch:
        """The same packing, every group's boolean mask turned into the additive float mask with the bias."""
        return dataclasses.replace(batch, groups=[self._group(g, batch.device) for g in batch.groups])

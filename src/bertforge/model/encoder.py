"""The stack of encoder layers, optionally sharing parameters across depth (ALBERT section 3.1).

Shared parameters are stored once: `layers` holds only the unique layers (all N when nothing is shared,
one under "all"; under "attention"/"ffn" layer 0 is complete and the others hold only their own half),
and `schedule` says whose attention and whose feed-forward run at each depth. So a state dict never sees
one tensor under two names, and `layer_sharing="none"` keeps BERT's names (`layers.N...`).

The stack also holds what its layers share per batch under the modern options: the rotary tables (built once
per forward for global and for local layers, from each packed token's position), the sliding-window masks
of local layers, T5's relative position bias (one table for all layers, added to every layer's masks), the
final LayerNorm of a pre-LN stack, and Longformer's pattern (real and global tokens per attention group, built
once and shared by every window size; `model/sliding_window.py`) or BigBird's block layout (`block_sparse.py`).
"""
from __future__ import annotations

import dataclasses
from typing import Optional

import torch
from torch import nn

from bertforge.config import BertConfig
from bertforge.model.attention import local_attention_batch
from bertforge.model.cross_attention import Memory
from bertforge.model.kernels import FAST, Kernels
from bertforge.model.layer import EncoderLayer, Rope, layer_norm
from bertforge.model.packing import PackedBatch
from bertforge.model.relative_bias import RelativePositionBias
from bertforge.model.rotary import RotaryEmbedding
from bertforge.model.block_sparse import block_pattern
from bertforge.model.sliding_window import sliding_window_pattern


#: a local layer's window is computed band by band once a row is longer than this many windows
BANDED_FROM = 4


def sharing_schedule(layer_sharing: str, num_layers: int) -> list[tuple[int, int]]:
    """(index of the layer whose attention runs, index of the layer whose feed-forward runs) per depth."""
    shared_attention = layer_sharing in ("all", "attention")
    shared_ffn = layer_sharing in ("all", "ffn")
    return [(0 if shared_attention else i, 0 if shared_ffn else i) for i in range(num_layers)]


def packed_positions(batch: PackedBatch) -> torch.Tensor:
    """Each packed token's position in its own row (0, 1, 2... from the row's start), `[tokens]`."""
    if batch.indices is not None:
        return batch.indices % batch.seq_len
    return torch.arange(batch.batch_size * batch.seq_len, device=batch.device) % batch.seq_len


class Encoder(nn.Module):
    kernels: Kernels = FAST  # set for the whole model by `set_kernels`

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.schedule = sharing_schedule(config.layer_sharing, config.num_hidden_layers)
        attention_owners = {a for a, _ in self.schedule}
        ffn_owners = {f for _, f in self.schedule}
        # layer 0's attention norm would re-normalise the embeddings' output, unless deeper depths reuse it
        first_alone = [a for a, _ in self.schedule].count(0) == 1
        self.layers = nn.ModuleList(
            EncoderLayer(config, attention=i in attention_owners, feed_forward=i in ffn_owners,
                         first_norm=not (i == 0 and first_alone))
            for i in range(max(attention_owners | ffn_owners) + 1))
        self.final_norm = layer_norm(config) if config.pre_norm else None
        self.global_layer = [config.is_global_layer(i) for i in range(config.num_hidden_layers)]
        windows = config.sliding_windows
        # the context each depth attends with: global (True), ModernBERT-local (False), or a Longformer window
        self.context_key: list[bool | tuple[str, int]] = (
            [("window", w) for w in windows] if windows is not None else list(self.global_layer))
        if config.block_sparse is not None:  # BigBird: one block-sparse pattern for every layer
            self.context_key = [("blocks", 0)] * config.num_hidden_layers
        self.rotary = self.local_rotary = None
        if config.rotary:
            self.rotary = RotaryEmbedding(config.head_dim, config.rope_theta)
            local_theta = config.local_rope_theta
            if local_theta is not None and local_theta != config.rope_theta and not all(self.global_layer):
                self.local_rotary = RotaryEmbedding(config.head_dim, local_theta)
        self.relative_attention_bias = RelativePositionBias(config) if config.relative_bias else None
        self.gradient_checkpointing = False

    def _contexts(self, x: torch.Tensor, batch: PackedBatch,
                  positions: Optional[torch.Tensor]) -> dict[bool | tuple[str, int], tuple[PackedBatch, Rope]]:
        """(packing with its masks, rotary tables) for global (True) and local (False) layers, and for each
        Longformer window width (("window", width)); with a relative position bias, the masks carry it."""
        rope: Rope = None
        heads = self.config.num_attention_heads
        if self.rotary is not None:
            positions = packed_positions(batch) if positions is None else positions
            rope = self.rotary(positions, x.dtype, heads)
        contexts = {True: (batch, rope)}
        if not all(self.global_layer):
            local_rope = self.local_rotary(positions, x.dtype, heads) if self.local_rotary is not None else rope
            contexts[False] = (self._local_batch(batch), local_rope)
        if self.relative_attention_bias is not None:
            contexts = {kind: (self.relative_attention_bias(b), r) for kind, (b, r) in contexts.items()}
        widths = sorted({key[1] for key in self.context_key if isinstance(key, tuple)})
        if widths:  # the pattern's grids are built once; each window size shares them
            pattern = sliding_window_pattern(batch, 0)
            for width in widths:
                window = dataclasses.replace(pattern, radius=width // 2)
                contexts[("window", width)] = (dataclasses.replace(batch, window=window), rope)
        if self.config.block_sparse is not None:
            block, random_blocks = self.config.block_sparse
            pattern = block_pattern(batch, block, random_blocks, heads, self.training)
            contexts[("blocks", 0)] = (dataclasses.replace(batch, blocks=pattern), rope)
        return contexts

    def _local_batch(self, batch: PackedBatch) -> PackedBatch:
        """What ModernBERT's local layers attend with: past BANDED_FROM windows of length, the sliding window
        computed band by band as Longformer's (no global tokens), so a long input never builds [length, length]
        masks; shorter rows (where a dense mask costs no more) and the reference kernels keep the masked grids."""
        window = self.config.local_attention
        longest = max((g.length for g in batch.groups), default=0)
        if (not self.kernels.banded_attention or batch.grid or batch.causal or self.relative_attention_bias is not None
                or longest <= BANDED_FROM * window or torch.jit.is_tracing()):
            return local_attention_batch(batch, window)
        pattern = dataclasses.replace(sliding_window_pattern(batch, 0), radius=window // 2)
        return dataclasses.replace(batch, window=pattern)

    def forward(self, x: torch.Tensor, batch: PackedBatch, collect: list[torch.Tensor] | None = None,
                positions: Optional[torch.Tensor] = None, memory: Optional[Memory] = None,
                rows: Optional[torch.Tensor] = None) -> torch.Tensor:
        """`collect`, when given, receives the input and every layer's output (packed; the last one after the
        final norm of a pre-LN stack). `positions`: the packed tokens' position ids, read by rotary positions
        (default: each token's place in its row). `memory`: the encoder states a decoder's layers attend to.

        `rows`: the packed rows the caller reads (masked tokens, [CLS]); the output holds only those, in that
        order. No later layer needs the last layer's other rows, so its output projection and feed-forward run
        on these alone: exact, and for an MLM at 15-30 % masking most of the last layer's work is skipped.

        The output is packed rows [tokens, H], except in the grid layout (`batch.grid`) with no `rows`: there it
        stays [batch, seq, H], so that an exported graph's token vectors come straight from the last layer,
        with no flatten and reshape back (and no shape arithmetic for them) in between."""
        contexts = self._contexts(x, batch, positions)
        last = len(self.schedule) - 1
        # the reference kernels, or every layer's whole output asked for: the last layer runs in full, rows picked after
        selective = rows if collect is None and self.kernels.read_rows_only else None
        flat = (lambda t: t.flatten(0, 1)) if batch.grid else (lambda t: t)  # grid: [batch, seq, H] inside
        for depth, (a, f) in enumerate(self.schedule):
            if collect is not None:
                collect.append(flat(x))
            if a == f:
                step = self.layers[a]  # a whole layer: called as a module, so hooks on it still fire
            else:
                step = _Mixed(self.layers[a], self.layers[f])
            layer_batch, rope = contexts[self.context_key[depth]]
            keep = selective if depth == last else None
            if self.gradient_checkpointing and self.training:
                x = torch.utils.checkpoint.checkpoint(step, x, layer_batch, rope, memory, keep, use_reentrant=False)
            else:
                x = step(x, layer_batch, rope, memory, keep)
        if self.final_norm is not None:
            x = self.final_norm(x)
        if collect is not None:
            collect.append(flat(x))
        if rows is not None and selective is None:
            x = flat(x)[rows]
        return x


class _Mixed:
    """One depth under partial sharing: one layer's attention, then another's feed-forward."""

    def __init__(self, attention_from: EncoderLayer, ffn_from: EncoderLayer) -> None:
        self.attention_from, self.ffn_from = attention_from, ffn_from

    def __call__(self, x: torch.Tensor, batch: PackedBatch, rope: Rope = None, memory: Optional[Memory] = None,
                 rows: Optional[torch.Tensor] = None) -> torch.Tensor:
        # no memory: a decoder does not share layers (`BertConfig` refuses it)
        return self.ffn_from.feed(self.attention_from.attend(x, batch, rope, rows))

"""Counting the matmul FLOPs a BERT batch needs, for utilisation figures (MFU-style).

Only useful work counts: real tokens (no padding), attention over each sequence's own length, and the
vocabulary decoder on the masked rows only. LayerNorm, softmax and embeddings are ignored (< 1%).
"""
from __future__ import annotations

from typing import Iterable

from bertforge.config import BertConfig


def count_flops(config: BertConfig, seq_lens: Iterable[int], n_masked: float = 0.0, pooler: bool = False,
                nsp: bool = False, training: bool = False, last_layer_rows: float | None = None) -> float:
    """FLOPs (multiply-add = 2) for one batch of sequences with the given real lengths.

    `last_layer_rows`: how many rows the heads read from the last layer (masked tokens, [CLS]), whose output
    projection and feed-forward then run on those alone (`Encoder.forward`); None: every token.
    `training=True` counts forward + backward as 3x forward, the usual convention.
    """
    H, I, V = config.hidden_size, config.intermediate_size, config.vocab_size
    E = config.embedding_dim
    seq_lens = list(seq_lens)
    tokens = sum(seq_lens)
    ffn = 3 if config.feed_forward_glu else 2               # a GLU's up-projection is twice as wide
    qkv = 2 * 3 * H * H
    rest = 2 * (H * H + ffn * H * I)                       # output projection + the two FFN matmuls
    attention_per_layer = sum(2 * 2 * L * L * H for L in seq_lens)  # QK^T and attention x V
    last_rows = tokens if last_layer_rows is None else last_layer_rows
    flops = (config.num_hidden_layers * (tokens * qkv + attention_per_layer)
             + (config.num_hidden_layers - 1) * tokens * rest + last_rows * rest)
    if config.embedding_projection:
        flops += tokens * 2 * E * H                          # factorised embedding projection (ALBERT)
    flops += n_masked * 2 * (H * E + E * V)                  # MLM transform + decoder on masked rows only
    if pooler:
        flops += len(seq_lens) * 2 * H * H
    if nsp:
        flops += len(seq_lens) * 2 * H * 2
    return float(flops * (3 if training else 1))


def count_xlnet_flops(config: BertConfig, seq_lens: Iterable[int], n_predicted: float = 0.0,
                      training: bool = False) -> float:
    """FLOPs of an XLNet batch: per layer, the content stream over every real token (projections, content and
    relative-position scores over the 2L offsets, feed-forward), the offsets' own projection (once per batch,
    at its longest length), and with `n_predicted` > 0 the query stream at those rows only
    (`target_positions`) and the decoder on them. Segment scores, softmax and norms are left out (< 1%)."""
    H, I, V, layers = config.hidden_size, config.intermediate_size, config.vocab_size, config.num_hidden_layers
    seq_lens = list(seq_lens)
    tokens = sum(seq_lens)
    share = n_predicted / tokens if tokens else 0.0
    per_layer = 2 * (2 * max(seq_lens, default=0)) * H * H  # the relative encodings' projection (2L offsets)
    for L in seq_lens:
        P = share * L
        rows = L + P                                          # content rows + query rows
        per_layer += 2 * 3 * L * H * H + 2 * P * H * H        # q, k, v of the content stream; q of the query stream
        per_layer += rows * (2 * L * H + 2 * 2 * L * H + 2 * L * H)  # content score, position score, x V
        per_layer += rows * 2 * (H * H + 2 * H * I)           # output projection and feed-forward
    flops = layers * per_layer + n_predicted * 2 * H * V
    return float(flops * (3 if training else 1))

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

"""Permutation language modelling batches (XLNet, Yang et al. 2019, Sec. 2.3 and App. A.2), from any corpus batch.

A sequence's factorisation order puts every token that is not predicted first (they see each other and are
seen by all), then the targets: the last 1/K of the order (`k`, the paper's K), chosen as spans. A span's
length is drawn from 1..`max_span` and it sits at a random place inside a context of K times its length, so
about 1/K of the tokens are predicted; spans come in a random order, each span's tokens one after the other
(in a random order among themselves), so the tokens of a span are predicted together, each seeing the
context and the targets before it. <cls>, <sep> and padding are never predicted.

The masks follow transformers' `XLNetLMHeadModel`: ``perm_mask[b, i, j] = 1`` when token i may not see token j,
i.e. when j is a target not before i in the order (rank(j) >= rank(i); the model lets a token's content stream
see itself), and when j is padding. ``target_mapping[b, p]`` is one-hot on the position of prediction p,
``target_positions[b, p]`` that position as an index and ``labels[b, p]`` its token; each batch has as many
predictions P as its row with the most, the rest padded with zero rows and label -100.

The corpus batches (BERT's layout, ``[CLS] tokens [SEP] pad``) are first laid out as XLNet's: ``tokens [SEP]
[CLS]``, padded on the left, <cls> of segment 2, as `XLNetTokenizer` writes a sequence.

Segment recurrence (`memory` M > 0): the first M tokens of each row are the previous segment of its text,
``memory_ids`` [B, M], which the step encodes without gradient into each layer's memory (Transformer-XL's,
as XLNet reuses the previous segment's states); the rest is predicted, attending to the memory as well.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["PermutationConfig", "permutation_batch", "xlnet_layout"]


@dataclass(frozen=True)
class PermutationConfig:
    k: int = 6  # predict the last 1/k of each factorisation order (XLNet-base: 6, XLNet-large: 6; ablations 7)
    max_span: int = 5  # span lengths are uniform in 1..max_span (the paper's L in [1, 5]); 1: single tokens
    memory: int = 0  # the first `memory` tokens of each row are the previous segment (Transformer-XL's memory)

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 2:
            raise ValueError(f"plm k must be a whole number of at least 2 (predict 1/k of each order), got {self.k!r}")
        if isinstance(self.max_span, bool) or not isinstance(self.max_span, int) or self.max_span < 1:
            raise ValueError(f"plm max span must be a whole number of at least 1, got {self.max_span!r}")
        if isinstance(self.memory, bool) or not isinstance(self.memory, int) or self.memory < 0:
            raise ValueError(f"plm memory must be a whole number of tokens (0: none), got {self.memory!r}")


def xlnet_layout(batch: dict[str, torch.Tensor], cls_id: int, pad_id: int, memory: int = 0
                 ) -> dict[str, np.ndarray]:
    """BERT's ``[CLS] x [SEP] pad`` rows -> XLNet's ``pad x [SEP] [CLS]`` (ids, types with <cls> = 2, 1 = real).

    With `memory` M > 0 the first M tokens of x (fewer when the batch's shortest row needs it: every row keeps a
    token, <sep> and <cls>) become `memory_ids` [B, M], the previous segment, and the rest is padded on the
    right, so that its offsets to the memory are the tokens' true distances."""
    ids, types = batch["input_ids"].numpy(), batch["token_type_ids"].numpy()
    lengths = batch["attention_mask"].numpy().sum(1)
    M = max(0, min(memory, int(lengths.min()) - 3)) if memory else 0
    B, W = ids.shape[0], ids.shape[1] - M
    out_ids = np.full((B, W), pad_id, dtype=ids.dtype)
    out_types = np.zeros((B, W), dtype=types.dtype)
    real = np.zeros((B, W), dtype=np.int64)
    for r, n in enumerate(lengths):
        start = 0 if memory else W - (n - M)
        end = start + n - M  # the row's <cls> goes at end - 1
        out_ids[r, start:end - 1] = ids[r, 1 + M:n]
        out_types[r, start:end - 1] = types[r, 1 + M:n]
        out_ids[r, end - 1], out_types[r, end - 1] = cls_id, 2
        real[r, start:end] = 1
    laid = {"input_ids": out_ids, "token_type_ids": out_types, "attention_mask": real}
    if memory:
        laid["memory_ids"] = ids[:, 1:1 + M].copy()
    return laid


def _spans(n: int, goal: int, cfg: PermutationConfig, rng: np.random.Generator) -> list[np.ndarray]:
    """Spans of the `n` candidates (indices into them) holding `goal` targets: each of length l in
    1..max_span, placed at random inside the next k * l candidates; short of the goal, single tokens fill it."""
    spans, taken, cur, chosen = [], np.zeros(n, dtype=bool), 0, 0
    while cur < n and chosen < goal:
        length = min(int(rng.integers(1, cfg.max_span + 1)), goal - chosen)
        context = cfg.k * length
        start = cur + int(rng.integers(0, context - length + 1))
        span = np.arange(start, min(start + length, n))
        if len(span):
            spans.append(span)
            taken[span] = True
            chosen += len(span)
        cur += context
    missing = goal - chosen
    if missing > 0:
        spans.extend(np.array([i]) for i in rng.choice(np.flatnonzero(~taken), missing, replace=False))
    return spans


def _ranks(n: int, goal: int, cfg: PermutationConfig, rng: np.random.Generator) -> np.ndarray:
    """Each candidate's rank in the order of the targets (0 = predicted first), -1 for the context."""
    rank = np.full(n, -1, dtype=np.int64)
    if goal == 0:
        return rank
    spans = _spans(n, goal, cfg, rng)
    order = np.concatenate([rng.permutation(spans[s]) for s in rng.permutation(len(spans))])
    rank[order] = np.arange(len(order))
    return rank


def permutation_batch(batch: dict[str, torch.Tensor], cfg: PermutationConfig, rng: np.random.Generator, *,
                      cls_id: int, sep_id: int, pad_id: int) -> dict[str, torch.Tensor]:
    """A PLM batch (see the module's docstring) from a corpus batch; `rng` draws the orders and spans."""
    laid = xlnet_layout(batch, cls_id, pad_id, cfg.memory)
    ids, real = laid["input_ids"], laid["attention_mask"].astype(bool)
    B, W = ids.shape
    candidate = real & (ids != cls_id) & (ids != sep_id)
    ranks = np.full((B, W), -1, dtype=np.int64)
    for r in range(B):
        where = np.flatnonzero(candidate[r])
        ranks[r, where] = _ranks(len(where), -(-len(where) // cfg.k), cfg, rng)
    target = ranks >= 0
    perm_mask = (target[:, None, :] & (ranks[:, None, :] >= ranks[:, :, None])) | ~real[:, None, :]
    P = max(1, int(target.sum(1).max()))
    positions = np.full((B, P), W - 1, dtype=np.int64)  # padding rows point at the last column; label -100
    labels = np.full((B, P), -100, dtype=np.int64)
    mapping = np.zeros((B, P, W), dtype=np.float32)
    for r in range(B):
        where = np.flatnonzero(target[r])
        positions[r, :len(where)] = where
        labels[r, :len(where)] = ids[r, where]
        mapping[r, np.arange(len(where)), where] = 1.0
    out = {"input_ids": torch.from_numpy(ids), "token_type_ids": torch.from_numpy(laid["token_type_ids"]),
           "attention_mask": torch.from_numpy(laid["attention_mask"]),
           "perm_mask": torch.from_numpy(perm_mask.astype(np.float32)),
           "target_mapping": torch.from_numpy(mapping), "target_positions": torch.from_numpy(positions),
           "labels": torch.from_numpy(labels)}
    if "memory_ids" in laid:
        out["memory_ids"] = torch.from_numpy(laid["memory_ids"])
    return out

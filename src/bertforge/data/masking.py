"""Masked-LM corruption for a whole batch at once, keyed per example so it is reproducible.

As in BERT's reference code: each sequence gets exactly ``min(max_predictions, max(1, round(len * rate)))``
predictions (``len`` counts [CLS]/[SEP]), chosen uniformly among non-special tokens; with whole-word
masking the units are words (a piece plus its following ``##`` pieces; for byte-level BPE and SentencePiece,
a ``Ġ``/``▁`` piece plus the pieces up to the next one), taken in random order and skipped
when they would overshoot the count. Each chosen piece becomes [MASK] 80% of the time, a random token 10%,
and stays itself 10%. We draw the random token from the non-special vocabulary, so no stray [CLS]/[SEP]/[PAD]
appears mid-sequence.

Randomness is `hash_uniform(key, position)`: an example's mask depends only on its key (static masking: the
example's identity; dynamic masking: identity and epoch), never on the batch it is in or its padding.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from bertforge.data.hashing import hash_bits, hash_uniform

# Separate counter ranges so the three decisions per position are independent.
_SELECT, _ACTION, _REPLACE = 0, 1 << 20, 2 << 20


@dataclass(frozen=True)
class MaskingConfig:
    rate: float = 0.15                   # fraction of tokens predicted (BERT 0.15; recent work 0.25-0.40)
    mask_fraction: float = 0.8           # of the predicted: replaced by [MASK]
    random_fraction: float = 0.1         # of the predicted: replaced by a random token (the rest are kept)
    max_predictions: int | None = None   # per sequence; None = round(rate * max_seq_length)
    whole_word: bool = False
    mode: str = "dynamic"                # "dynamic" (RoBERTa: fresh masks each time) or "static" (BERT)
    dupe_factor: int = 10                # static: each epoch holds this many differently masked copies

    def __post_init__(self) -> None:
        if not 0.0 < self.rate < 1.0:
            raise ValueError(f"masking rate must be in (0, 1), got {self.rate}")
        if self.mask_fraction < 0 or self.random_fraction < 0 or self.mask_fraction + self.random_fraction > 1:
            raise ValueError("mask_fraction and random_fraction must be >= 0 and sum to at most 1")
        if self.mode not in ("static", "dynamic"):
            raise ValueError(f"masking mode must be 'static' or 'dynamic', got {self.mode!r}")
        if self.dupe_factor < 1:
            raise ValueError("dupe_factor must be >= 1")

    def predictions_for(self, max_seq_length: int) -> int:
        return self.max_predictions if self.max_predictions is not None else max(1, round(self.rate * max_seq_length))


@dataclass(frozen=True)
class VocabTables:
    """Lookups the masker needs, built once per vocabulary."""
    is_special: np.ndarray        # bool [vocab]: never masked, never a random replacement
    is_continuation: np.ndarray   # bool [vocab]: "##" pieces
    replacement_ids: np.ndarray   # int64: the ids a random replacement is drawn from
    mask_id: int

    @classmethod
    def from_tokens(cls, tokens: list[str], special_ids: list[int], mask_id: int,
                    word_start_prefix: str = "") -> "VocabTables":
        """Word boundaries come from the token strings. WordPiece (no `word_start_prefix`) marks the pieces
        that continue a word ("##ing"); byte-level BPE ("Ġ") and SentencePiece ("▁") mark the ones that start
        a word, so every other piece continues one."""
        is_special = np.zeros(len(tokens), dtype=bool)
        is_special[list(special_ids)] = True
        if word_start_prefix:
            is_continuation = np.fromiter((not t.startswith(word_start_prefix) for t in tokens), dtype=bool,
                                          count=len(tokens))
        else:
            is_continuation = np.fromiter((t.startswith("##") for t in tokens), dtype=bool, count=len(tokens))
        return cls(is_special, is_continuation, np.flatnonzero(~is_special).astype(np.int64), mask_id)

    @classmethod
    def for_tokenizer(cls, tokenizer: Any, tokens: list[str]) -> "VocabTables":
        """The tables of any bertforge tokenizer (`tokens`: its vocabulary in id order)."""
        return cls.from_tokens(tokens, list(tokenizer.all_special_ids), tokenizer.mask_token_id,
                               getattr(tokenizer, "word_start_prefix", ""))


def _choose_pieces(scores: np.ndarray, candidate: np.ndarray, budget: np.ndarray) -> np.ndarray:
    """The `budget[b]` candidates with the smallest scores in each row."""
    scores = np.where(candidate, scores, np.inf)
    order = np.argsort(scores, axis=1, kind="stable")
    take = np.arange(scores.shape[1])[None, :] < np.minimum(budget, candidate.sum(1))[:, None]
    chosen = np.zeros_like(candidate)
    np.put_along_axis(chosen, order, take, axis=1)
    return chosen


def _choose_words(keys: np.ndarray, ids: np.ndarray, candidate: np.ndarray, budget: np.ndarray,
                  tables: VocabTables) -> np.ndarray:
    """Whole words in random order, each taken if it still fits the budget (the reference's greedy rule)."""
    batch, length = ids.shape
    continues = tables.is_continuation[ids] & candidate
    continues[:, 1:] &= candidate[:, :-1]           # a "##" piece after [CLS]/[SEP] starts its own word
    starts = candidate & ~continues
    word = np.cumsum(starts, axis=1)                # 1-based word index per position (0 before the first)
    flat = np.where(candidate, word + np.arange(batch)[:, None] * (length + 1), 0)
    sizes = np.bincount(flat[candidate], minlength=batch * (length + 1)).reshape(batch, length + 1)
    scores = np.where(sizes > 0, hash_uniform(keys[:, None], _SELECT + np.arange(length + 1)[None, :]), np.inf)
    order = np.argsort(scores, axis=1, kind="stable")
    sorted_sizes = np.take_along_axis(sizes, order, axis=1)
    taken = np.zeros_like(sorted_sizes, dtype=bool)
    count = np.zeros(batch, dtype=np.int64)
    for r in range(int((sizes > 0).sum(1).max(initial=0))):
        s = sorted_sizes[:, r]
        fits = (s > 0) & (count + s <= budget)
        taken[:, r] = fits
        count += np.where(fits, s, 0)
    chosen_word = np.zeros_like(taken)
    np.put_along_axis(chosen_word, order, taken, axis=1)
    return candidate & np.take_along_axis(chosen_word, word, axis=1)


def mask_tokens(ids: np.ndarray, lengths: np.ndarray, keys: np.ndarray, config: MaskingConfig,
                max_predictions: int, tables: VocabTables) -> tuple[np.ndarray, np.ndarray]:
    """Corrupt a padded batch `ids` [B, L] (real tokens in ``[:lengths[b]]``). Returns (inputs, labels), labels
    holding the original id at predicted positions and -100 elsewhere."""
    batch, length = ids.shape
    keys = np.asarray(keys, dtype=np.uint64)
    positions = np.arange(length)[None, :]
    candidate = (positions < lengths[:, None]) & ~tables.is_special[ids]
    budget = np.minimum(max_predictions, np.maximum(1, np.rint(lengths * config.rate).astype(np.int64)))
    if config.whole_word:
        chosen = _choose_words(keys, ids, candidate, budget, tables)
    else:
        chosen = _choose_pieces(hash_uniform(keys[:, None], _SELECT + positions), candidate, budget)
    action = hash_uniform(keys[:, None], _ACTION + positions)
    to_mask = chosen & (action < config.mask_fraction)
    to_random = chosen & (action >= config.mask_fraction) & (action < config.mask_fraction + config.random_fraction)
    replacement = tables.replacement_ids[hash_bits(keys[:, None], _REPLACE + positions) % np.uint64(len(tables.replacement_ids))]
    inputs = np.where(to_mask, tables.mask_id, np.where(to_random, replacement, ids))
    labels = np.where(chosen, ids, -100)
    return inputs, labels

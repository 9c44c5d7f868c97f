"""Masked-LM corruption for a whole batch at once, keyed per example so it is reproducible.

As in BERT's reference code: each sequence gets exactly ``min(max_predictions, max(1, round(len * rate)))``
predictions (``len`` counts [CLS]/[SEP]), chosen uniformly among non-special tokens; with whole-word
masking the units are words (a piece plus its following ``##`` pieces; for byte-level BPE and SentencePiece,
a ``Ġ``/``▁`` piece plus the pieces up to the next one), taken in random order and skipped
when they would overshoot the count. Each chosen piece becomes [MASK] 80% of the time, a random token 10%,
and stays itself 10%. We draw the random token from the non-special vocabulary, so no stray [CLS]/[SEP]/[PAD]
appears mid-sequence.

With ``spans=True`` (SpanBERT, Joshi et al. 2020) whole spans are masked instead: a span's length in units
(pieces, or words under ``whole_word``) is drawn from a geometric distribution (p = 0.2) truncated at 10 and
renormalised, as SpanBERT's code does (mean 3.8); its start is a uniformly drawn unit. Spans never overlap,
never cross a special token (so a pair's spans stay in one segment) and are placed until the same budget is
spent; the span that reaches it is cut to fit. A span that does not fit where it was drawn keeps its length
and is drawn elsewhere (up to a few tries), so lengths are not biased towards short ones. The 80/10/10 rule
is applied per span, as SpanBERT does: all of a span's tokens become [MASK], or all become random tokens,
or all stay.

Randomness is `hash_uniform(key, counter)`: an example's mask depends only on its key (static masking: the
example's identity; dynamic masking: identity and epoch), never on the batch it is in or its padding.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from bertforge.data.hashing import hash_bits, hash_uniform

# Separate counter ranges so the decisions per position (and per span attempt) are independent.
_SELECT, _ACTION, _REPLACE, _SPAN_LENGTH, _SPAN_START = 0, 1 << 20, 2 << 20, 3 << 20, 4 << 20
# A span that does not fit where it was drawn is tried elsewhere this many times, then placed cut to fit;
# after twice as many failures the row stops (only a nearly full row gets there).
_SPAN_TRIES = 8


@dataclass(frozen=True)
class MaskingConfig:
    rate: float = 0.15                   # fraction of tokens predicted (BERT 0.15; recent work 0.25-0.40)
    mask_fraction: float = 0.8           # of the predicted: replaced by [MASK]
    random_fraction: float = 0.1         # of the predicted: replaced by a random token (the rest are kept)
    max_predictions: int | None = None   # per sequence; None = round(rate * max_seq_length)
    whole_word: bool = False
    mode: str = "dynamic"                # "dynamic" (RoBERTa: fresh masks each time) or "static" (BERT)
    dupe_factor: int = 10                # static: each epoch holds this many differently masked copies
    spans: bool = False                  # SpanBERT: mask contiguous spans, 80/10/10 decided per span
    span_p: float = 0.2                  # spans: geometric parameter of the span length (in units)
    max_span_length: int = 10            # spans: lengths are truncated here (and renormalised)

    def __post_init__(self) -> None:
        if not 0.0 < self.rate < 1.0:
            raise ValueError(f"masking rate must be in (0, 1), got {self.rate}")
        if self.mask_fraction < 0 or self.random_fraction < 0 or self.mask_fraction + self.random_fraction > 1:
            raise ValueError("mask_fraction and random_fraction must be >= 0 and sum to at most 1")
        if self.mode not in ("static", "dynamic"):
            raise ValueError(f"masking mode must be 'static' or 'dynamic', got {self.mode!r}")
        if self.dupe_factor < 1:
            raise ValueError("dupe_factor must be >= 1")
        if not 0.0 < self.span_p <= 1.0:
            raise ValueError(f"span_p must be in (0, 1], got {self.span_p}")
        if self.max_span_length < 1:
            raise ValueError(f"max_span_length must be >= 1, got {self.max_span_length}")

    def span_length_probabilities(self) -> np.ndarray:
        """P(length = 1 ... max_span_length): the geometric distribution truncated and renormalised."""
        k = np.arange(1, self.max_span_length + 1)
        pmf = self.span_p * (1.0 - self.span_p) ** (k - 1)
        return pmf / pmf.sum()

    def span_lengths(self, uniform: np.ndarray) -> np.ndarray:
        """Span lengths for uniform draws in [0, 1) (inverse CDF of `span_length_probabilities`)."""
        cdf = np.cumsum(self.span_length_probabilities())
        return np.minimum(np.searchsorted(cdf, uniform, side="right"), self.max_span_length - 1) + 1

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


def _units(ids: np.ndarray, candidate: np.ndarray, tables: VocabTables,
           whole_word: bool) -> tuple[np.ndarray, np.ndarray]:
    """Which positions start a unit (a piece, or a whole word) and the 0-based unit index of every candidate
    position (-1 elsewhere)."""
    if whole_word:
        continues = tables.is_continuation[ids] & candidate
        continues[:, 1:] &= candidate[:, :-1]       # a "##" piece after [CLS]/[SEP] starts its own word
        starts = candidate & ~continues
    else:
        starts = candidate
    return starts, np.where(candidate, np.cumsum(starts, axis=1) - 1, -1)


def _choose_words(keys: np.ndarray, ids: np.ndarray, candidate: np.ndarray, budget: np.ndarray,
                  tables: VocabTables) -> np.ndarray:
    """Whole words in random order, each taken if it still fits the budget (the reference's greedy rule)."""
    batch, length = ids.shape
    starts, _ = _units(ids, candidate, tables, whole_word=True)
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


def _choose_spans(keys: np.ndarray, ids: np.ndarray, candidate: np.ndarray, budget: np.ndarray,
                  tables: VocabTables, config: MaskingConfig) -> np.ndarray:
    """SpanBERT's span selection for a batch at once; returns, per position, the position where its span
    starts (-1 where nothing is chosen). One loop step places (or tries to place) one span in every row."""
    batch, length = ids.shape
    starts, unit_of = _units(ids, candidate, tables, config.whole_word)
    n_units = starts.sum(1)
    width = max(1, int(n_units.max(initial=0)))
    rows = np.arange(batch)[:, None]
    # per unit: its first position, its size in tokens, and its segment (units of one segment have no
    # special token between them)
    unit_pos = np.argsort(~starts, axis=1, kind="stable")[:, :width]
    valid_unit = np.arange(width)[None, :] < n_units[:, None]
    flat = (rows * width + unit_of)[candidate]
    unit_size = np.bincount(flat, minlength=batch * width).reshape(batch, width)
    segment = np.cumsum(~candidate, axis=1)
    unit_segment = np.where(valid_unit, np.take_along_axis(segment, unit_pos, axis=1), -1)

    M = config.max_span_length
    offsets = np.arange(M)[None, :]
    taken = np.zeros((batch, width), dtype=bool)
    span_of = np.full((batch, width), -1, dtype=np.int64)     # the unit its span starts at
    remaining = budget.astype(np.int64).copy()
    pending = np.zeros(batch, dtype=np.int64)                 # drawn length still to be placed (0: none)
    fails = np.zeros(batch, dtype=np.int64)
    done = (remaining <= 0) | (n_units == 0)
    attempt = 0
    while not done.all():
        fresh = ~done & (pending == 0)
        pending = np.where(fresh, config.span_lengths(hash_uniform(keys, _SPAN_LENGTH + attempt)), pending)
        fails[fresh] = 0
        start = np.minimum((hash_uniform(keys, _SPAN_START + attempt) * n_units).astype(np.int64),
                           np.maximum(n_units - 1, 0))
        idx = start[:, None] + offsets
        inside = idx < n_units[:, None]
        idx = np.minimum(idx, width - 1)
        size = np.where(inside, unit_size[rows, idx], length + 1)
        usable = inside & ~taken[rows, idx] & (unit_segment[rows, idx] == unit_segment[rows[:, 0], start][:, None])
        room = np.cumprod(usable, axis=1).sum(1)               # free units in a row from the start, same segment
        affordable = (np.cumsum(size, axis=1) <= remaining[:, None]).sum(1)
        want = np.minimum(pending, affordable)                 # the drawn length, cut only by the budget
        place = np.where(room >= want, want, 0)
        failed = ~done & (place == 0)
        fails += failed
        cut = failed & (fails >= _SPAN_TRIES)                 # crowded: place what fits here
        place = np.where(cut, np.minimum(room, want), place)
        place = np.where(done, 0, place)
        placed = place > 0
        span = offsets < place[:, None]
        r_idx, j_idx = np.nonzero(span)
        taken[r_idx, idx[r_idx, j_idx]] = True
        span_of[r_idx, idx[r_idx, j_idx]] = start[r_idx]
        remaining -= np.where(span, size, 0).sum(1)
        pending = np.where(placed, 0, pending)
        done |= (remaining <= 0) | (taken.sum(1) >= n_units) | (fails >= 2 * _SPAN_TRIES)
        attempt += 1
    span_unit = np.where(candidate, span_of[rows, np.maximum(unit_of, 0)], -1)
    return np.where(span_unit >= 0, unit_pos[rows, np.maximum(span_unit, 0)], -1)


def _candidates_and_budget(ids: np.ndarray, lengths: np.ndarray, config: MaskingConfig, max_predictions: int,
                           tables: VocabTables) -> tuple[np.ndarray, np.ndarray]:
    positions = np.arange(ids.shape[1])[None, :]
    candidate = (positions < lengths[:, None]) & ~tables.is_special[ids]
    budget = np.minimum(max_predictions, np.maximum(1, np.rint(lengths * config.rate).astype(np.int64)))
    return candidate, budget


def select_spans(ids: np.ndarray, lengths: np.ndarray, keys: np.ndarray, config: MaskingConfig,
                 max_predictions: int, tables: VocabTables) -> np.ndarray:
    """The spans `mask_tokens` masks under ``config.spans``: per position, the position its span starts at
    (-1 where nothing is masked)."""
    candidate, budget = _candidates_and_budget(ids, lengths, config, max_predictions, tables)
    return _choose_spans(np.asarray(keys, dtype=np.uint64), ids, candidate, budget, tables, config)


def mask_tokens(ids: np.ndarray, lengths: np.ndarray, keys: np.ndarray, config: MaskingConfig,
                max_predictions: int, tables: VocabTables) -> tuple[np.ndarray, np.ndarray]:
    """Corrupt a padded batch `ids` [B, L] (real tokens in ``[:lengths[b]]``). Returns (inputs, labels), labels
    holding the original id at predicted positions and -100 elsewhere."""
    batch, length = ids.shape
    keys = np.asarray(keys, dtype=np.uint64)
    positions = np.arange(length)[None, :]
    candidate, budget = _candidates_and_budget(ids, lengths, config, max_predictions, tables)
    if config.spans:
        span_start = _choose_spans(keys, ids, candidate, budget, tables, config)
        chosen = span_start >= 0
        action = hash_uniform(keys[:, None], _ACTION + np.maximum(span_start, 0))  # one decision per span
    else:
        if config.whole_word:
            chosen = _choose_words(keys, ids, candidate, budget, tables)
        else:
            chosen = _choose_pieces(hash_uniform(keys[:, None], _SELECT + positions), candidate, budget)
        action = hash_uniform(keys[:, None], _ACTION + positions)
    to_mask = chosen & (action < config.mask_fraction)
    to_random = chosen & (action >= config.mask_fraction) & (action < config.mask_fraction + config.random_fraction)
    choice = hash_bits(keys[:, None], _REPLACE + positions) % np.uint64(len(tables.replacement_ids))
    replacement = tables.replacement_ids[choice]
    inputs = np.where(to_mask, tables.mask_id, np.where(to_random, replacement, ids))
    labels = np.where(chosen, ids, -100)
    return inputs, labels


def parse_rate_schedule(text: str) -> list[tuple[float, float]]:
    """'0.3:0.3,0.15:0.4,0.05:0.3' -> [(0.3, 0.3), (0.15, 0.4), (0.05, 0.3)]: mask rates and the fractions of the
    run they hold (which add up to 1), as the sequence-length schedule is spelt. Raises ValueError."""
    phases = []
    for phase in str(text).split(","):
        rate, _, frac = phase.strip().partition(":")
        try:
            phases.append((float(rate), float(frac) if frac else 1.0))
        except ValueError:
            raise ValueError(f"cannot read the mask-rate schedule {text!r}; use e.g. 0.3:0.3,0.15:0.4,0.05:0.3") from None
    if abs(sum(f for _, f in phases) - 1.0) > 1e-6 or any(f <= 0 for _, f in phases):
        raise ValueError(f"the fractions of the mask-rate schedule {text!r} must be positive and add up to 1")
    if any(not 0.0 < r < 1.0 for r, _ in phases):
        raise ValueError(f"the rates of the mask-rate schedule {text!r} must be in (0, 1)")
    return phases


def phase_value(phases: list[tuple[Any, float]], progress: float) -> Any:
    """The value of the phase (value, fraction of the run) that `progress` (0..1) through the run is in: one rule
    for every phased setting (the mask rate here, pre-training's sequence length)."""
    edge = 0.0
    for value, frac in phases:
        edge += frac
        if progress < edge - 1e-12:
            return value
    return phases[-1][0]


def rate_at(phases: list[tuple[float, float]], progress: float) -> float:
    """The scheduled mask rate at `progress` (0..1) through the run."""
    return phase_value(phases, progress)

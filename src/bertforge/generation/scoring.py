"""Pseudo-log-likelihood (Salazar et al. 2020): mask each token in turn, sum log p(true token | the rest).

All masked copies of many sentences run together: sentences are sorted by length and their copies packed
into batches of at most `max_tokens` padded tokens, and the MLM head runs only on the one masked row of each
copy. The result does not depend on the batching (up to float rounding).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from bertforge.generation.mlm import MaskedLM
from bertforge.generation.template import GenerationInputError


def pseudo_log_likelihood(model: Any, tokenizer: Any, texts: Sequence[str], *, per_token: bool = False,
                          max_tokens: int = 8192, precision: str = "auto",
                          labels: Sequence[str] | None = None,
                          progress: Callable[[int], Any] | None = None) -> list[dict]:
    """For each text: {"text", "pll"} (natural log), plus "tokens" and "token_scores" with `per_token`.

    Every token between the special tokens is scored. `labels` name the texts in error messages (e.g.
    "file.txt:12"); `progress`, if given, is called once the texts are checked with the number of masked
    copies and returns a tqdm-like bar, advanced by each batch's copies and closed at the end."""
    mlm = MaskedLM(model, tokenizer, max_tokens=max_tokens, precision=precision)
    labels = list(labels) if labels is not None else [f"text {i + 1}" for i in range(len(texts))]
    special = set(mlm.special_ids)
    encoded, scored = [], []
    for text, label in zip(texts, labels):
        ids = list(tokenizer.encode(text, add_special_tokens=True))
        if len(ids) > mlm.max_length:
            raise GenerationInputError(f"{label}: {len(ids)} tokens with the special tokens; this model takes "
                                       f"at most {mlm.max_length}")
        positions = [i for i, t in enumerate(ids) if t not in special]
        if not positions:
            raise GenerationInputError(f"{label}: no tokens to score (empty text?)")
        encoded.append(ids)
        scored.append(positions)
    scores = [[0.0] * len(p) for p in scored]
    lengths = torch.tensor([len(ids) for ids in encoded])
    table = torch.full((len(encoded), int(lengths.max())), mlm.pad_id, dtype=torch.long)  # every sentence, padded
    for s, ids in enumerate(encoded):
        table[s, :len(ids)] = torch.tensor(ids)
    bar = progress(sum(len(p) for p in scored)) if progress else None
    for batch in _batches(encoded, scored, max_tokens):
        sentence = torch.tensor([s for s, _ in batch])
        position = torch.tensor([scored[s][k] for s, k in batch])
        row = torch.arange(len(batch))
        width = int(lengths[sentence].max())
        ids = table[sentence, :width]                                 # one copy per scored token
        attention = (torch.arange(width)[None, :] < lengths[sentence][:, None]).long()
        true = ids[row, position]
        ids[row, position] = mlm.mask_id
        where = torch.zeros_like(ids, dtype=torch.bool)
        where[row, position] = True
        logp = mlm.log_probs(ids, where, attention).gather(-1, true[:, None])[:, 0]
        for (s, k), value in zip(batch, logp.tolist()):
            scores[s][k] = value
        if bar is not None:
            bar.update(len(batch))
    if bar is not None:
        bar.close()
    results = []
    for text, ids, positions, token_scores in zip(texts, encoded, scored, scores):
        result = {"text": text, "pll": math.fsum(token_scores)}
        if per_token:
            result["tokens"] = tokenizer.convert_ids_to_tokens([ids[p] for p in positions])
            result["token_scores"] = token_scores
        results.append(result)
    return results


def _batches(encoded: list[list[int]], scored: list[list[int]], max_tokens: int):
    """(sentence, k-th scored position) pairs, longest sentences first, in batches of <= max_tokens padded
    tokens (a single copy longer than the budget still goes alone)."""
    order = sorted(range(len(encoded)), key=lambda s: -len(encoded[s]))
    batch: list[tuple[int, int]] = []
    width = 0
    for s in order:
        for k in range(len(scored[s])):
            new_width = max(width, len(encoded[s]))
            if batch and new_width * (len(batch) + 1) > max_tokens:
                yield batch
                batch, new_width = [], len(encoded[s])
            batch.append((s, k))
            width = new_width
    if batch:
        yield batch

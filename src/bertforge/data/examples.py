"""Training examples as *plans*: token ranges into the shards, decided once per epoch (or dupe round).

A plan row is ``(shard, a_start, a_end, b_start, b_end, label)`` with token offsets local to the shard.
Pairs (NSP/SOP) fill both ranges; single-segment objectives (MLM, LTR) leave ``b_start = b_end = -1``. Ranges
stay contiguous through BERT's random front/back truncation, so a row is a few integers whatever the
sequence length, and turning it into ids is one slice per segment (`dataset.py`).

The builders follow the papers' reference procedures:

* ``nsp`` (BERT, `create_instances_from_document`): accumulate sentences of a document up to a target
  length (``max_seq_length - 3``, or with probability `short_seq_prob` a random target in [2, max], drawn
  once per document as in the reference code), split the chunk at a random sentence boundary into A and B;
  half of the time B is instead a random span of a random *other* document and the unused sentences are put
  back. Label 0 = B continues A, 1 = B is random (HF's `next_sentence_label`).
* ``sop`` (ALBERT): the same chunks, B always the true continuation, A and B swapped half of the time
  (label 1 = swapped).

One deliberate difference from both reference scripts: a chunk of a single sentence (one sentence reaching
the target alone, or a document's last one) always got a random B there, which makes ~56% of BERT's pairs
"random" on Wikipedia and would take SOP out of the document. The papers say 50%, so we flip the same coin
for it and, when B must be the continuation, cut that sentence at a random token.
* ``full-sentences`` (RoBERTa): contiguous sentences filling ``max_seq_length - 2`` tokens, crossing document
  ends; each crossing costs one extra [SEP] (inserted when the ids are materialised).
* ``doc-sentences`` (RoBERTa): the same but a sequence never crosses a document end (so some are shorter).

Random choices come from `random.Random(seed)`: exact and reproducible across platforms, and much faster
than numpy for the scalar draws these sequential procedures need.
"""
from __future__ import annotations

import random

import numpy as np

from bertforge.data.shards import CorpusSplit

PAIR_KINDS = ("nsp", "sop")
SINGLE_KINDS = ("full-sentences", "doc-sentences")
PLAN_COLUMNS = ("shard", "a_start", "a_end", "b_start", "b_end", "label")


def _truncate_pair(a0: int, a1: int, b0: int, b1: int, max_tokens: int, rng: random.Random) -> tuple[int, int, int, int]:
    """BERT's `truncate_seq_pair`: drop a token from the longer side, at its front or back at random."""
    while (a1 - a0) + (b1 - b0) > max_tokens:
        if a1 - a0 > b1 - b0:
            if rng.random() < 0.5:
                a0 += 1
            else:
                a1 -= 1
        else:
            if rng.random() < 0.5:
                b0 += 1
            else:
                b1 -= 1
    return a0, a1, b0, b1


def _pair_rows(shard_id: int, sent: list[int], docs: list[int], kind: str, max_seq_length: int,
               short_seq_prob: float, rng: random.Random, rows: list[tuple[int, ...]]) -> None:
    max_tokens = max_seq_length - 3  # [CLS] A [SEP] B [SEP]
    n_docs = len(docs) - 1
    for d in range(n_docs):
        s_begin, s_end = docs[d], docs[d + 1]
        target = max_tokens
        if rng.random() < short_seq_prob:
            target = rng.randint(2, max_tokens)
        chunk_start, length, i = s_begin, 0, s_begin
        while i < s_end:
            length += sent[i + 1] - sent[i]
            if i == s_end - 1 or length >= target:
                n_chunk = i - chunk_start + 1
                a_end = chunk_start + (rng.randint(1, n_chunk - 1) if n_chunk >= 2 else 1)
                a0, a1 = sent[chunk_start], sent[a_end]
                label = 0
                if kind == "nsp" and (rng.random() < 0.5 or (n_chunk == 1 and a1 - a0 < 2)):
                    label = 1
                    target_b = target - (a1 - a0)
                    other = d
                    for _ in range(10):  # as the reference: 10 tries to find another document
                        other = rng.randint(0, n_docs - 1)
                        if other != d:
                            break
                    j = rng.randint(docs[other], docs[other + 1] - 1)
                    b0 = sent[j]
                    while j < docs[other + 1]:
                        j += 1
                        if sent[j] - b0 >= target_b:
                            break
                    b1 = sent[j]
                    i = a_end - 1  # the chunk's unused sentences are put back for the next chunk
                elif n_chunk == 1:
                    if a1 - a0 < 2:  # sop: a one-token chunk cannot make two segments
                        chunk_start, length, i = i + 1, 0, i + 1
                        continue
                    b0, b1 = a0 + rng.randint(1, a1 - a0 - 1), a1  # cut the lone sentence in two
                    a1 = b0
                else:
                    b0, b1 = a1, sent[i + 1]
                if kind == "sop" and rng.random() < 0.5:
                    label = 1
                a0, a1, b0, b1 = _truncate_pair(a0, a1, b0, b1, max_tokens, rng)
                if label == 1 and kind == "sop":
                    a0, a1, b0, b1 = b0, b1, a0, a1
                rows.append((shard_id, a0, a1, b0, b1, label))
                chunk_start, length = i + 1, 0
            i += 1


def _packed_rows(shard_id: int, sent: np.ndarray, docs: np.ndarray, cross_documents: bool, max_seq_length: int,
                 rows: list[tuple[int, ...]]) -> None:
    """Greedy packing of whole sentences; a sentence longer than the budget becomes its own, cut sequence."""
    budget = max_seq_length - 2  # [CLS] ... [SEP]
    is_doc_start = np.zeros(len(sent) - 1, dtype=bool)
    is_doc_start[docs[:-1]] = True
    lens = np.diff(sent).tolist()
    starts = is_doc_start.tolist()
    sent_list = sent.tolist()
    span_start = sent_list[0]
    used = 0  # tokens plus extra [SEP]s in the current span
    for k, n in enumerate(lens):
        cost = n + (1 if starts[k] and used else 0)
        if used and (used + cost > budget or (starts[k] and not cross_documents)):
            rows.append((shard_id, span_start, sent_list[k], -1, -1, -1))
            used, cost = 0, n
        if not used:
            span_start = sent_list[k]
        if cost > budget:  # only when the corpus was prepared for longer sequences than these
            rows.append((shard_id, span_start, span_start + budget, -1, -1, -1))
            used = 0
            continue
        used += cost
    if used:
        rows.append((shard_id, span_start, sent_list[-1], -1, -1, -1))


def build_plan(corpus: CorpusSplit, kind: str, max_seq_length: int, *, seed: int = 0,
               short_seq_prob: float = 0.1) -> np.ndarray:
    """All examples of one pass over `corpus` as an int64 array [N, 6] (see `PLAN_COLUMNS`), in corpus order.

    `kind` is "nsp", "sop", "full-sentences" or "doc-sentences"; `seed` only matters for the pair kinds.
    NSP's random documents are drawn from the same shard (the reference draws from the documents of the same
    input batch), which keeps memory per step bounded by one shard's offsets.
    """
    if kind not in PAIR_KINDS + SINGLE_KINDS:
        raise ValueError(f"unknown example kind {kind!r}; expected one of {PAIR_KINDS + SINGLE_KINDS}")
    if max_seq_length < 8:
        raise ValueError(f"max_seq_length must be at least 8, got {max_seq_length}")
    rows: list[tuple[int, ...]] = []
    for shard_id, shard in enumerate(corpus.shards):
        sent = np.asarray(shard.sentence_offsets)
        docs = np.asarray(shard.document_offsets)
        if kind in PAIR_KINDS:
            rng = random.Random(seed * 1_000_003 + shard_id)
            _pair_rows(shard_id, sent.tolist(), docs.tolist(), kind, max_seq_length, short_seq_prob, rng, rows)
        else:
            _packed_rows(shard_id, sent, docs, kind == "full-sentences", max_seq_length, rows)
    return np.asarray(rows, dtype=np.int64).reshape(-1, len(PLAN_COLUMNS))

"""Start/end logits of every window -> one answer text per question, cut from the context by character offsets.

Cutting by offsets (never by detokenizing WordPieces) returns the context's own characters, so casing,
accents and spacing come out exactly as in the text. For SQuAD v2 the null score ([CLS] start + end,
lowest over the question's windows) is compared with the best span: `null_diff = null - best_span`,
which plays the role of the no-answer probability in the official script (answer "" when above a threshold).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from bertforge.tasks.features import Feature
from bertforge.tasks.readers import SquadExample


@dataclass
class SpanPrediction:
    text: str
    score: float  # start logit + end logit
    start_char: int
    end_char: int


@dataclass
class QuestionPrediction:
    qid: str
    best: SpanPrediction | None  # best non-null span; None if no valid span was found
    null_diff: float  # null score - best span score (> threshold -> answer "")
    nbest: list[SpanPrediction] = field(default_factory=list)

    def answer(self, threshold: float | None = None) -> str:
        """The best span's text, or "" when `threshold` is given and the null score beats the span by more."""
        if self.best is None or (threshold is not None and self.null_diff > threshold):
            return ""
        return self.best.text


def best_spans(start: np.ndarray, end: np.ndarray, offsets: Sequence[tuple[int, int] | None], n_best: int,
               max_answer_length: int) -> list[tuple[float, int, int]]:
    """(score, start token, end token) of the best valid spans of one window: both ends on context
    tokens, end >= start, at most `max_answer_length` tokens, taken from the top-n starts and ends."""
    starts = np.argsort(start)[::-1][:n_best]
    ends = np.argsort(end)[::-1][:n_best]
    spans = []
    for s in starts:
        if s >= len(offsets) or offsets[s] is None:
            continue
        for e in ends:
            if e >= len(offsets) or offsets[e] is None or e < s or e - s + 1 > max_answer_length:
                continue
            spans.append((float(start[s] + end[e]), int(s), int(e)))
    spans.sort(key=lambda t: -t[0])
    return spans[:n_best]


def postprocess_squad(examples: Sequence[SquadExample], features: Sequence[Feature],
                      start_logits: Sequence[np.ndarray], end_logits: Sequence[np.ndarray], n_best: int = 20,
                      max_answer_length: int = 30) -> dict[str, QuestionPrediction]:
    """One QuestionPrediction per question id, the best span over all of its windows."""
    by_example: dict[int, list[int]] = {}
    for i, f in enumerate(features):
        by_example.setdefault(f["example_index"], []).append(i)
    out: dict[str, QuestionPrediction] = {}
    for index, ex in enumerate(examples):
        candidates: list[SpanPrediction] = []
        null = float("inf")
        for i in by_example.get(index, []):
            s, e = np.asarray(start_logits[i]), np.asarray(end_logits[i])
            offsets = features[i]["offsets"]
            null = min(null, float(s[0] + e[0]))
            for score, a, b in best_spans(s, e, offsets, n_best, max_answer_length):
                start_char, end_char = offsets[a][0], offsets[b][1]
                candidates.append(SpanPrediction(ex.context[start_char:end_char], score, start_char, end_char))
        candidates.sort(key=lambda c: -c.score)
        # the same text can come from two overlapping windows: keep its best score once
        seen, nbest = set(), []
        for c in candidates:
            if (c.start_char, c.end_char) not in seen:
                seen.add((c.start_char, c.end_char))
                nbest.append(c)
            if len(nbest) == n_best:
                break
        best = nbest[0] if nbest else None
        null_diff = null - best.score if best is not None else float("inf")
        out[ex.qid] = QuestionPrediction(ex.qid, best, null_diff, nbest)
    return out

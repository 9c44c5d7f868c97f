"""Entity-level NER scores with conlleval semantics (seqeval, default mode), on word-level tags.

Scores must be computed per *word*: if every WordPiece of a word carried a tag, one gold entity
could match several predicted ones and the counts would inflate. The caller first maps token
predictions back to words with `align_predictions_to_words` (first sub-token of each word).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np


def align_predictions_to_words(
    pred_ids: Sequence[int] | np.ndarray,
    word_ids: Sequence[int | None],
    label_list: Sequence[str],
    num_words: int | None = None,
) -> list[str]:
    """Word-level tags for one sequence: the prediction of each word's *first* sub-token.

    `word_ids[i]` is the word index of token i (None for [CLS]/[SEP]/padding), as a fast
    tokenizer's `word_ids()` gives it; `pred_ids` may be longer (padding). Words that got no
    token (cut off by max length) are tagged "O" when `num_words` says how many there are;
    without it a gap in the word indices is an error rather than a silent shift.
    """
    preds = np.asarray(pred_ids).reshape(-1)
    if len(preds) < len(word_ids):
        raise ValueError(f"{len(preds)} predictions for {len(word_ids)} tokens")
    first: dict[int, str] = {}
    for token, word in enumerate(word_ids):
        if word is not None and word not in first:
            first[int(word)] = label_list[int(preds[token])]
    if num_words is None:
        num_words = max(first, default=-1) + 1
        gaps = [w for w in range(num_words) if w not in first]
        if gaps:
            raise ValueError(f"words {gaps[:5]} have no token; pass num_words to tag them 'O'")
    return [first.get(w, "O") for w in range(num_words)]


def ner_metrics(predictions: Sequence[Sequence[str]], labels: Sequence[Sequence[str]]) -> dict[str, object]:
    """Entity precision / recall / F1 (fractions), token accuracy and per-type scores.

    `predictions` and `labels` are word-level IOB2 tag sequences, one per sentence, of equal
    lengths. Entities are counted as conlleval does (an I- after O or another type starts one),
    which is seqeval's default mode.
    """
    from seqeval.metrics import accuracy_score, classification_report, f1_score, precision_score, recall_score
    from seqeval.metrics.sequence_labeling import get_entities

    y_pred = [list(s) for s in predictions]
    y_true = [list(s) for s in labels]
    if len(y_pred) != len(y_true):
        raise ValueError(f"{len(y_pred)} predicted sentences for {len(y_true)} gold sentences")
    for i, (p, t) in enumerate(zip(y_pred, y_true)):
        if len(p) != len(t):
            raise ValueError(f"sentence {i}: {len(p)} predicted tags for {len(t)} words (align to words first)")
    report = classification_report(y_true, y_pred, output_dict=True, zero_division=0)
    per_type = {name: {"precision": float(v["precision"]), "recall": float(v["recall"]),
                       "f1": float(v["f1-score"]), "support": int(v["support"])}
                for name, v in report.items() if not name.endswith(" avg")}
    return {
        "precision": float(precision_score(y_true, y_pred, zero_division=0)),
        "recall": float(recall_score(y_true, y_pred, zero_division=0)),
        "f1": float(f1_score(y_true, y_pred, zero_division=0)),
        "accuracy": float(accuracy_score(y_true, y_pred)),
        "n_gold": len(get_entities(y_true)),
        "n_pred": len(get_entities(y_pred)),
        "per_type": per_type,
    }

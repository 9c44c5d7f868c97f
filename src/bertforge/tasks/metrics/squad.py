"""SQuAD v1.1 and v2.0 evaluation, following the official evaluation scripts' definitions.

Answers are normalised (lower case, punctuation removed, the articles a/an/the removed,
whitespace collapsed) before comparing; EM and token-level F1 take the max over the gold
answers and are averaged over questions and multiplied by 100. v1.1 and v2.0 differ only in
corner cases, kept here on purpose: v1.1 scores a question without a prediction as 0 (and
still counts it), v2.0 needs every prediction; v1.1's F1 of two empty answers is 0, v2.0's is 1
(an unanswerable question is gold ""), and v2.0 drops gold answers that normalise to "".
"""
from __future__ import annotations

import re
import string
from collections import Counter
from typing import Any, Mapping

_PUNCT = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(text: str) -> str:
    """The official normalisation, in the official order: lower, drop punctuation, drop articles, fix spaces."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def answer_tokens(text: str) -> list[str]:
    return normalize_answer(text).split() if text else []


def exact_match(prediction: str, gold: str) -> int:
    """1 if the two answers are equal after normalisation, else 0."""
    return int(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str, *, v2: bool = False) -> float:
    """Harmonic mean of token precision and recall over the bag of normalised tokens.

    Empty token lists: v1.1 gives 0 whatever the other side is; v2.0 gives 1 if both are empty
    (a correct "no answer") and 0 otherwise.
    """
    pred, ref = answer_tokens(prediction), answer_tokens(gold)
    if v2 and (not pred or not ref):
        return float(pred == ref)
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def _gold(dataset: Any) -> list[tuple[str, list[str]]]:
    """(qid, gold answer texts) for every question of a SquadReadResult / example list / raw JSON."""
    if isinstance(dataset, Mapping):
        dataset = dataset["data"]
    items = list(dataset)
    if items and isinstance(items[0], Mapping):  # raw articles
        return [(qa["id"], [a["text"] for a in qa["answers"]])
                for article in items for par in article["paragraphs"] for qa in par["qas"]]
    return [(ex.qid, [a.text for a in ex.answers]) for ex in items]


def squad_v1_evaluate(predictions: Mapping[str, str], dataset: Any) -> dict[str, float]:
    """SQuAD v1.1: {"exact_match", "f1"} in percent over all questions of `dataset`.

    `predictions` maps question id to answer text; a question without a prediction scores 0
    (the official script warns and does the same); predictions for unknown ids are ignored.
    """
    gold = _gold(dataset)
    if not gold:
        raise ValueError("no questions to score")
    em = f1 = 0.0
    for qid, answers in gold:
        if qid not in predictions:
            continue
        pred = predictions[qid]
        em += max(exact_match(pred, g) for g in answers)
        f1 += max(token_f1(pred, g) for g in answers)
    return {"exact_match": 100.0 * em / len(gold), "f1": 100.0 * f1 / len(gold)}


def squad_v2_evaluate(
    predictions: Mapping[str, str],
    dataset: Any,
    na_probs: Mapping[str, float] | None = None,
    na_prob_thresh: float = 1.0,
) -> dict[str, float]:
    """SQuAD v2.0: exact/f1/total, HasAns_* and NoAns_* (when such questions exist), in percent.

    A prediction of "" means "no answer". `na_probs` (qid -> null score / no-answer probability)
    turns a prediction into "" where it exceeds `na_prob_thresh`, and adds `best_exact`,
    `best_exact_thresh`, `best_f1`, `best_f1_thresh`: the best scores over all thresholds.
    """
    gold = _gold(dataset)
    if not gold:
        raise ValueError("no questions to score")
    missing = [qid for qid, _ in gold if qid not in predictions]
    if missing:
        raise ValueError(f"{len(missing)} questions have no prediction (first: {missing[0]!r}); "
                         "SQuAD v2.0 needs one per question (\"\" for no answer)")
    if na_probs is not None:
        lacking = [qid for qid, _ in gold if qid not in na_probs]
        if lacking:
            raise ValueError(f"{len(lacking)} questions have no na_prob (first: {lacking[0]!r})")
    has_ans = {qid: bool(answers) for qid, answers in gold}
    exact_raw: dict[str, float] = {}
    f1_raw: dict[str, float] = {}
    for qid, answers in gold:
        refs = [a for a in answers if normalize_answer(a)] or [""]
        pred = predictions[qid]
        exact_raw[qid] = float(max(exact_match(pred, g) for g in refs))
        f1_raw[qid] = max(token_f1(pred, g, v2=True) for g in refs)
    probs = na_probs if na_probs is not None else {qid: 0.0 for qid in predictions}
    exact = _apply_threshold(exact_raw, probs, has_ans, na_prob_thresh)
    f1 = _apply_threshold(f1_raw, probs, has_ans, na_prob_thresh)
    out = _summary(exact, f1, list(exact))
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        qids = [qid for qid in exact if has_ans[qid] is wanted]
        if qids:
            out.update({f"{prefix}_{k}": v for k, v in _summary(exact, f1, qids).items()})
    if na_probs is not None:
        out["best_exact"], out["best_exact_thresh"] = best_threshold(predictions, exact_raw, na_probs, has_ans)
        out["best_f1"], out["best_f1_thresh"] = best_threshold(predictions, f1_raw, na_probs, has_ans)
    return out


def _apply_threshold(scores: dict[str, float], na_probs: Mapping[str, float], has_ans: Mapping[str, bool],
                     thresh: float) -> dict[str, float]:
    """Questions whose na_prob is above `thresh` are answered "": right iff they have no answer."""
    return {qid: (float(not has_ans[qid]) if na_probs[qid] > thresh else s) for qid, s in scores.items()}


def _summary(exact: Mapping[str, float], f1: Mapping[str, float], qids: list[str]) -> dict[str, float]:
    return {"exact": 100.0 * sum(exact[q] for q in qids) / len(qids),
            "f1": 100.0 * sum(f1[q] for q in qids) / len(qids),
            "total": len(qids)}


def best_threshold(predictions: Mapping[str, str], scores: Mapping[str, float], na_probs: Mapping[str, float],
                   has_ans: Mapping[str, bool]) -> tuple[float, float]:
    """(best score in percent, the na_prob threshold reaching it), as the v2.0 script finds them.

    Start from "answer nothing" (every unanswerable question right). Walk the questions by
    increasing na_prob (a stable sort: ties keep the order of `na_probs`) and switch each one to
    its prediction: an answerable one gains its score, an unanswerable one with a non-empty
    prediction loses 1. The threshold is the na_prob of the question after which the running
    score was *strictly* highest (so the first, lowest such point wins), 0.0 if never beaten.
    Like the script, the scan does not group tied na_probs, and the percentage is over all
    questions scored.
    """
    current = float(sum(1 for qid in has_ans if not has_ans[qid]))
    best, best_thresh = current, 0.0
    for qid in sorted(na_probs, key=lambda q: na_probs[q]):
        if qid not in scores:
            continue
        if has_ans[qid]:
            current += scores[qid]
        elif predictions[qid]:
            current -= 1.0
        if current > best:
            best, best_thresh = current, float(na_probs[qid])
    return 100.0 * best / len(scores), best_thresh


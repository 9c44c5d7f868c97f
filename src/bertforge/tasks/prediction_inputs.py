"""What a `Predictor` does with each head kind's inputs: check and cap them, encode, run the model, decode the
outputs into one result dict per input (`PREDICT_BY_INPUTS`, keyed by the head's `inputs` in `tasks/registry.py`).
"""
from __future__ import annotations

import re
from typing import Any, Protocol, Sequence

import numpy as np

from bertforge.tasks.evaluation import decode_outputs
from bertforge.tasks.features import encode_multiple_choice, encode_squad
from bertforge.tasks.long_inputs import check_encoded, encode_sentences, encode_texts, mean_by_owner
from bertforge.tasks.readers import SquadExample, SwagExample, TextExample
from bertforge.tasks.registry import HEADS

class PredictorParts(Protocol):
    """What these functions read of a `tasks.predictor.Predictor`."""

    tokenizer: Any
    task: dict[str, Any]
    spec: Any
    settings: Any
    labels: list[str] | None
    long_inputs: Any
    max_chars: int

    @property
    def head(self) -> str: ...

    def run_features(self, features: Any, batch_size: int) -> list[Any]: ...


_WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def split_words(text: str) -> list[tuple[str, int, int]]:
    """(word, start, end) with punctuation as separate words, the way CoNLL text is tokenized."""
    return [(m.group(), m.start(), m.end()) for m in _WORD.finditer(text)]


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def cap(p: PredictorParts, text: Any, index: int, what: str, cut: set[int]) -> str:
    """`text` cut at the predictor's `max_chars` (its index noted in `cut`); a non-string refused."""
    if not isinstance(text, str):
        raise ValueError(f"input {index}: {what} must be a string, got {type(text).__name__}")
    if len(text) > p.max_chars:
        cut.add(index)
        return text[:p.max_chars]
    return text


def predict_texts(p: PredictorParts, inputs: list[Any], batch_size: int) -> list[dict[str, Any]]:
    """Texts or (text, text_pair) pairs -> label and scores (or a regression score); long ones chunked."""
    examples, cut = [], set()
    for i, item in enumerate(inputs):
        if isinstance(item, (tuple, list)):
            if len(item) != 2:
                raise ValueError(f"input {i}: expected a text or a (text, text_pair) pair, got {len(item)} parts")
            text = cap(p, item[0], i, "text", cut)
            pair = None if item[1] is None else cap(p, item[1], i, "text_pair", cut)
        else:
            text, pair = cap(p, item, i, "text", cut), None
        examples.append(TextExample(str(i), text, pair, None, 0))
    out: dict[int, dict[str, Any]] = {}
    # single texts and pairs cannot share one encode call
    for want_pair in (False, True):
        idx = [i for i, ex in enumerate(examples) if (ex.text_pair is not None) == want_pair]
        if not idx:
            continue
        feats, owners, dropped = encode_texts(p.tokenizer, [examples[i] for i in idx],
                                              p.settings.seq_length(p.spec), p.long_inputs)
        outputs = p.run_features(feats, batch_size)
        if owners is not None:  # chunked: the mean of each input's windows' logits
            outputs = mean_by_owner(outputs, owners, len(idx))
        for j, (i, logits) in enumerate(zip(idx, outputs)):
            out[i] = note_dropped(label_result(p, logits), dropped.get(j))
    return [note_truncated(out[i], i in cut) for i in range(len(examples))]


def label_result(p: PredictorParts, logits: np.ndarray) -> dict[str, Any]:
    """A classification or regression result from one input's logits: its label, score and every label's score."""
    if HEADS[p.head].regression:
        return {"score": float(logits.reshape(-1)[0])}
    probs = softmax(logits.astype(np.float64))
    k = int(np.argmax(probs))
    names = p.labels or [str(i) for i in range(len(probs))]
    return {"label": names[k], "score": float(probs[k]),
            "scores": {name: float(p) for name, p in zip(names, probs)}}


def predict_words(p: PredictorParts, inputs: list[Any], batch_size: int) -> list[dict[str, Any]]:
    """Texts (split as CoNLL splits them) or word lists -> each word's tag and the entities, with character
    offsets for texts."""
    words_spans, cut = [], set()
    for i, x in enumerate(inputs):
        if isinstance(x, str):
            words_spans.append(split_words(cap(p, x, i, "text", cut)))
        elif isinstance(x, (list, tuple)):
            words, total = [], 0
            for w in x:
                total += len(cap(p, w, i, "each word", set()))
                if total > p.max_chars:
                    cut.add(i)
                    break
                words.append((w, None, None))
            words_spans.append(words)
        else:
            raise ValueError(f"input {i}: expected a text or a list of words, got {type(x).__name__}")
    sentences = [[w for w, _, _ in ws] for ws in words_spans]
    feats, windows, dropped = encode_sentences(p.tokenizer, sentences, p.settings.seq_length(p.spec),
                                               p.long_inputs)
    tags = decode_outputs(p.spec, [], feats, p.run_features(feats, batch_size), p.labels, p.settings)
    if windows is not None:  # chunked: each word tagged in the window where it is most central
        tags = windows.tags(tags)
    results = []
    for i, (item, ws, word_tags) in enumerate(zip(inputs, words_spans, tags)):
        found = []
        for kind, first, last in iob2_spans(word_tags):
            entity: dict[str, Any] = {"entity": kind, "words": [w for w, _, _ in ws[first:last + 1]],
                                      "first_word": first, "last_word": last}
            if isinstance(item, str):
                entity.update(text=item[ws[first][1]:ws[last][2]], start=ws[first][1], end=ws[last][2])
            found.append(entity)
        result = {"words": [w for w, _, _ in ws], "tags": word_tags, "entities": found}
        results.append(note_truncated(note_dropped(result, dropped.get(i)), i in cut))
    return results


def predict_questions(p: PredictorParts, inputs: list[Any], batch_size: int) -> list[dict[str, Any]]:
    """(question, context) pairs -> the answer span, its score and offsets (SQuAD v2: or no answer)."""
    examples, cut = [], set()
    for i, item in enumerate(inputs):
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise ValueError(f"input {i}: question answering takes a (question, context) pair")
        examples.append(SquadExample(str(i), cap(p, item[0], i, "question", cut),
                                     cap(p, item[1], i, "context", cut), ()))
    feats = encode_squad(p.tokenizer, examples, p.settings.seq_length(p.spec), p.settings.doc_stride,
                         p.settings.max_query_length)
    check_encoded(p.head, p.tokenizer, examples, feats, p.settings.seq_length(p.spec), p.long_inputs)
    preds = decode_outputs(p.spec, examples, feats, p.run_features(feats, batch_size), None, p.settings)
    threshold = p.task.get("null_threshold", 0.0) if p.spec.name == "squad2" else None
    results = []
    for i, ex in enumerate(examples):
        p = preds[ex.qid]
        r: dict[str, Any] = {"answer": p.answer(threshold)}
        if p.best is not None:
            r.update(score=p.best.score, start=p.best.start_char, end=p.best.end_char)
        if threshold is not None:
            r["null_diff"] = p.null_diff
        results.append(note_truncated(r, i in cut))
    return results


def predict_choices(p: PredictorParts, inputs: list[Any], batch_size: int) -> list[dict[str, Any]]:
    """(context, [endings]) or (context, start, [endings]) -> the chosen ending and every ending's score."""
    examples, cut = [], set()
    for i, item in enumerate(inputs):
        if not isinstance(item, (tuple, list)) or len(item) not in (2, 3):
            raise ValueError(f"input {i}: multiple choice takes (context, [endings]) or "
                             "(context, start, [endings])")
        context, start, endings = (item[0], "", item[1]) if len(item) == 2 else item
        if not isinstance(endings, (list, tuple)) or not endings:
            raise ValueError(f"input {i}: endings must be a non-empty list of strings")
        examples.append(SwagExample(str(i), cap(p, context, i, "context", cut), cap(p, start, i, "start", cut),
                                    tuple(cap(p, e, i, "each ending", cut) for e in endings), None, 0))
    results: list[dict[str, Any]] = [{} for _ in examples]
    # a batch needs one number of choices: run each count separately
    for count in sorted({len(ex.endings) for ex in examples}):
        idx = [i for i, ex in enumerate(examples) if len(ex.endings) == count]
        feats = encode_multiple_choice(p.tokenizer, [examples[i] for i in idx],
                                       p.settings.seq_length(p.spec))
        check_encoded(p.head, p.tokenizer, [examples[i] for i in idx], feats,
                      p.settings.seq_length(p.spec), p.long_inputs)
        for i, logits in zip(idx, p.run_features(feats, batch_size)):
            probs = softmax(logits.astype(np.float64))
            results[i] = note_truncated({"label": int(np.argmax(probs)), "score": float(probs.max()),
                                         "scores": [float(q) for q in probs]}, i in cut)
    return results


def note_dropped(result: dict[str, Any], tokens: int | None) -> dict[str, Any]:
    """A result whose input was cut at max_seq_length says how many tokens the model did not read."""
    if tokens:
        result["dropped_tokens"] = tokens
    return result


def note_truncated(result: dict[str, Any], truncated: bool) -> dict[str, Any]:
    if truncated:
        result["truncated"] = True
    return result


def iob2_spans(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """(type, first word, last word) of each IOB2 entity; a stray I- starts one, as conlleval counts it."""
    spans: list[tuple[str, int, int]] = []
    kind, first = None, 0
    for i, tag in enumerate(list(tags) + ["O"]):
        prefix, _, name = tag.partition("-")
        continues = prefix == "I" and name == kind
        if kind is not None and not continues:
            spans.append((kind, first, i - 1))
            kind = None
        if prefix in ("B", "I") and not continues:
            kind, first = name, i
    return spans


#: A head's `inputs` kind -> the function that predicts a list of such inputs.
PREDICT_BY_INPUTS = {"text": predict_texts, "words": predict_words, "question": predict_questions,
                     "choices": predict_choices}

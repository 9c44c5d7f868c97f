"""Examples -> model inputs (features), for every head kind, and the batches inference reads them in.

Features are plain dicts of Python lists (one per model input row); padding and length buckets are the
data layer's (`bertforge.data.batches`).
"""
from __future__ import annotations

from typing import Iterator, Mapping, Sequence

import torch

from bertforge.data.batches import Feature, collate, feature_length, length_bucketed_batches
from bertforge.tasks.readers import NerSentence, SquadExample, SwagExample, TextExample

MODEL_KEYS = ("input_ids", "token_type_ids", "attention_mask")
LABEL_KEYS = ("labels", "start_positions", "end_positions")


# ---- sentence / sentence-pair classification and regression ---------------------------------------------------
def encode_classification(tokenizer, examples: Sequence[TextExample], max_length: int = 128,
                          label2id: Mapping[str, int] | None = None, regression: bool = False) -> list[Feature]:
    """One row per example; `labels` is the label id (or float for regression), absent when unlabeled."""
    texts = [ex.text for ex in examples]
    pairs = [ex.text_pair for ex in examples]
    has_pairs = any(p is not None for p in pairs)
    if has_pairs and any(p is None for p in pairs):
        raise ValueError("mixed single sentences and pairs in one set")
    enc = tokenizer(texts, pairs if has_pairs else None, max_length=max_length, truncation=True)
    out = []
    for i, ex in enumerate(examples):
        f: Feature = {"input_ids": enc["input_ids"][i], "token_type_ids": enc["token_type_ids"][i]}
        if ex.label is not None:
            if regression:
                f["labels"] = float(ex.label)
            else:
                if label2id is None or str(ex.label) not in label2id:
                    raise ValueError(f"label {ex.label!r} of example {ex.guid} is not one of {list(label2id or [])}")
                f["labels"] = label2id[str(ex.label)]
        out.append(f)
    return out


# ---- SQuAD: question + overlapping context windows ---------------------------------------------------------------
def truncate_question(tokenizer, question: str, max_query_length: int) -> str:
    """Cut the question text after its `max_query_length`-th token (the paper's 64), at a token boundary."""
    enc = tokenizer(question, add_special_tokens=False, return_offsets_mapping=True)
    offsets = enc["offset_mapping"]
    if len(offsets) <= max_query_length:
        return question
    return question[: offsets[max_query_length - 1][1]]


def encode_squad(tokenizer, examples: Sequence[SquadExample], max_length: int = 384, doc_stride: int = 128,
                 max_query_length: int = 64, training: bool = False) -> list[Feature]:
    """Windows of [CLS] question [SEP] context-part [SEP]; consecutive windows start `doc_stride` tokens apart.

    `doc_stride` is the step between window starts, as in the original recipe (not the overlap). Each
    feature keeps `example_index` and `offsets` (character spans into the context, None for non-context
    tokens) so predictions map back to the original text exactly. With `training=True` the features get
    `start_positions`/`end_positions` of the first gold answer, or 0 ([CLS]) when the answer is not
    inside the window or the question is unanswerable (v2).
    """
    out: list[Feature] = []
    for index, ex in enumerate(examples):
        question = truncate_question(tokenizer, ex.question, max_query_length)
        q_len = len(tokenizer(question, add_special_tokens=False)["input_ids"])
        window = max_length - q_len - _pair_specials(tokenizer)
        if window < 1:
            raise ValueError(f"max_length {max_length} leaves no room for context after a {q_len}-token question")
        overlap = max(0, window - doc_stride)
        enc = tokenizer(question, ex.context, max_length=max_length, truncation="only_second",
                        return_overflowing_tokens=True, stride=overlap, return_offsets_mapping=True)
        for row in range(len(enc["input_ids"])):
            seq_ids = enc["sequence_ids"][row]
            offsets = [tuple(o) if s == 1 else None for o, s in zip(enc["offset_mapping"][row], seq_ids)]
            f: Feature = {"input_ids": enc["input_ids"][row], "token_type_ids": enc["token_type_ids"][row],
                          "example_index": index, "offsets": offsets}
            if training:
                f["start_positions"], f["end_positions"] = _answer_tokens(ex, offsets)
            out.append(f)
    return out


def _answer_tokens(ex: SquadExample, offsets: list[tuple[int, int] | None]) -> tuple[int, int]:
    if ex.is_impossible or not ex.answers:
        return 0, 0
    ans = ex.answers[0]
    start_char, end_char = ans.answer_start, ans.answer_start + len(ans.text)
    ctx = [i for i, o in enumerate(offsets) if o is not None]
    if not ctx or offsets[ctx[0]][0] > start_char or offsets[ctx[-1]][1] < end_char:
        return 0, 0  # the answer is not (wholly) in this window
    start = next(i for i in ctx if offsets[i][1] > start_char)
    end = next(i for i in reversed(ctx) if offsets[i][0] < end_char)
    return start, end


# ---- NER: label the first sub-token of each word ---------------------------------------------------------------
def encode_ner(tokenizer, sentences: Sequence[NerSentence] | Sequence[Sequence[str]], max_length: int = 128,
               label2id: Mapping[str, int] | None = None) -> list[Feature]:
    """Words in, one row per sentence; `labels` has the tag id on each word's first sub-token, -100 elsewhere.

    `word_ids` and `num_words` are kept so predictions go back to words (`align_predictions_to_words`);
    words cut off by `max_length` get no token and are predicted "O".
    """
    words = [list(s.words) if isinstance(s, NerSentence) else list(s) for s in sentences]
    enc = tokenizer(words, is_split_into_words=True, max_length=max_length, truncation=True, return_word_ids=True)
    out = []
    for i, sent in enumerate(sentences):
        word_ids = list(enc["word_ids"][i])
        f: Feature = {"input_ids": enc["input_ids"][i], "token_type_ids": enc["token_type_ids"][i],
                      "word_ids": word_ids, "num_words": len(words[i])}
        if isinstance(sent, NerSentence) and label2id is not None:
            labels, previous = [], None
            for w in word_ids:
                labels.append(label2id[sent.tags[w]] if w is not None and w != previous else -100)
                previous = w
            f["labels"] = labels
        out.append(f)
    return out


# ---- multiple choice (SWAG) -----------------------------------------------------------------------------------
def encode_multiple_choice(tokenizer, examples: Sequence[SwagExample], max_length: int = 128) -> list[Feature]:
    """One feature per example holding C rows: (context, start + ending_i) for each choice."""
    out = []
    for ex in examples:
        seconds = [f"{ex.start} {e}".strip() for e in ex.endings]
        enc = tokenizer([ex.context] * len(seconds), seconds, max_length=max_length, truncation=True)
        f: Feature = {"input_ids": enc["input_ids"], "token_type_ids": enc["token_type_ids"]}
        if ex.label is not None:
            f["labels"] = int(ex.label)
        out.append(f)
    return out


# ---- batching ---------------------------------------------------------------------------------------------------
def feature_rows(f: Feature) -> int:
    """Model rows a feature fills: 1, or the number of choices of a multiple-choice feature."""
    ids = f["input_ids"]
    return len(ids) if ids and isinstance(ids[0], list) else 1


def token_budget_batches(lengths: Sequence[int], max_rows: int, max_tokens: int | None = None,
                         rows: Sequence[int] | None = None) -> list[list[int]]:
    """Index batches for inference: longest first, each capped at `max_rows` features and at `max_tokens`
    padded tokens (model rows x the batch's longest row), so short inputs share big batches and one long
    input cannot blow up memory. A feature larger than the budget on its own gets a batch to itself.

    Longest first puts the largest batch at the start: a budget too big for the device fails at once,
    not after most of the work.
    """
    if max_rows < 1:
        raise ValueError(f"batch size must be at least 1, got {max_rows}")
    if max_tokens is not None and max_tokens < 1:
        raise ValueError(f"max_batch_tokens must be at least 1, got {max_tokens}")
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    current_rows = longest = 0
    for i in order:
        width = rows[i] if rows is not None else 1
        if current and (len(current) >= max_rows
                        or (max_tokens is not None and (current_rows + width) * longest > max_tokens)):
            batches.append(current)
            current, current_rows = [], 0
        if not current:
            longest = lengths[i]
        current.append(i)
        current_rows += width
    if current:
        batches.append(current)
    return batches


def iterate_batches(features: Sequence[Feature], batch_size: int, shuffle: bool = False, seed: int = 0,
                    pad_id: int = 0, max_tokens: int | None = None) -> Iterator[tuple[list[int], dict[str, torch.Tensor]]]:
    """(feature indices, padded tensors) for each length-bucketed batch; with `max_tokens` (inference only)
    the batches follow `token_budget_batches` instead."""
    lengths = [feature_length(f) for f in features]
    if max_tokens is not None:
        if shuffle:
            raise ValueError("a token budget is for inference batches, which are not shuffled")
        batches = token_budget_batches(lengths, batch_size, max_tokens, [feature_rows(f) for f in features])
    else:
        batches = length_bucketed_batches(lengths, batch_size, shuffle=shuffle, seed=seed)
    for idx in batches:
        yield idx, collate([features[i] for i in idx], pad_id)


def _pair_specials(tokenizer) -> int:
    """Special tokens around a pair: 3 for BERT/ALBERT ([CLS] A [SEP] B [SEP]), 4 for RoBERTa (<s> A </s></s> B </s>)."""
    count = getattr(tokenizer, "num_special_tokens_to_add", None)
    return count(pair=True) if count is not None else 3

"""Inputs longer than the model reads: cut them (saying how much was lost), refuse them, or read them in chunks.

`LongInputOptions` is the part every verb that runs a saved model composes (predict, evaluate, serve, embed):
`Predictor.load(DIR, long_inputs=LongInputOptions(long_inputs="chunk"))`, or `Predictor(..., long_inputs=...)`;
`evaluate_examples` reads it from `InferenceSettings.long_inputs`. A long model (a Longformer of 4,096 positions)
is given a `max_seq_length` up to its positions and reads a whole document at once; a 512-token model reads the
same document in chunks (`chunk`), so that the two can be compared on the same inputs:

- classification and regression: the first text is cut into windows of `max_seq_length` tokens (its pair, if
  any, whole in every window) starting `chunk_stride` tokens apart; the model scores each window and the
  input's logits are their mean.
- question answering always reads the context in windows (the SQuAD recipe; `chunk_stride` sets their stride)
  and answers with the best span of any window, mapped back to characters of the whole context.
- token classification: a sentence is cut into word-aligned windows that fit `max_seq_length`, starting about
  `chunk_stride` tokens apart (`word_windows`); each word takes its tag from the window in which it is most
  central (farthest, in words, from the window's nearer edge; on a tie the earlier window), `WordWindows.tags`.
- multiple choice is cut (or refused); it has no chunked form.
- sentence embeddings (`serving.embeddings.SentenceEncoder`): each window of a text is pooled as the model pools,
  and the text's vector is the mean of its windows' vectors weighted by their tokens, then normalised if the
  model normalises.

A sentence or text that fits is encoded exactly as without chunks.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from bertforge.settings import MAX_LENGTH, SettingError, check_settings, flag_of, setting
from bertforge.tasks.heads import HEADS

__all__ = ["LONG_INPUTS", "LongInputOptions", "WordWindows", "check_chunkable", "chunk_classification",
           "chunk_overlap", "check_encoded", "encode_sentences", "encode_texts", "full_lengths", "mean_by_owner",
           "over_length", "token_counts", "word_windows"]

logger = logging.getLogger(__name__)

LONG_INPUTS = ("truncate", "refuse", "chunk")
CHUNKED_HEADS = tuple(name for name, head in HEADS.items() if head.chunking is not None)


@dataclass
class LongInputOptions:
    """How much of each input the model reads, and what happens to an input longer than that. Taken by
    `Predictor.load(..., long_inputs=...)` and `Predictor(..., long_inputs=...)`, and by `evaluate_examples` /
    `predict_examples` as `InferenceSettings.long_inputs`."""

    max_seq_length: int | None = setting(
        None, "tokens the model reads per input, up to the model's positions: 4,096 for a Longformer",
        positive=True, maximum=MAX_LENGTH, deferred="default: the predictor's task.json")
    long_inputs: str = setting(
        "truncate", "an input longer than --max-seq-length: truncate (a one-line warning says how many tokens were "
        "dropped), refuse (stop, naming the input), or chunk: classification and regression average the logits "
        "of windows --chunk-stride tokens apart, question answering takes the best span of any window, token "
        "classification tags each word in the word-aligned window where it is most central",
        choices=LONG_INPUTS)
    chunk_stride: int | None = setting(
        None, "chunk: tokens between the starts of consecutive windows", positive=True, maximum=MAX_LENGTH,
        deferred="default: half of --max-seq-length")

    def __post_init__(self) -> None:
        check_settings(self)  # a misspelt mode must not fall back to truncating quietly

    def stride(self, max_length: int) -> int:
        return self.chunk_stride or max(1, max_length // 2)


def token_counts(tokenizer, texts: Sequence[Any], pairs: Sequence[Any] | None = None, *,
                 words: bool = False) -> list[int]:
    """Each input's length in tokens, special tokens included, as the model would read it untruncated (`words`:
    each text is a list of words)."""
    if not texts:
        return []
    enc = tokenizer(list(texts), list(pairs) if pairs is not None else None, truncation=False,
                    is_split_into_words=words)
    return [len(ids) for ids in enc["input_ids"]]


def full_lengths(tokenizer, rows: Sequence[Sequence[int]], texts: Sequence[Any], pairs: Sequence[Any] | None,
                 max_length: int, *, words: bool = False) -> list[int]:
    """Each input's untruncated length, tokenizing again only the inputs whose encoded row (`rows`, cut at
    `max_length`) is full: a shorter row was not cut."""
    counts = [len(r) for r in rows]
    full = [i for i, n in enumerate(counts) if n >= max_length]
    if full:
        again = token_counts(tokenizer, [texts[i] for i in full],
                             None if pairs is None else [pairs[i] for i in full], words=words)
        for i, n in zip(full, again):
            counts[i] = n
    return counts


def encode_texts(tokenizer, examples: Sequence[Any], max_length: int, options: "LongInputOptions | None",
                 label2id: Mapping[str, int] | None = None, regression: bool = False,
                 ) -> tuple[list[dict[str, Any]], list[int] | None, dict[int, int]]:
    """Classification / regression features of `examples` (`TextExample`s, all single texts or all pairs) as
    `options` asks: (features, the example of each feature when chunked else None, {example: tokens dropped})."""
    from bertforge.tasks.features import encode_classification
    options = options or LongInputOptions()
    features = encode_classification(tokenizer, examples, max_length, label2id, regression=regression)
    texts = [ex.text for ex in examples]
    pairs = [ex.text_pair for ex in examples] if examples and examples[0].text_pair is not None else None
    counts = full_lengths(tokenizer, [f["input_ids"] for f in features], texts, pairs, max_length)
    dropped = over_length(counts, max_length, options, names=[str(ex.guid) for ex in examples])
    if options.long_inputs != "chunk" or not dropped:
        return features, None, dropped
    windows, owners = chunk_classification(tokenizer, texts, pairs or [None] * len(texts), max_length,
                                           options.stride(max_length))
    return windows, owners, {}


def over_length(counts: Sequence[int], max_length: int, options: LongInputOptions, what: str = "input",
                names: Sequence[str] | None = None) -> dict[int, int]:
    """{index: tokens past `max_length`} of the inputs too long. `refuse` raises naming the first; `truncate`
    logs one line for all of them (`chunk` says nothing: the inputs are read whole)."""
    dropped = {i: n - max_length for i, n in enumerate(counts) if n > max_length}
    if not dropped:
        return dropped
    first = min(dropped)
    name = names[first] if names is not None else str(first)
    if options.long_inputs == "refuse":
        raise SettingError("{what} {name} has {n:,} tokens, more than {max_seq_length} {limit:,} (with "
                           "{long_inputs} refuse)", owner=LongInputOptions, what=what, name=name,
                           n=counts[first], limit=max_length)
    if options.long_inputs == "truncate":
        logger.warning(f"truncated {len(dropped)} of {len(counts)} {what}s to {max_length:,} tokens: "
                       f"{sum(dropped.values()):,} tokens dropped ({what} {name} lost {dropped[first]:,} of "
                       f"{counts[first]:,}); {flag_of(LongInputOptions, 'long_inputs')} chunk reads them whole")
    return dropped


def check_encoded(head: str, tokenizer, examples: Sequence[Any], features: Sequence[dict[str, Any]],
                  max_length: int, options: LongInputOptions) -> dict[int, int]:
    """The inputs of a head encoded without `encode_texts` / `encode_sentences` that `max_length` cut (warned or
    refused as `options` says): {example: tokens dropped}. Question answering reads every context whole, in
    windows; `refuse` refuses one that needs more than one."""
    if HEADS[head].chunking == "spans":
        windows = np.bincount([f["example_index"] for f in features], minlength=len(examples))
        if options.long_inputs == "refuse" and len(windows) and windows.max() > 1:
            first = int(np.argmax(windows > 1))
            raise SettingError("input {index}: its context needs {n} windows of {max_seq_length} {limit:,} (with "
                               "{long_inputs} refuse)", owner=LongInputOptions, index=first, n=int(windows[first]),
                               limit=max_length)
        return {}
    if HEADS[head].inputs == "choices":
        texts = [ex.context for ex in examples for _ in ex.endings]
        pairs = [f"{ex.start} {e}".strip() for ex in examples for e in ex.endings]
        rows = [row for f in features for row in f["input_ids"]]
        names = [f"{c} of input {ex.guid}" for ex in examples for c in range(len(ex.endings))]
        return over_length(full_lengths(tokenizer, rows, texts, pairs, max_length), max_length, options,
                           what="choice row", names=names)
    return {}


def check_chunkable(head: str, options: LongInputOptions) -> None:
    """`chunk` for a head that has no chunked form is refused rather than quietly truncated."""
    if options.long_inputs == "chunk" and head not in CHUNKED_HEADS:
        raise SettingError("{long_inputs} chunk reads classification, regression, question answering and token "
                           "classification inputs; a {head} model truncates or refuses", owner=LongInputOptions,
                           head=head)


def special_tokens(tokenizer, pair: bool) -> int:
    """Tokens the template adds around a text (2 for BERT) or a pair (3 for BERT, 4 for RoBERTa)."""
    return len(tokenizer("", "" if pair else None)["input_ids"])


def chunk_overlap(content: int, stride: int) -> int:
    """The tokenizer's `stride` (tokens shared by consecutive windows) for windows `stride` tokens apart."""
    return max(0, content - stride)


def chunk_classification(tokenizer, texts: Sequence[str], pairs: Sequence[str | None], max_length: int,
                         stride: int) -> tuple[list[dict[str, Any]], list[int]]:
    """Windows of each text (its pair whole in each): (features, the input each feature belongs to). Window k of
    an input holds the text's tokens [k * stride, k * stride + room), room = what `max_length` leaves after the
    special tokens and the pair; the last window ends at the text's end."""
    features, owners = [], []
    for index, (text, pair) in enumerate(zip(texts, pairs)):
        pair_tokens = 0 if pair is None else len(tokenizer(pair, add_special_tokens=False)["input_ids"])
        room = max_length - special_tokens(tokenizer, pair is not None) - pair_tokens
        if room < 1:
            raise SettingError("input {index}: its second text ({n:,} tokens) leaves no room for the first in "
                               "{max_seq_length} {limit:,}", owner=LongInputOptions, index=index, n=pair_tokens,
                               limit=max_length)
        step = min(stride, room)
        enc = tokenizer(text, pair, max_length=max_length, truncation="only_first" if pair is not None else True,
                        return_overflowing_tokens=True, stride=chunk_overlap(room, step))
        for ids, types in zip(enc["input_ids"], enc["token_type_ids"]):
            features.append({"input_ids": ids, "token_type_ids": types})
            owners.append(index)
    return features, owners


def mean_by_owner(outputs: Sequence[np.ndarray], owners: Sequence[int], count: int) -> list[np.ndarray]:
    """The mean of the outputs of each input's windows, in input order."""
    sums: dict[int, list[np.ndarray]] = {}
    for out, owner in zip(outputs, owners):
        sums.setdefault(owner, []).append(np.asarray(out, dtype=np.float64))
    return [np.mean(sums[i], axis=0).astype(np.float32) for i in range(count)]


# ---- token classification: word-aligned windows -----------------------------------------------------------------
def word_windows(lengths: Sequence[int], room: int, stride: int) -> list[tuple[int, int]]:
    """Word spans [start, end) of the windows of a sentence whose words take `lengths` tokens: each window holds
    as many whole words as fit in `room` tokens (at least one word: a longer word is cut where the window ends);
    the next one starts at the first word at least `stride` tokens (at most `room`) after this one's start, never
    past its end, and the last one ends at the sentence's end."""
    offsets = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
    n, step = len(lengths), max(1, min(stride, room))
    spans: list[tuple[int, int]] = []
    start = 0
    while True:
        end = int(np.searchsorted(offsets, offsets[start] + room, side="right")) - 1
        end = min(n, max(end, start + 1))
        spans.append((start, end))
        if end >= n:
            return spans
        later = int(np.searchsorted(offsets, offsets[start] + step, side="left"))
        start = min(max(later, start + 1), end)


def central_windows(spans: Sequence[tuple[int, int]], count: int) -> list[int]:
    """For each of `count` words, the window (an index into `spans`) in which it is farthest, in words, from the
    nearer edge; on a tie the earlier window."""
    best = [-1] * count
    depth = [-1] * count
    for k, (start, end) in enumerate(spans):
        for w in range(start, end):
            d = min(w - start, end - 1 - w)
            if d > depth[w]:
                best[w], depth[w] = k, d
    return best


@dataclass
class WordWindows:
    """Which sentence, and which of its words [start, end), each token classification feature holds, so that
    per-feature tags go back to one tag list per sentence."""

    owners: list[int]
    spans: list[tuple[int, int]]
    num_words: list[int]

    def tags(self, feature_tags: Sequence[Sequence[str]]) -> list[list[str]]:
        """Each sentence's word tags: every word's tag from the window in which it is most central."""
        by_sentence: dict[int, list[int]] = {}
        for f, owner in enumerate(self.owners):
            by_sentence.setdefault(owner, []).append(f)
        out = []
        for i, n in enumerate(self.num_words):
            feats = by_sentence[i]
            if len(feats) == 1:
                out.append(list(feature_tags[feats[0]]))
                continue
            choice = central_windows([self.spans[f] for f in feats], n)
            out.append([feature_tags[feats[k]][w - self.spans[feats[k]][0]] for w, k in enumerate(choice)])
        return out


def encode_sentences(tokenizer, sentences: Sequence[Any], max_length: int, options: "LongInputOptions | None",
                     label2id: Mapping[str, int] | None = None,
                     ) -> tuple[list[dict[str, Any]], WordWindows | None, dict[int, int]]:
    """Token classification features of `sentences` (`NerSentence`s or lists of words) as `options` asks:
    (features, the sentence and words of each feature when chunked else None, {sentence: tokens dropped}). A
    sentence that fits is one feature, as `encode_ner` makes it; with `chunk`, a longer one is a feature per
    window (`word_windows`)."""
    from bertforge.tasks.features import encode_ner
    options = options or LongInputOptions()
    features = encode_ner(tokenizer, sentences, max_length, label2id)
    words = [list(getattr(s, "words", s)) for s in sentences]
    counts = full_lengths(tokenizer, [f["input_ids"] for f in features], words, None, max_length, words=True)
    dropped = over_length(counts, max_length, options, what="sentence")
    if options.long_inputs != "chunk" or not dropped:
        return features, None, dropped
    room = max(1, max_length - special_tokens(tokenizer, False))
    stride = options.stride(max_length)
    lengths = dict(zip(sorted(dropped), _word_lengths(tokenizer, [words[i] for i in sorted(dropped)])))
    out, owners, spans = [], [], []
    for i, sentence in enumerate(sentences):
        if i not in dropped:
            out.append(features[i])
            owners.append(i)
            spans.append((0, len(words[i])))
            continue
        windows = word_windows(lengths[i], room, stride)
        parts = [_word_slice(sentence, start, end) for start, end in windows]
        out += encode_ner(tokenizer, parts, max_length, label2id)
        owners += [i] * len(windows)
        spans += windows
    return out, WordWindows(owners, spans, [len(w) for w in words]), {}


def _word_lengths(tokenizer, sentences: Sequence[list[str]]) -> list[list[int]]:
    """Tokens of each word of each sentence (a word that tokenizes to nothing takes 0)."""
    enc = tokenizer(list(sentences), is_split_into_words=True, add_special_tokens=False, return_word_ids=True)
    out = []
    for words, word_ids in zip(sentences, enc["word_ids"]):
        counts = [0] * len(words)
        for w in word_ids:
            if w is not None:
                counts[w] += 1
        out.append(counts)
    return out


def _word_slice(sentence: Any, start: int, end: int) -> Any:
    """Words [start, end) of a sentence (a `NerSentence` keeps its tags for those words)."""
    if hasattr(sentence, "words"):
        import dataclasses
        return dataclasses.replace(sentence, words=tuple(sentence.words[start:end]),
                                   tags=tuple(sentence.tags[start:end]))
    return list(sentence[start:end])


def describe(options: LongInputOptions | None) -> Mapping[str, Any]:
    """What a report records of how long inputs were read."""
    if options is None:
        return {}
    return {"long_inputs": options.long_inputs, "chunk_stride": options.chunk_stride}

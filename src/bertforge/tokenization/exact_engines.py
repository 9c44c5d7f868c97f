"""The engines behind `BertTokenizer`: BERT's exact WordPiece at Rust speed.

Every text goes through the Rust engine of `tokenizers` in one batch call; a text holding a character on which
that engine and the original Python tokenizer can disagree (:mod:`.charset`) is split into words by
:class:`~.pretokenize.ReferencePreTokenizer` instead and encoded again from those words by a second Rust engine
(WordPiece, truncation and padding only), its offsets mapped back onto the original string (`_MappedRow`).
Two copies of each engine: the "plain" ones are never reconfigured (bulk ids, `backend`), the "call" ones get
truncation and padding per call under `lock`.
"""
from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from tokenizers import AddedToken, Encoding, Tokenizer

from .arguments import check_text, check_texts
from .backend import build_fast, build_words, configure_call
from .charset import SuspectScanner, suspect_scanner
from .pretokenize import ReferencePreTokenizer, Word


class _MappedRow:
    """An encoding of words from the Python pre-tokenizer, with offsets and word ids mapped back."""

    __slots__ = (
        "ids",
        "type_ids",
        "attention_mask",
        "special_tokens_mask",
        "offsets",
        "word_ids",
        "sequence_ids",
        "tokens",
    )

    def __init__(self, enc: Encoding, words: tuple[list[Word], ...], origins: tuple[list[int], ...] | None) -> None:
        self.ids = enc.ids
        self.type_ids = enc.type_ids
        self.attention_mask = enc.attention_mask
        self.special_tokens_mask = enc.special_tokens_mask
        self.tokens = enc.tokens
        self.sequence_ids = enc.sequence_ids
        offsets: list[tuple[int, int]] = []
        word_ids: list[int | None] = []
        for (begin, end), wid, sid in zip(enc.offsets, enc.word_ids, self.sequence_ids):
            if wid is None or sid is None:
                offsets.append((0, 0))
                word_ids.append(None)
                continue
            offsets.append(words[sid][wid].span(begin, end))
            word_ids.append(origins[sid][wid] if origins is not None else wid)
        self.offsets = offsets
        self.word_ids = word_ids


class ExactWordPiece:
    """The Rust engines and the Python fallback of one vocabulary and casing; a tokenizer.json's own `pipeline`
    (a JSON string), when given, runs all in Rust instead."""

    def __init__(self, vocab: dict[str, int], lowercase: bool, strip_accents: bool | None,
                 tokenize_chinese_chars: bool, specials: dict[str, str], all_special_tokens: list[str],
                 pipeline: str | None = None) -> None:
        self.vocab, self.specials = vocab, specials
        fast_args = dict(
            lowercase=lowercase,
            strip_accents=strip_accents,
            tokenize_chinese_chars=tokenize_chinese_chars,
            unk_token=specials["unk_token"],
            cls_token=specials["cls_token"],
            sep_token=specials["sep_token"],
            special_tokens=all_special_tokens,
        )
        words_args = dict(unk_token=specials["unk_token"], cls_token=specials["cls_token"],
                          sep_token=specials["sep_token"])
        self.plain_fast = build_fast(vocab, **fast_args)
        self._plain_words = build_words(vocab, **words_args)
        self._call_fast = build_fast(vocab, **fast_args)
        self._call_words = build_words(vocab, **words_args)
        self.lock = threading.Lock()
        self._pretokenizer = ReferencePreTokenizer(
            lowercase=lowercase,
            strip_accents=strip_accents,
            tokenize_chinese_chars=tokenize_chinese_chars,
            special_tokens=all_special_tokens,
        )
        self._scanner = suspect_scanner()
        if pipeline is not None:  # a tokenizer.json's own pipeline, all in Rust (BertTokenizer.adopt_pipeline)
            self.plain_fast, self._call_fast = _own_engine(pipeline, all_special_tokens), _own_engine(
                pipeline, all_special_tokens)
            self._scanner = SuspectScanner([])

    def tokenize(self, text: str) -> list[str]:
        """WordPiece tokens of one text, without special tokens."""
        check_text(text, "tokenize")
        if not self._scanner.contains(text):
            return self.plain_fast.encode(text, add_special_tokens=False).tokens
        words = self._pretokenizer.words(text)
        return self._plain_words.encode([w.text for w in words], is_pretokenized=True, add_special_tokens=False).tokens

    def encode_batch_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Ids of many texts, no special tokens, no truncation: the bulk path for pre-training data."""
        if isinstance(texts, str) or not isinstance(texts, Sequence):
            raise TypeError(f"encode_batch_ids expects a list of str, got {type(texts).__name__}")
        check_texts(texts, "encode_batch_ids")
        original = texts
        slow = self._find_suspect(texts, None, False)
        if slow:
            texts = ["" if i in slow else t for i, t in enumerate(texts)]
        out = [e.ids for e in self.plain_fast.encode_batch_fast(texts, add_special_tokens=False)]
        if slow:
            slow_idx = sorted(slow)
            words = [[w.text for w in self._pretokenizer.words(original[i])] for i in slow_idx]
            for i, e in zip(
                slow_idx, self._plain_words.encode_batch(words, is_pretokenized=True, add_special_tokens=False)
            ):
                out[i] = e.ids
        return out

    def _find_suspect(self, texts: Sequence[Any], pairs: Sequence[Any] | None, pretokenized: bool) -> set[int]:
        """Indices of the inputs that contain a character the Rust path may get wrong."""
        if pretokenized:
            found = {i for i, words in enumerate(texts) if self._scanner.contains("\n".join(words))}
            if pairs is not None:
                found.update(i for i, words in enumerate(pairs) if self._scanner.contains("\n".join(words)))
            return found
        found = self._scanner.indices(texts)
        if pairs is not None:
            found |= self._scanner.indices(pairs)
        return found

    def _python_words(self, item: Any, pretokenized: bool) -> tuple[list[Word], list[int] | None]:
        if not pretokenized:
            return self._pretokenizer.words(item), None
        words: list[Word] = []
        origins: list[int] = []
        for j, user_word in enumerate(item):
            sub = self._pretokenizer.words(user_word)
            words.extend(sub)
            origins.extend([j] * len(sub))
        return words, origins

    def encode_rows(self, texts: list[Any], pairs: list[Any] | None, pretokenized: bool, add_special_tokens: bool,
                     truncate: tuple[int, str, int] | None, pad_length: int | str | None,
                     overflow: bool) -> tuple[list[Any], list[int] | None]:
        """Encode every input, pad, and flatten overflowing windows into rows.

        All inputs go through one Rust call (suspect ones replaced by an empty
        placeholder); the suspect ones are encoded again from Python-split words
        and put in their place, so the common case costs no Python per text.
        """
        slow = self._find_suspect(texts, pairs, pretokenized)
        inputs = texts if pairs is None else list(zip(texts, pairs))
        slow_idx = sorted(slow)
        slow_words: dict[int, tuple] = {}
        if slow:
            placeholder: Any = [] if pretokenized else ""
            if pairs is not None:
                placeholder = (placeholder, placeholder)
            inputs = list(inputs)
            for i in slow_idx:
                inputs[i] = placeholder
                a = self._python_words(texts[i], pretokenized)
                slow_words[i] = (a, self._python_words(pairs[i], pretokenized) if pairs is not None else None)
        try:
            with self.lock:
                self._configure(truncate, pad_length)
                encs: list[Any] = self._call_fast.encode_batch(
                    inputs, is_pretokenized=pretokenized, add_special_tokens=add_special_tokens
                )
                if slow:
                    words_inputs = [
                        [w.text for w in a[0]] if b is None else ([w.text for w in a[0]], [w.text for w in b[0]])
                        for a, b in (slow_words[i] for i in slow_idx)
                    ]
                    slow_encs = self._call_words.encode_batch(
                        words_inputs, is_pretokenized=True, add_special_tokens=add_special_tokens
                    )
                    if pad_length == "longest":
                        self._pad_to_common_length(encs, slow_idx, slow_encs)
                    for i, e in zip(slow_idx, slow_encs):
                        encs[i] = e
        except Exception as exc:  # the Rust engine raises a bare Exception
            if "Truncation error" in str(exc) and truncate is not None:
                raise ValueError(
                    f"cannot truncate to max_length={truncate[0]} with truncation={truncate[1]!r}: the sequence "
                    "that may be cut is too short for at least one input; use a larger max_length or 'longest_first'"
                ) from exc
            raise
        if not overflow and not slow:
            return encs, None
        rows: list[Any] = []
        sample_of_row: list[int] = []
        for i, e in enumerate(encs):
            pieces = [e, *e.overflowing] if overflow else [e]
            if i in slow_words:
                (words_a, origins_a), b = slow_words[i]
                words = (words_a,) if b is None else (words_a, b[0])
                origins = None
                if pretokenized:
                    origins = (origins_a,) if b is None else (origins_a, b[1])
                pieces = [_MappedRow(p, words, origins) for p in pieces]
            rows.extend(pieces)
            sample_of_row.extend([i] * len(pieces))
        return rows, sample_of_row

    def _configure(self, truncate: tuple[int, str, int] | None, pad_length: int | str | None) -> None:
        """Set truncation and padding of both call engines (caller holds the lock)."""
        pad_token = self.specials["pad_token"]
        for engine in (self._call_fast, self._call_words):
            configure_call(engine, truncate, pad_length, self.vocab[pad_token], pad_token)

    def _pad_to_common_length(self, encs: list[Encoding], slow_idx: list[int], slow_encs: list[Encoding]) -> None:
        """Both engines padded to their own longest row; pad the shorter group up to the other."""
        slow_set = set(slow_idx)
        fast_len = next((len(e.ids) for i, e in enumerate(encs) if i not in slow_set), 0)
        slow_len = len(slow_encs[0].ids) if slow_encs else 0
        if slow_len == fast_len:
            return
        shorter = slow_encs if slow_len < fast_len else [e for i, e in enumerate(encs) if i not in slow_set]
        for e in shorter:
            e.pad(
                max(fast_len, slow_len),
                direction="right",
                pad_id=self.vocab[self.specials["pad_token"]],
                pad_type_id=0,
                pad_token=self.specials["pad_token"],
            )


def _own_engine(pipeline: str, special_tokens: list[str]) -> Tokenizer:
    engine = Tokenizer.from_str(pipeline)
    engine.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special_tokens])
    return engine

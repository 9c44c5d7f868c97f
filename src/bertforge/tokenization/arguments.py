"""Checking and normalising the arguments of :meth:`BertTokenizer.__call__` and friends.

Kept apart from the tokenizer so the hot path reads as a sequence of steps and
every error message (which says what was given and what is expected) lives in
one place.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

__all__ = [
    "as_int_list",
    "check_text",
    "check_texts",
    "prepare_inputs",
    "truncation_settings",
    "padding_settings",
    "tensor_ready",
]

TRUNCATION_STRATEGIES = ("longest_first", "only_first", "only_second")


def as_int_list(ids: Any, where: str) -> list[int]:
    if hasattr(ids, "tolist"):
        ids = ids.tolist()
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence):
        raise TypeError(f"{where} expects an int or a sequence of ints, got {type(ids).__name__}")
    out = []
    for i, v in enumerate(ids):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise TypeError(f"{where} expects ints; item {i} is {type(v).__name__}")
        out.append(int(v))
    return out


def check_text(text: Any, where: str) -> None:
    if not isinstance(text, str):
        raise TypeError(f"{where} expects a str, got {type(text).__name__}")


def check_texts(texts: Sequence[Any], where: str) -> None:
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"{where} expects a list of str; item {i} is {type(t).__name__}")


def check_words(words: Any, what: str) -> list[str]:
    if isinstance(words, str) or not isinstance(words, Sequence):
        raise TypeError(
            f"with is_split_into_words=True, {what} must be a list of str words, got {type(words).__name__}"
        )
    for j, w in enumerate(words):
        if not isinstance(w, str):
            raise TypeError(
                f"with is_split_into_words=True, {what} must hold str words; word {j} is {type(w).__name__}"
            )
    return list(words)


def prepare_inputs(text: Any, text_pair: Any, pretokenized: bool) -> tuple[bool, list[Any], list[Any] | None]:
    """Validate the inputs of ``__call__``; returns (is_batch, texts, pairs or None)."""
    if not isinstance(pretokenized, bool):
        raise TypeError(f"is_split_into_words must be True or False, got {pretokenized!r}")
    if not pretokenized:
        if isinstance(text, str):
            if text_pair is not None and not isinstance(text_pair, str):
                raise TypeError(f"text is a str, so text_pair must be a str or None, got {type(text_pair).__name__}")
            return False, [text], None if text_pair is None else [text_pair]
        if not isinstance(text, Sequence) or isinstance(text, bytes):
            raise TypeError(f"text must be a str or a list of str, got {type(text).__name__}")
        check_texts(text, "text")
        texts = list(text)
        if text_pair is None:
            return True, texts, None
        if isinstance(text_pair, str) or not isinstance(text_pair, Sequence):
            raise TypeError(
                f"text is a list, so text_pair must be a list of str of the same length, got {type(text_pair).__name__}"
            )
        check_texts(text_pair, "text_pair")
        if len(text_pair) != len(texts):
            raise ValueError(f"text has {len(texts)} items but text_pair has {len(text_pair)}")
        return True, texts, list(text_pair)

    if isinstance(text, str) or not isinstance(text, Sequence):
        raise TypeError(
            "with is_split_into_words=True, text must be a list of words or a list of such lists, "
            f"got {type(text).__name__}"
        )
    batched = len(text) > 0 and not isinstance(text[0], str)
    if not batched:
        texts = [check_words(text, "text")]
        pairs = None if text_pair is None else [check_words(text_pair, "text_pair")]
        return False, texts, pairs
    texts = [check_words(t, f"text[{i}]") for i, t in enumerate(text)]
    if text_pair is None:
        return True, texts, None
    if isinstance(text_pair, str) or not isinstance(text_pair, Sequence) or len(text_pair) != len(texts):
        raise ValueError("text is a batch of word lists, so text_pair must be a list of word lists of the same length")
    return True, texts, [check_words(t, f"text_pair[{i}]") for i, t in enumerate(text_pair)]


def truncation_settings(
    truncation: Any,
    max_length: int | None,
    stride: int,
    model_max_length: int,
    has_pair: bool,
    add_special_tokens: bool,
) -> tuple[int, str, int] | None:
    """(max_length, strategy, stride) for the Rust engine, or None for no truncation."""
    if max_length is not None and (isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1):
        raise ValueError(f"max_length must be a positive int or None, got {max_length!r}")
    if isinstance(stride, bool) or not isinstance(stride, int) or stride < 0:
        raise ValueError(f"stride must be a non-negative int, got {stride!r}")
    if truncation is False or truncation is None or truncation == "do_not_truncate":
        return None
    if truncation is True:
        strategy = "longest_first"
    elif truncation in TRUNCATION_STRATEGIES:
        strategy = truncation
    else:
        raise ValueError(f"truncation must be False, True or one of {TRUNCATION_STRATEGIES}, got {truncation!r}")
    if strategy == "only_second" and not has_pair:
        raise ValueError("truncation='only_second' needs text_pair (it truncates the second sequence)")
    length = model_max_length if max_length is None else max_length
    n_special = (3 if has_pair else 2) if add_special_tokens else 0
    if length - n_special < 1:
        raise ValueError(f"max_length={length} leaves no room for text next to {n_special} special tokens")
    if stride >= length - n_special:
        raise ValueError(
            f"stride ({stride}) must be smaller than max_length minus the special tokens ({length - n_special})"
        )
    return length, strategy, stride


def padding_settings(padding: Any, max_length: int | None, model_max_length: int) -> int | str | None:
    """None (no padding), "longest", or a fixed length."""
    if padding is False or padding is None or padding == "do_not_pad":
        return None
    if padding is True or padding == "longest":
        return "longest"
    if padding == "max_length":
        return model_max_length if max_length is None else max_length
    raise ValueError(f"padding must be False, True, 'longest' or 'max_length', got {padding!r}")


def tensor_ready(data: dict[str, Any]) -> dict[str, Any]:
    """Tensors cannot hold None: word and sequence ids of special/padding tokens become -1."""
    for key in ("word_ids", "sequence_ids"):
        if key in data:
            value = data[key]
            if value and isinstance(value[0], list):
                data[key] = [[-1 if v is None else v for v in row] for row in value]
            else:
                data[key] = [-1 if v is None else v for v in value]
    return data

"""Counting and tokenizing a request's texts as the served model would, before they join a batch: the
handlers refuse an over-long input (or cut it, or chunk it) on these counts, and `/tokenize` answers from them.
A copy of the model's tokenizer of its own: a long request being counted must not hold up the model's next
batch (the tokenizer holds a lock while it encodes)."""
from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from bertforge.tasks.heads import HEADS


class RequestTokens:
    """Token counts, pair room, refusals and `/tokenize` rows of requests, with the served model's tokenizer."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer

    def token_counts(self, texts: Sequence[str], pairs: Sequence[str | None] | None = None,
                     limit: int | None = None) -> list[int]:
        """Tokens per text (or per text and its pair), special tokens included; counted up to `limit` (a longer
        input counts as `limit`), which spares building the ids of a long text only to measure it."""
        tok = self.tokenizer
        cut = {"truncation": True, "max_length": limit} if limit else {}
        if pairs is None or all(p is None for p in pairs):
            return [len(ids) for ids in tok(list(texts), **cut)["input_ids"]]
        return [len(tok(t, p, **cut)["input_ids"]) if p is not None else len(tok(t, **cut)["input_ids"])
                for t, p in zip(texts, pairs)]

    def tokenize(self, texts: Sequence[str], max_length: int | None = None) -> list[list[dict[str, Any]]]:
        """Each text's tokens with their ids and character offsets, cut to `max_length` tokens if given."""
        tok = self.tokenizer
        cut = {"truncation": True, "max_length": max_length} if max_length else {}
        enc = tok(list(texts), return_offsets_mapping=True, **cut) if self._offsets else None
        out = []
        for i, text in enumerate(texts):
            ids = enc["input_ids"][i] if enc else tok(text, **cut)["input_ids"]
            tokens = tok.convert_ids_to_tokens(ids)
            row = [{"id": int(t), "text": tok} for t, tok in zip(ids, tokens)]
            if enc:
                for entry, (start, stop) in zip(row, enc["offset_mapping"][i]):
                    entry.update(start=int(start), stop=int(stop))
            out.append(row)
        return out

    @functools.cached_property
    def _offsets(self) -> bool:
        try:
            self.tokenizer(["a"], return_offsets_mapping=True)
            return True
        except (TypeError, ValueError, NotImplementedError):
            return False

    def pair_tokens(self, pairs: Sequence[str | None]) -> list[int]:
        """Tokens each second text takes in every window of a chunked pair, special tokens of the pair included
        (0 without a pair): a window of `max_length` tokens must have room left for the first text."""
        from bertforge.tasks.long_inputs import special_tokens
        tok = self.tokenizer
        specials = special_tokens(tok, True)
        return [0 if p is None else specials + len(tok(p, add_special_tokens=False)["input_ids"]) for p in pairs]

    def refused_input(self, predictor, inputs: Sequence[Any]) -> tuple[int, str] | None:
        """(index, why) of the first question answering or multiple choice input `predictor` refuses with
        `refuse` (a context that needs more than one window, a choice row longer than the model reads), counted
        with the request tokenizer as the predictor counts; None when all fit."""
        from bertforge.tasks.features import encode_squad
        from bertforge.tasks.readers import SquadExample
        tok = self.tokenizer
        length = predictor.settings.seq_length(predictor.spec)
        kind = HEADS[predictor.head].inputs
        if kind == "question":
            examples = [SquadExample(str(i), q, c, ()) for i, (q, c) in enumerate(inputs)]
            features = encode_squad(tok, examples, length, predictor.settings.doc_stride,
                                    predictor.settings.max_query_length)
            windows = np.bincount([f["example_index"] for f in features], minlength=len(examples))
            over = np.flatnonzero(windows > 1)
            return (int(over[0]), f"its context needs {int(windows[over[0]])} windows of {length} tokens; this "
                                  "model reads one") if len(over) else None
        if kind == "choices":
            for i, item in enumerate(inputs):
                context, start, endings = (item[0], "", item[1]) if len(item) == 2 else item
                for c, ending in enumerate(endings):
                    n = len(tok(context, f"{start} {ending}".strip())["input_ids"])
                    if n > length:
                        return i, f"choice {c} has {n} tokens; this model takes at most {length}"
        return None

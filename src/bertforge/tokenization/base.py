"""What every tokenizer of the family answers the same way: vocabulary look-ups, ``encode``, lazy rows.

``BertTokenizer`` (WordPiece, with its Python fallback) and ``FastTokenizer`` (byte BPE, SentencePiece) differ
in how they encode and decode; around that they must behave alike, so that code written against one works
with any. A subclass sets ``_vocab`` (token -> id), ``_ids_to_tokens`` and an ``unk_token`` property.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

from .arguments import as_int_list

CONFIG_FILE = "tokenizer_config.json"
SPECIAL_TOKENS_MAP_FILE = "special_tokens_map.json"


class TokenizerBase:
    _vocab: dict[str, int]
    _ids_to_tokens: dict[int, str]
    unk_token: str
    all_special_ids: list[int]

    @property
    def vocab(self) -> dict[str, int]:
        """Token -> id (a copy)."""
        return dict(self._vocab)

    @property
    def ids_to_tokens(self) -> dict[int, str]:
        """Id -> token (a copy)."""
        return dict(self._ids_to_tokens)

    @property
    def vocab_size(self) -> int:
        return len(self._vocab)

    def __len__(self) -> int:
        return len(self._vocab)

    def convert_tokens_to_ids(self, tokens: str | Sequence[str]) -> int | list[int]:
        """Id of a token or list of tokens; unknown tokens give the unknown token's id."""
        unk = self._vocab[self.unk_token]
        if isinstance(tokens, str):
            return self._vocab.get(tokens, unk)
        out = []
        for i, token in enumerate(tokens):
            if not isinstance(token, str):
                raise TypeError(f"convert_tokens_to_ids expects str tokens; item {i} is {type(token).__name__}")
            out.append(self._vocab.get(token, unk))
        return out

    def convert_ids_to_tokens(self, ids: int | Sequence[int], skip_special_tokens: bool = False) -> str | list[str]:
        """Token of an id or list of ids; ids outside the vocabulary give the unknown token, like the original."""
        if hasattr(ids, "tolist"):  # tensors and arrays, including 0-d ones
            ids = ids.tolist()
        if isinstance(ids, numbers.Integral) and not isinstance(ids, bool):
            return self._ids_to_tokens.get(int(ids), self.unk_token)
        ids = as_int_list(ids, "convert_ids_to_tokens")
        skip = set(self.all_special_ids) if skip_special_tokens else ()
        return [self._ids_to_tokens.get(i, self.unk_token) for i in ids if i not in skip]

    def encode(self, text: str | list[str], text_pair: str | list[str] | None = None,
               add_special_tokens: bool = True, **kwargs: Any) -> list[int]:
        """Ids of one text (or pair); keyword options as in ``__call__`` (no tensors)."""
        if kwargs.get("return_tensors") is not None or kwargs.get("return_overflowing_tokens"):
            raise ValueError("encode() returns one list of ids; use __call__ for tensors or overflowing windows")
        enc = self(text, text_pair, add_special_tokens=add_special_tokens, **kwargs)
        if enc.is_batched:
            raise TypeError("encode() takes one text (or one list of words); use __call__ or encode_batch_ids "
                            "for batches")
        return enc["input_ids"]


class LazyRows:
    """Row-wise ``word_ids``/``sequence_ids`` read from the encodings only when asked for."""

    __slots__ = ("_rows", "_attr")

    def __init__(self, rows: list[Any], attr: str) -> None:
        self._rows, self._attr = rows, attr

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, index: int) -> list[int | None]:
        return getattr(self._rows[index], self._attr)

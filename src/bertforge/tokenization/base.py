"""What every tokenizer of the family answers the same way: the call API, vocabulary look-ups, ``encode``.

``BertTokenizer`` (WordPiece, with its Python fallback) and ``FastTokenizer`` (byte BPE, SentencePiece) differ
in how they encode and decode; around that they must behave alike, so that code written against one works
with any. A subclass sets ``_vocab`` (token -> id), ``_ids_to_tokens``, ``model_max_length`` and an
``unk_token`` property, turns checked inputs into rows of encodings in ``_encode_rows`` and ids into text in
``_decode``; ``__call__`` checks the arguments and builds the :class:`BatchEncoding` from those rows.
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..folder_files import SETTINGS_MAX_BYTES, folder_has, read_folder_text
from .arguments import as_int_list, padding_settings, prepare_inputs, tensor_ready, truncation_settings
from .encoding import BatchEncoding, to_tensors

CONFIG_FILE = "tokenizer_config.json"
SPECIAL_TOKENS_MAP_FILE = "special_tokens_map.json"


def read_tokenizer_config(folder: Path) -> dict[str, Any] | None:
    """The JSON object of ``folder/tokenizer_config.json`` (a regular file inside it, of bounded size), None
    without one; errors name the file."""
    if not folder_has(folder, CONFIG_FILE):
        return None
    path = folder / CONFIG_FILE
    try:
        config = json.loads(read_folder_text(folder, CONFIG_FILE, SETTINGS_MAX_BYTES))
    except json.JSONDecodeError as exc:
        raise ValueError(f"cannot read tokenizer settings from {path}: {exc}") from None
    if not isinstance(config, dict):
        raise ValueError(f"{path} must hold a JSON object, got {type(config).__name__}")
    return config


class TokenizerBase:
    """Vocabulary look-ups and the call API; a subclass encodes rows in :meth:`_encode_rows`."""

    _vocab: dict[str, int]
    _ids_to_tokens: dict[int, str]
    unk_token: str
    all_special_ids: list[int]
    model_max_length: int

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

    def decode(self, ids: int | Sequence[int], skip_special_tokens: bool = False, **options: Any) -> str:
        """Text of ids: a single id, a list, a 1-D tensor or array (each subclass decodes them its way)."""
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        if isinstance(ids, numbers.Integral) and not isinstance(ids, bool):
            ids = [int(ids)]
        return self._decode(as_int_list(ids, "decode"), skip_special_tokens, **options)

    def batch_decode(self, sequences: Sequence[Sequence[int]], skip_special_tokens: bool = False,
                     **options: Any) -> list[str]:
        """:meth:`decode` of each row (a list of lists, a 2-D tensor or array)."""
        if hasattr(sequences, "tolist"):
            sequences = sequences.tolist()
        return [self.decode(s, skip_special_tokens, **options) for s in sequences]

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

    def __call__(
        self,
        text: str | Sequence[str] | Sequence[Sequence[str]],
        text_pair: str | Sequence[str] | Sequence[Sequence[str]] | None = None,
        *,
        add_special_tokens: bool = True,
        max_length: int | None = None,
        truncation: bool | str = False,
        padding: bool | str = False,
        return_tensors: str | None = None,
        return_offsets_mapping: bool = False,
        return_word_ids: bool = False,
        return_special_tokens_mask: bool = False,
        is_split_into_words: bool = False,
        return_overflowing_tokens: bool = False,
        stride: int = 0,
    ) -> BatchEncoding:
        """Tokenize a text, a pair, or a batch of them into model inputs.

        ``text`` is a str or a list of str (``text_pair`` the same shape); with
        ``is_split_into_words=True`` it is a list of words or a list of such
        lists, word ids then index the given words and offsets are relative to
        each word. ``truncation`` True/"longest_first"/"only_first"/"only_second"
        cuts to ``max_length`` (default ``model_max_length``); with
        ``return_overflowing_tokens`` the cut-off tokens come back as extra rows
        that overlap the previous row by ``stride`` tokens, and
        ``overflow_to_sample_mapping`` says which input each row belongs to.
        ``padding`` True/"longest" pads to the longest row, "max_length" to
        ``max_length``. Offsets are character offsets into the original strings,
        (0, 0) for special and padding tokens.
        """
        batched, texts, pairs = prepare_inputs(text, text_pair, is_split_into_words)
        truncate = truncation_settings(
            truncation, max_length, stride, self.model_max_length, pairs is not None, add_special_tokens
        )
        if truncate is not None and add_special_tokens:
            self._check_room(truncate, pairs is not None)
        pad_length = padding_settings(padding, max_length, self.model_max_length)
        if return_overflowing_tokens and truncate is None:
            raise ValueError(
                "return_overflowing_tokens=True needs truncation (e.g. truncation='only_second' and max_length)"
            )
        if return_tensors not in (None, "pt", "np"):
            raise ValueError(f"return_tensors must be None, 'pt' or 'np', got {return_tensors!r}")

        rows, sample_of_row = self._encode_rows(
            texts, pairs, is_split_into_words, add_special_tokens, truncate, pad_length, return_overflowing_tokens
        )

        data: dict[str, Any] = {
            "input_ids": [r.ids for r in rows],
            "token_type_ids": [r.type_ids for r in rows],
            "attention_mask": [r.attention_mask for r in rows],
        }
        if return_special_tokens_mask:
            data["special_tokens_mask"] = [r.special_tokens_mask for r in rows]
        if return_offsets_mapping:
            data["offset_mapping"] = [r.offsets for r in rows]
            if pairs is not None:
                data["sequence_ids"] = [r.sequence_ids for r in rows]
        if return_word_ids:
            data["word_ids"] = [r.word_ids for r in rows]
        if return_overflowing_tokens:
            data["overflow_to_sample_mapping"] = sample_of_row if sample_of_row is not None else list(range(len(rows)))
        # Overflowing windows always make a batch, and so do tensors (a model wants a
        # leading batch dimension even for one text, as with Hugging Face).
        batched = batched or return_overflowing_tokens or return_tensors is not None
        if not batched:
            data = {k: v[0] for k, v in data.items()}
        if return_tensors is not None:
            data = to_tensors(tensor_ready(data), return_tensors, batched)
        return BatchEncoding(
            data, word_ids=LazyRows(rows, "word_ids"), sequence_ids=LazyRows(rows, "sequence_ids"), is_batched=batched
        )

    def _check_room(self, truncate: tuple[int, str, int], has_pair: bool) -> None:
        """Refuse a truncation that leaves no room for text; `truncation_settings` already counted BERT's 2/3
        special tokens, so only a tokenizer with more overrides this."""

    def _encode_rows(self, texts: list[Any], pairs: list[Any] | None, pretokenized: bool, add_special_tokens: bool,
                     truncate: tuple[int, str, int] | None, pad_length: int | str | None,
                     overflow: bool) -> tuple[Sequence[Any], list[int] | None]:
        """(rows, the input of each row or None when row i is input i): encodings with ``ids``, ``type_ids``,
        ``attention_mask``, ``special_tokens_mask``, ``offsets``, ``word_ids``, ``sequence_ids``, overflowing
        windows flattened into rows when ``overflow``."""
        raise NotImplementedError


class LazyRows:
    """Row-wise ``word_ids``/``sequence_ids`` read from the encodings only when asked for."""

    __slots__ = ("_rows", "_attr")

    def __init__(self, rows: list[Any], attr: str) -> None:
        self._rows, self._attr = rows, attr

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, index: int) -> list[int | None]:
        return getattr(self._rows[index], self._attr)

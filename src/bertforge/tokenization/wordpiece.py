"""``BertTokenizer``: the original BERT WordPiece tokenization, exact and fast.

Ordinary text is tokenized entirely by the Rust engine of ``tokenizers``
(normaliser, pre-tokeniser, WordPiece, template, truncation, padding). A text
that contains a character on which that engine and the original Python
tokenizer can disagree (:mod:`.charset`: one regex scan over the batch, nothing
per token) is split into words by :class:`~.pretokenize.ReferencePreTokenizer`
instead, and those words go through the same Rust WordPiece, truncation and
padding (:mod:`.exact_engines`). This module holds the settings, the files and
the special tokens.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from .exact_engines import ExactWordPiece
from .hf_json import GENERIC_CLASS, same_pipeline
from .base import TokenizerBase
from .vocab import read_vocab_lines
from .wordpiece_files import SPECIAL_NAMES, read_wordpiece_folder, write_wordpiece_folder

__all__ = ["BertTokenizer"]


class _Special:
    """A special token of the tokenizer (read-only), or with `as_id` its id in the vocabulary."""

    def __init__(self, name: str, as_id: bool = False) -> None:
        self.name, self.as_id = name, as_id

    def __get__(self, tok: Any, owner: type | None = None) -> Any:
        if tok is None:
            return self
        token = tok._special_tokens[self.name]
        return tok._vocab[token] if self.as_id else token

    def __set__(self, tok: Any, value: Any) -> None:
        raise AttributeError(f"{self.name}{'_id' if self.as_id else ''} is fixed when the tokenizer is built "
                             "(its Rust engines depend on it)")


class BertTokenizer(TokenizerBase):
    """BERT's WordPiece tokenizer with the ids of the original, at Rust speed.

    ``vocab_file`` is a ``vocab.txt``. ``do_lower_case`` lowercases (and, unless
    ``strip_accents=False``, strips accents); ``strip_accents=True`` strips them
    without lowercasing. ``tokenize_chinese_chars`` splits around every CJK
    ideograph. The five special tokens must be in the vocabulary; typed in a
    text they map to their ids. ``model_max_length`` is the default length for
    truncation and ``padding="max_length"``.

    The encoding methods are safe to call from several threads (the call
    settings of the Rust engine are guarded by a lock).
    """

    def __init__(
        self,
        vocab_file: str | os.PathLike[str],
        do_lower_case: bool = True,
        tokenize_chinese_chars: bool = True,
        strip_accents: bool | None = None,
        model_max_length: int = 512,
        unk_token: str = "[UNK]",
        sep_token: str = "[SEP]",
        pad_token: str = "[PAD]",
        cls_token: str = "[CLS]",
        mask_token: str = "[MASK]",
    ) -> None:
        specials = dict(zip(SPECIAL_NAMES, (unk_token, sep_token, pad_token, cls_token, mask_token)))
        _check_options(do_lower_case, tokenize_chinese_chars, strip_accents, model_max_length, specials)

        # a list is a vocabulary already read (from a tokenizer.json), one token per id
        self._vocab_lines = list(vocab_file) if isinstance(vocab_file, list) else read_vocab_lines(vocab_file)
        if isinstance(vocab_file, list):
            vocab_file = "tokenizer.json"
        self._vocab = {token: i for i, token in enumerate(self._vocab_lines)}
        missing = [f"{name}={token!r}" for name, token in specials.items() if token not in self._vocab]
        if missing:
            raise ValueError(f"vocabulary {vocab_file} lacks the special token(s) {', '.join(missing)}")
        self._ids_to_tokens = {i: token for token, i in self._vocab.items()}
        self._do_lower_case = do_lower_case
        self._tokenize_chinese_chars = tokenize_chinese_chars
        self._strip_accents = strip_accents
        self.model_max_length = model_max_length
        self._special_tokens = specials
        self._pipeline: str | None = None  # a tokenizer.json's own pipeline, once adopted
        self._pipeline_standard = True
        self._build_engines()

    def adopt_pipeline(self, pipeline: Tokenizer, data: dict[str, Any]) -> None:
        """Run `pipeline` (a folder's tokenizer.json, as the `tokenizers` library reads it) for every text, with no
        Python path: that is how transformers runs a tokenizer.json folder, and the file may declare another
        normaliser or pre-tokeniser than BERT's. Whether it is BERT's (`data`, the file read) decides the class a
        save names."""
        self._pipeline_standard = same_pipeline(self._engine.plain_fast, data)
        self._pipeline = pipeline.to_str()
        self._build_engines()

    def _build_engines(self) -> None:
        # The reference's order of special tokens (matters only for all_special_* lists).
        self._all_special_tokens = list(
            dict.fromkeys([self.unk_token, self.sep_token, self.pad_token, self.cls_token, self.mask_token])
        )
        self._engine = ExactWordPiece(self._vocab, self._do_lower_case, self._strip_accents,
                                      self._tokenize_chinese_chars, self._special_tokens, self._all_special_tokens,
                                      self._pipeline)

    # ------------------------------------------------------------------ loading / saving

    @classmethod
    def from_pretrained(
        cls, path: str | os.PathLike[str], do_lower_case: bool | None = None, **overrides: Any
    ) -> BertTokenizer:
        """Load from a folder with ``vocab.txt`` (+ optional ``tokenizer_config.json``) or from a ``vocab.txt``.

        Settings come from ``tokenizer_config.json`` when present (``do_lower_case``,
        ``strip_accents``, ``tokenize_chinese_chars``, ``model_max_length`` and the
        special tokens), then from the arguments given here. A bare ``vocab.txt``
        path uses only the constructor defaults and the arguments.
        """
        found = read_wordpiece_folder(path, do_lower_case, overrides)
        tok = cls(found.vocab, **found.options)
        if found.pipeline is not None:
            tok.adopt_pipeline(found.pipeline, found.data)
        return tok

    def save_pretrained(self, save_directory: str | os.PathLike[str]) -> tuple[Path, ...]:
        """Write ``vocab.txt``, ``tokenizer.json``, ``tokenizer_config.json`` and ``special_tokens_map.json``.

        The files follow the Hugging Face layout, so ``transformers.AutoTokenizer`` (which reads
        ``tokenizer.json``) and older tools (which read ``vocab.txt``) load the folder as well as
        :meth:`from_pretrained` does. A tokenizer running a tokenizer.json's own pipeline writes no
        ``vocab.txt``: loaded again, the folder runs that pipeline, not BERT's exact tokenization.
        """
        config = {
            "tokenizer_class": "BertTokenizer" if self._pipeline_standard else GENERIC_CLASS,
            "do_lower_case": self._do_lower_case,
            "do_basic_tokenize": True,
            "never_split": None,
            "tokenize_chinese_chars": self._tokenize_chinese_chars,
            "strip_accents": self._strip_accents,
            "model_max_length": self.model_max_length,
            "clean_up_tokenization_spaces": True,
        }
        return write_wordpiece_folder(save_directory, self._vocab_lines if self._pipeline is None else None, config,
                                      {name: getattr(self, name) for name in SPECIAL_NAMES}, self._engine.plain_fast)

    def __reduce__(self):
        state = {name: getattr(self, name) for name in SPECIAL_NAMES}
        state.update(
            do_lower_case=self._do_lower_case,
            tokenize_chinese_chars=self._tokenize_chinese_chars,
            strip_accents=self._strip_accents,
            model_max_length=self.model_max_length,
            pipeline=self._pipeline,
            pipeline_standard=self._pipeline_standard,
        )
        return (_rebuild, (self._vocab_lines, state))

    def __repr__(self) -> str:
        return (
            f"BertTokenizer(vocab_size={self.vocab_size}, do_lower_case={self._do_lower_case}, "
            f"strip_accents={self._strip_accents}, tokenize_chinese_chars={self._tokenize_chinese_chars}, "
            f"model_max_length={self.model_max_length})"
        )

    @property
    def do_lower_case(self) -> bool:
        return self._do_lower_case

    @property
    def strip_accents(self) -> bool | None:
        return self._strip_accents

    @property
    def tokenize_chinese_chars(self) -> bool:
        return self._tokenize_chinese_chars

    # The special tokens are fixed at construction: the Rust engines depend on them.
    unk_token = _Special("unk_token")
    sep_token = _Special("sep_token")
    pad_token = _Special("pad_token")
    cls_token = _Special("cls_token")
    mask_token = _Special("mask_token")

    @property
    def all_special_tokens(self) -> list[str]:
        """The special tokens ([UNK], [SEP], [PAD], [CLS], [MASK] by default)."""
        return list(self._all_special_tokens)

    @property
    def all_special_ids(self) -> list[int]:
        """Their ids, in the same order."""
        return [self._vocab[t] for t in self._all_special_tokens]

    pad_token_id = _Special("pad_token", as_id=True)
    cls_token_id = _Special("cls_token", as_id=True)
    sep_token_id = _Special("sep_token", as_id=True)
    mask_token_id = _Special("mask_token", as_id=True)
    unk_token_id = _Special("unk_token", as_id=True)

    @property
    def own_pipeline(self) -> bool:
        """Whether a tokenizer.json's own pipeline runs (see :meth:`adopt_pipeline`), not BERT's exact one."""
        return self._pipeline is not None

    @property
    def backend(self) -> Tokenizer:
        """The all-Rust ``tokenizers.Tokenizer`` (no truncation or padding set).

        It is exact on ordinary text but not on the rare characters that
        :meth:`encode_batch_ids` and :meth:`__call__` route through Python
        (see :mod:`bertforge.tokenization.charset`). Changing its settings
        changes :meth:`encode_batch_ids` and :meth:`tokenize` too.
        """
        return self._engine.plain_fast

    # ------------------------------------------------------------------ decoding

    def _decode(self, ids: list[int], skip_special_tokens: bool, clean_up_tokenization_spaces: bool = True) -> str:
        """Tokens joined by spaces, ``##`` pieces glued to the previous token; with ``clean_up_tokenization_spaces``
        (the original's default) the spaces the join puts before ``. ? ! ,`` and English contractions are removed."""
        tokens = self.convert_ids_to_tokens(ids, skip_special_tokens=skip_special_tokens)
        text = " ".join(tokens).replace(" ##", "").strip()
        return _clean_up_spaces(text) if clean_up_tokenization_spaces else text

    # ------------------------------------------------------------------ encoding

    def tokenize(self, text: str) -> list[str]:
        """WordPiece tokens of one text, without special tokens."""
        return self._engine.tokenize(text)

    def encode_batch_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Ids of many texts, no special tokens, no truncation: the bulk path for pre-training data."""
        return self._engine.encode_batch_ids(texts)

    def _encode_rows(self, texts: list[Any], pairs: list[Any] | None, pretokenized: bool, add_special_tokens: bool,
                     truncate: tuple[int, str, int] | None, pad_length: int | str | None,
                     overflow: bool) -> tuple[list[Any], list[int] | None]:
        return self._engine.encode_rows(texts, pairs, pretokenized, add_special_tokens, truncate, pad_length,
                                        overflow)




def _check_options(do_lower_case: Any, tokenize_chinese_chars: Any, strip_accents: Any, model_max_length: Any,
                   specials: dict[str, Any]) -> None:
    """Refuse settings of the wrong kind before any engine is built, naming the argument."""
    for name, value in (("do_lower_case", do_lower_case), ("tokenize_chinese_chars", tokenize_chinese_chars)):
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be True or False, got {value!r}")
    if strip_accents is not None and not isinstance(strip_accents, bool):
        raise TypeError(f"strip_accents must be None, True or False, got {strip_accents!r}")
    if isinstance(model_max_length, bool) or not isinstance(model_max_length, int) or model_max_length < 1:
        raise ValueError(f"model_max_length must be a positive int, got {model_max_length!r}")
    for name, token in specials.items():
        if not isinstance(token, str) or not token:
            raise TypeError(f"{name} must be a non-empty str, got {token!r}")


def _rebuild(vocab_lines: list[str], state: dict[str, Any]) -> BertTokenizer:
    tok = BertTokenizer.__new__(BertTokenizer)
    tok._vocab_lines = list(vocab_lines)
    tok._vocab = {token: i for i, token in enumerate(tok._vocab_lines)}
    tok._ids_to_tokens = {i: token for token, i in tok._vocab.items()}
    tok._do_lower_case = state["do_lower_case"]
    tok._tokenize_chinese_chars = state["tokenize_chinese_chars"]
    tok._strip_accents = state["strip_accents"]
    tok.model_max_length = state["model_max_length"]
    tok._special_tokens = {name: state[name] for name in SPECIAL_NAMES}
    tok._pipeline, tok._pipeline_standard = state.get("pipeline"), state.get("pipeline_standard", True)
    tok._build_engines()
    return tok


def _clean_up_spaces(text: str) -> str:
    for before, after in (
        (" .", "."),
        (" ?", "?"),
        (" !", "!"),
        (" ,", ","),
        (" ' ", "'"),
        (" n't", "n't"),
        (" 'm", "'m"),
        (" 's", "'s"),
        (" 've", "'ve"),
        (" 're", "'re"),
    ):
        text = text.replace(before, after)
    return text

"""``FastTokenizer``: :class:`BertTokenizer`'s call API over any ``tokenizers.Tokenizer`` pipeline.

The byte-level BPE (RoBERTa) and SentencePiece (ALBERT) tokenizers are whole Rust pipelines (normaliser,
pre-tokeniser, model, template), exactly as Hugging Face builds them, so they need none of WordPiece's
Python fallback; what they share is everything around the pipeline: argument checking, truncation with
strides and overflowing windows, padding, offsets, word/sequence ids, tensors and decoding. A subclass only
builds its pipeline and reads and writes its files.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from tokenizers import AddedToken, Tokenizer

from .arguments import check_text, check_texts
from .backend import configure_call
from .base import CONFIG_FILE, SPECIAL_TOKENS_MAP_FILE, TokenizerBase, read_tokenizer_config
from .hf_json import GENERIC_CLASS

__all__ = ["FastTokenizer", "SPECIAL_NAMES", "check_overrides", "read_tokenizer_config", "write_json"]

SPECIAL_NAMES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


class FastTokenizer(TokenizerBase):
    """The shared half of the non-WordPiece tokenizers; subclasses pass their finished pipeline.

    ``specials`` maps the names in :data:`SPECIAL_NAMES` to tokens, which must all be in the vocabulary; in
    a text they map to their ids. ``words_backend``, if given, encodes ``is_split_into_words`` inputs. The
    encoding methods are thread-safe (per-call truncation and padding are set on copies of the pipelines
    under a lock).
    """

    # Whole-word masking: a token that begins a word starts with this marker ("Ġ" byte-BPE, "▁" SentencePiece).
    word_start_prefix: ClassVar[str] = ""
    # True when a tokenizer.json's own pipeline runs (see `adopt_pipeline`): then the family's classic files
    # would describe another tokenizer, and a save writes tokenizer.json alone
    own_pipeline: bool = False

    def __init__(self, backend: Tokenizer, specials: dict[str, str], model_max_length: int, source: str,
                 words_backend: Tokenizer | None = None) -> None:
        if isinstance(model_max_length, bool) or not isinstance(model_max_length, int) or model_max_length < 1:
            raise ValueError(f"model_max_length must be a positive int, got {model_max_length!r}")
        for name, token in specials.items():
            if not isinstance(token, str) or not token:
                raise TypeError(f"{name} must be a non-empty str, got {token!r}")
        vocab = backend.get_vocab(with_added_tokens=True)
        missing = [f"{name}={token!r}" for name, token in specials.items() if token not in vocab]
        if missing:
            raise ValueError(f"vocabulary {source} lacks the special token(s) {', '.join(missing)}")
        added = [AddedToken(t, special=True, normalized=False) for t in dict.fromkeys(specials.values())]
        backend.add_special_tokens(added)
        self._backend = backend
        self._call_engines = {False: Tokenizer.from_str(backend.to_str())}
        if words_backend is not None:
            words_backend.add_special_tokens(added)
        self._call_engines[True] = Tokenizer.from_str((words_backend or backend).to_str())
        self._lock = threading.Lock()
        self._special_tokens = dict(specials)
        self._vocab = vocab
        self._ids_to_tokens = {i: t for t, i in vocab.items()}
        self.model_max_length = model_max_length

    def adopt_pipeline(self, pipeline: Tokenizer, source: str) -> None:
        """Run `pipeline` (a folder's tokenizer.json, as the `tokenizers` library reads it) instead of the pipeline
        rebuilt from its parts, for texts and pre-split words alike, as transformers runs such a folder."""
        FastTokenizer.__init__(self, pipeline, self._special_tokens, self.model_max_length, source)
        self.own_pipeline = True

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(vocab_size={self.vocab_size}, model_max_length={self.model_max_length})"

    # ------------------------------------------------------------------ vocabulary and special tokens

    @property
    def backend(self) -> Tokenizer:
        """The ``tokenizers.Tokenizer`` pipeline (no truncation or padding set)."""
        return self._backend

    def _special(self, name: str) -> str:
        return self._special_tokens[name]

    bos_token = property(lambda self: self._special("bos_token"))
    eos_token = property(lambda self: self._special("eos_token"))
    unk_token = property(lambda self: self._special("unk_token"))
    sep_token = property(lambda self: self._special("sep_token"))
    pad_token = property(lambda self: self._special("pad_token"))
    cls_token = property(lambda self: self._special("cls_token"))
    mask_token = property(lambda self: self._special("mask_token"))
    bos_token_id = property(lambda self: self._vocab[self.bos_token])
    eos_token_id = property(lambda self: self._vocab[self.eos_token])
    unk_token_id = property(lambda self: self._vocab[self.unk_token])
    sep_token_id = property(lambda self: self._vocab[self.sep_token])
    pad_token_id = property(lambda self: self._vocab[self.pad_token])
    cls_token_id = property(lambda self: self._vocab[self.cls_token])
    mask_token_id = property(lambda self: self._vocab[self.mask_token])

    @property
    def all_special_tokens(self) -> list[str]:
        """The distinct special tokens, in id order."""
        return sorted(set(self._special_tokens.values()), key=self._vocab.__getitem__)

    @property
    def all_special_ids(self) -> list[int]:
        return [self._vocab[t] for t in self.all_special_tokens]

    def num_special_tokens_to_add(self, pair: bool = False) -> int:
        """Special tokens the template adds: 2 for a text, 3 (ALBERT) or 4 (RoBERTa) for a pair."""
        return self._backend.post_processor.num_special_tokens_to_add(pair)

    # ------------------------------------------------------------------ decoding

    def _decode(self, ids: list[int], skip_special_tokens: bool) -> str:
        """Through the pipeline's decoder (byte-level BPE gives the original text back)."""
        return self._backend.decode(ids, skip_special_tokens=skip_special_tokens)

    # ------------------------------------------------------------------ encoding

    def tokenize(self, text: str) -> list[str]:
        """Tokens of one text, without special tokens."""
        check_text(text, "tokenize")
        return self._backend.encode(text, add_special_tokens=False).tokens

    def encode_batch_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Ids of many texts, no special tokens, no truncation: the bulk path for pre-training data."""
        if isinstance(texts, str) or not isinstance(texts, Sequence):
            raise TypeError(f"encode_batch_ids expects a list of str, got {type(texts).__name__}")
        check_texts(texts, "encode_batch_ids")
        return [e.ids for e in self._backend.encode_batch_fast(list(texts), add_special_tokens=False)]

    # ------------------------------------------------------------------ internals

    def _encode_rows(self, texts: list[Any], pairs: list[Any] | None, pretokenized: bool, add_special_tokens: bool,
                     truncate: tuple[int, str, int] | None, pad_length: int | str | None,
                     overflow: bool) -> tuple[list[Any], list[int] | None]:
        """One Rust call for the whole batch; overflowing windows follow the row they came from."""
        inputs = texts if pairs is None else list(zip(texts, pairs))
        try:
            with self._lock:
                engine = self._call_engines[pretokenized]
                self._configure(engine, truncate, pad_length)
                encs = engine.encode_batch(inputs, is_pretokenized=pretokenized, add_special_tokens=add_special_tokens)
        except BaseException as exc:  # the Rust engine raises a bare Exception, or panics (a BaseException)
            if truncate is not None and ("Truncation error" in str(exc) or "`stride` must be" in str(exc)):
                raise ValueError(
                    f"cannot truncate to max_length={truncate[0]} with truncation={truncate[1]!r} and "
                    f"stride={truncate[2]}: the sequence that may be cut leaves too little room for at least one "
                    "input; use a larger max_length, a smaller stride or 'longest_first'") from None
            raise
        if not overflow:
            return encs, None
        rows, sample_of_row = [], []
        for i, e in enumerate(encs):
            pieces = [e, *e.overflowing]
            rows.extend(pieces)
            sample_of_row.extend([i] * len(pieces))
        return rows, sample_of_row

    def _check_room(self, truncate: tuple[int, str, int], has_pair: bool) -> None:
        """`truncation_settings` assumes BERT's 2/3 special tokens; RoBERTa's pairs have 4."""
        length, _, stride = truncate
        n_special = self.num_special_tokens_to_add(has_pair)
        if length - n_special < 1:
            raise ValueError(f"max_length={length} leaves no room for text next to {n_special} special tokens")
        if stride >= length - n_special:
            raise ValueError(
                f"stride ({stride}) must be smaller than max_length minus the special tokens ({length - n_special})")

    def _configure(self, engine: Tokenizer, truncate: tuple[int, str, int] | None,
                   pad_length: int | str | None) -> None:
        """Set truncation and padding of a call engine (caller holds the lock)."""
        configure_call(engine, truncate, pad_length, self.pad_token_id, self.pad_token)

    def _write_configs(self, out: Path, settings: dict[str, Any]) -> tuple[Path, Path]:
        """``tokenizer_config.json`` (settings + special tokens) and ``special_tokens_map.json``, HF's layout.
        A tokenizer running its own pipeline names transformers' generic class, which runs tokenizer.json as is."""
        specials = dict(self._special_tokens)
        if self.own_pipeline:
            settings = {**settings, "tokenizer_class": GENERIC_CLASS}
        config = {**settings, "model_max_length": self.model_max_length, **specials}
        return (write_json(out / CONFIG_FILE, config), write_json(out / SPECIAL_TOKENS_MAP_FILE, specials))


def write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def read_tokenizer_options(folder: Path, allowed: Sequence[str]) -> dict[str, Any]:
    """The settings of ``folder/tokenizer_config.json`` that a constructor accepts (``allowed``); {} without one.

    Special tokens may be stored as HF's serialised ``AddedToken`` dicts; their content is used.
    """
    config = read_tokenizer_config(folder)
    if config is None:
        return {}
    options: dict[str, Any] = {}
    for key in allowed:
        value = config.get(key)
        if isinstance(value, dict) and "content" in value:
            value = value["content"]
        if key == "model_max_length" and not (isinstance(value, int) and 0 < value < 2 ** 31):
            continue  # HF writes a huge sentinel for "no limit"
        if value is not None:
            options[key] = value
    return options


def check_overrides(overrides: dict[str, Any], allowed: Sequence[str]) -> None:
    unknown = sorted(set(overrides) - set(allowed))
    if unknown:
        raise TypeError(f"from_pretrained() got unexpected argument(s) {unknown}; allowed: {list(allowed)}")

"""``BertTokenizer``: the original BERT WordPiece tokenization, exact and fast.

Ordinary text is tokenized entirely by the Rust engine of ``tokenizers``
(normaliser, pre-tokeniser, WordPiece, template, truncation, padding). A text
that contains a character on which that engine and the original Python
tokenizer can disagree (:mod:`.charset`: one regex scan over the batch, nothing
per token) is split into words by :class:`~.pretokenize.ReferencePreTokenizer`
instead, and those words go through the same Rust WordPiece, truncation and
padding. Offsets of such texts are mapped back onto the original string.
"""

from __future__ import annotations

import json
import numbers
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tokenizers import AddedToken, Encoding, Tokenizer

from ..folder_files import SETTINGS_MAX_BYTES, folder_has, read_folder_text
from .arguments import as_int_list, check_text, check_texts
from .backend import build_fast, build_words
from .hf_json import GENERIC_CLASS, TOKENIZER_JSON, same_pipeline
from .base import CONFIG_FILE, SPECIAL_TOKENS_MAP_FILE, TokenizerBase
from .charset import SuspectScanner, suspect_scanner
from .pretokenize import ReferencePreTokenizer, Word
from .vocab import read_vocab_lines, save_vocab

__all__ = ["BertTokenizer"]

VOCAB_FILE = "vocab.txt"

_SPECIAL_NAMES = ("unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
_INIT_OPTIONS = ("do_lower_case", "tokenize_chinese_chars", "strip_accents", "model_max_length", *_SPECIAL_NAMES)


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
        for name, value in (("do_lower_case", do_lower_case), ("tokenize_chinese_chars", tokenize_chinese_chars)):
            if not isinstance(value, bool):
                raise TypeError(f"{name} must be True or False, got {value!r}")
        if strip_accents is not None and not isinstance(strip_accents, bool):
            raise TypeError(f"strip_accents must be None, True or False, got {strip_accents!r}")
        if isinstance(model_max_length, bool) or not isinstance(model_max_length, int) or model_max_length < 1:
            raise ValueError(f"model_max_length must be a positive int, got {model_max_length!r}")
        specials = {
            "unk_token": unk_token,
            "sep_token": sep_token,
            "pad_token": pad_token,
            "cls_token": cls_token,
            "mask_token": mask_token,
        }
        for name, token in specials.items():
            if not isinstance(token, str) or not token:
                raise TypeError(f"{name} must be a non-empty str, got {token!r}")

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

    def _build_engines(self) -> None:
        # The reference's order of special tokens (matters only for all_special_* lists).
        self._all_special_tokens = list(
            dict.fromkeys([self.unk_token, self.sep_token, self.pad_token, self.cls_token, self.mask_token])
        )
        fast_args = dict(
            lowercase=self._do_lower_case,
            strip_accents=self._strip_accents,
            tokenize_chinese_chars=self._tokenize_chinese_chars,
            unk_token=self.unk_token,
            cls_token=self.cls_token,
            sep_token=self.sep_token,
            special_tokens=self._all_special_tokens,
        )
        words_args = dict(unk_token=self.unk_token, cls_token=self.cls_token, sep_token=self.sep_token)
        # Two copies of each engine: the "plain" ones are never reconfigured (bulk ids,
        # `backend`), the "call" ones get truncation/padding per __call__ under the lock.
        self._plain_fast = build_fast(self._vocab, **fast_args)
        self._plain_words = build_words(self._vocab, **words_args)
        self._call_fast = build_fast(self._vocab, **fast_args)
        self._call_words = build_words(self._vocab, **words_args)
        self._lock = threading.Lock()
        self._pretokenizer = ReferencePreTokenizer(
            lowercase=self._do_lower_case,
            strip_accents=self._strip_accents,
            tokenize_chinese_chars=self._tokenize_chinese_chars,
            special_tokens=self._all_special_tokens,
        )
        self._scanner = suspect_scanner()
        if self._pipeline is not None:  # a tokenizer.json's own pipeline, all in Rust (see adopt_pipeline)
            self._plain_fast, self._call_fast = self._own_engine(), self._own_engine()
            self._scanner = SuspectScanner([])

    def adopt_pipeline(self, pipeline: Tokenizer, data: dict[str, Any]) -> None:
        """Run `pipeline` (a folder's tokenizer.json, as the `tokenizers` library reads it) for every text, with no
        Python path: that is how transformers runs a tokenizer.json folder, and the file may declare another
        normaliser or pre-tokeniser than BERT's. Whether it is BERT's (`data`, the file read) decides the class a
        save names."""
        self._pipeline_standard = same_pipeline(self._plain_fast, data)
        self._pipeline = pipeline.to_str()
        self._build_engines()

    def _own_engine(self) -> Tokenizer:
        engine = Tokenizer.from_str(self._pipeline)
        engine.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in self._all_special_tokens])
        return engine

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
        unknown = sorted(set(overrides) - set(_INIT_OPTIONS))
        if unknown:
            raise TypeError(f"from_pretrained() got unexpected argument(s) {unknown}; allowed: {list(_INIT_OPTIONS)}")
        p = Path(path)
        options: dict[str, Any] = {}
        if p.is_dir() and not folder_has(p, VOCAB_FILE) and folder_has(p, TOKENIZER_JSON):
            return cls._from_tokenizer_json(p, do_lower_case, overrides)
        if p.is_dir():
            vocab_file = p / VOCAB_FILE
            if not folder_has(p, VOCAB_FILE):
                raise FileNotFoundError(
                    f"{p} has no {VOCAB_FILE}; expected a tokenizer folder with {VOCAB_FILE} "
                    f"(and optionally {CONFIG_FILE}) or the path of a {VOCAB_FILE} file"
                )
            options = _options_from_config(p)
        elif os.path.lexists(p):  # a vocab.txt (read_vocab_lines says if it is not one)
            vocab_file = p
        else:
            raise FileNotFoundError(
                f"tokenizer path not found: {p} (expected a folder with {VOCAB_FILE} or a {VOCAB_FILE} file)"
            )
        options.update(overrides)
        if do_lower_case is not None:
            options["do_lower_case"] = do_lower_case
        return cls(vocab_file, **options)

    @classmethod
    def _from_tokenizer_json(cls, folder: Path, do_lower_case: bool | None, overrides: dict[str, Any]) -> BertTokenizer:
        """A folder saved by transformers 5: the vocabulary comes from tokenizer.json, the special tokens and
        length from tokenizer_config.json, and the file's own pipeline runs (as in transformers), unless the
        casing is given here (`do_lower_case`, `strip_accents`, `tokenize_chinese_chars`: BERT's exact
        tokenization with these settings, as for a vocab.txt)."""
        from .hf_json import model_type, read_pipeline, read_tokenizer_json, wordpiece_options, wordpiece_vocab
        data = read_tokenizer_json(folder)
        kind = model_type(data, folder / TOKENIZER_JSON)
        if kind != "WordPiece":
            raise ValueError(f"{folder / TOKENIZER_JSON} holds a {kind} tokenizer, not BERT's WordPiece")
        options = _options_from_config(folder)
        options.update(wordpiece_options(data, folder / TOKENIZER_JSON))
        options.update(overrides)
        if do_lower_case is not None:
            options["do_lower_case"] = do_lower_case
        tok = cls(wordpiece_vocab(data, folder / TOKENIZER_JSON), **options)
        if do_lower_case is None and not {"strip_accents", "tokenize_chinese_chars"} & set(overrides):
            tok.adopt_pipeline(read_pipeline(data, folder / TOKENIZER_JSON), data)
        return tok

    def save_pretrained(self, save_directory: str | os.PathLike[str]) -> tuple[Path, ...]:
        """Write ``vocab.txt``, ``tokenizer.json``, ``tokenizer_config.json`` and ``special_tokens_map.json``.

        The files follow the Hugging Face layout, so ``transformers.AutoTokenizer`` (which reads
        ``tokenizer.json``) and older tools (which read ``vocab.txt``) load the folder as well as
        :meth:`from_pretrained` does. A tokenizer running a tokenizer.json's own pipeline writes no
        ``vocab.txt``: loaded again, the folder runs that pipeline, not BERT's exact tokenization.
        """
        out = Path(save_directory)
        if out.exists() and not out.is_dir():
            raise NotADirectoryError(f"cannot save the tokenizer into {out}: it is a file")
        out.mkdir(parents=True, exist_ok=True)
        vocab_path = out / VOCAB_FILE
        if self._pipeline is None:
            save_vocab(self._vocab_lines, vocab_path)
        else:
            vocab_path.unlink(missing_ok=True)  # an older save's file would take precedence over tokenizer.json
        specials = {name: getattr(self, name) for name in _SPECIAL_NAMES}
        config = {
            "tokenizer_class": "BertTokenizer" if self._pipeline_standard else GENERIC_CLASS,
            "do_lower_case": self._do_lower_case,
            "do_basic_tokenize": True,
            "never_split": None,
            "tokenize_chinese_chars": self._tokenize_chinese_chars,
            "strip_accents": self._strip_accents,
            "model_max_length": self.model_max_length,
            "clean_up_tokenization_spaces": True,
            **specials,
        }
        config_path = out / CONFIG_FILE
        config_path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        map_path = out / SPECIAL_TOKENS_MAP_FILE
        map_path.write_text(json.dumps(specials, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        json_path = out / TOKENIZER_JSON
        self._plain_fast.save(str(json_path))
        return (*([] if self._pipeline is not None else [vocab_path]), json_path, config_path, map_path)

    def __reduce__(self):
        state = {name: getattr(self, name) for name in _SPECIAL_NAMES}
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
    @property
    def unk_token(self) -> str:
        return self._special_tokens["unk_token"]

    @property
    def sep_token(self) -> str:
        return self._special_tokens["sep_token"]

    @property
    def pad_token(self) -> str:
        return self._special_tokens["pad_token"]

    @property
    def cls_token(self) -> str:
        return self._special_tokens["cls_token"]

    @property
    def mask_token(self) -> str:
        return self._special_tokens["mask_token"]

    @property
    def all_special_tokens(self) -> list[str]:
        """The special tokens ([UNK], [SEP], [PAD], [CLS], [MASK] by default)."""
        return list(self._all_special_tokens)

    @property
    def all_special_ids(self) -> list[int]:
        """Their ids, in the same order."""
        return [self._vocab[t] for t in self._all_special_tokens]

    @property
    def pad_token_id(self) -> int:
        return self._vocab[self.pad_token]

    @property
    def cls_token_id(self) -> int:
        return self._vocab[self.cls_token]

    @property
    def sep_token_id(self) -> int:
        return self._vocab[self.sep_token]

    @property
    def mask_token_id(self) -> int:
        return self._vocab[self.mask_token]

    @property
    def unk_token_id(self) -> int:
        return self._vocab[self.unk_token]

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
        return self._plain_fast

    # ------------------------------------------------------------------ decoding

    def decode(
        self, ids: int | Sequence[int], skip_special_tokens: bool = False, clean_up_tokenization_spaces: bool = True
    ) -> str:
        """Text of ids: tokens joined by spaces, ``##`` pieces glued to the previous token.

        With ``clean_up_tokenization_spaces`` (the original's default) the spaces
        the join puts before ``. ? ! ,`` and English contractions are removed.
        """
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        if isinstance(ids, numbers.Integral) and not isinstance(ids, bool):
            ids = [int(ids)]
        tokens = self.convert_ids_to_tokens(as_int_list(ids, "decode"), skip_special_tokens=skip_special_tokens)
        text = " ".join(tokens).replace(" ##", "").strip()
        if clean_up_tokenization_spaces:
            text = _clean_up_spaces(text)
        return text

    def batch_decode(
        self,
        sequences: Sequence[Sequence[int]],
        skip_special_tokens: bool = False,
        clean_up_tokenization_spaces: bool = True,
    ) -> list[str]:
        """:meth:`decode` of each row (a list of lists, a 2-D tensor or array)."""
        if hasattr(sequences, "tolist"):
            sequences = sequences.tolist()
        return [self.decode(s, skip_special_tokens, clean_up_tokenization_spaces) for s in sequences]

    # ------------------------------------------------------------------ encoding

    def tokenize(self, text: str) -> list[str]:
        """WordPiece tokens of one text, without special tokens."""
        check_text(text, "tokenize")
        if not self._scanner.contains(text):
            return self._plain_fast.encode(text, add_special_tokens=False).tokens
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
        out = [e.ids for e in self._plain_fast.encode_batch_fast(texts, add_special_tokens=False)]
        if slow:
            slow_idx = sorted(slow)
            words = [[w.text for w in self._pretokenizer.words(original[i])] for i in slow_idx]
            for i, e in zip(
                slow_idx, self._plain_words.encode_batch(words, is_pretokenized=True, add_special_tokens=False)
            ):
                out[i] = e.ids
        return out

    # ------------------------------------------------------------------ internals

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

    def _encode_rows(self, texts: list[Any], pairs: list[Any] | None, pretokenized: bool, add_special_tokens: bool,
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
            with self._lock:
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
        for engine in (self._call_fast, self._call_words):
            if truncate is None:
                engine.no_truncation()
            else:
                engine.enable_truncation(truncate[0], stride=truncate[2], strategy=truncate[1], direction="right")
            if pad_length is None:
                engine.no_padding()
            else:
                engine.enable_padding(
                    direction="right",
                    pad_id=self.pad_token_id,
                    pad_type_id=0,
                    pad_token=self.pad_token,
                    length=None if pad_length == "longest" else pad_length,
                )

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
                pad_id=self.pad_token_id,
                pad_type_id=0,
                pad_token=self.pad_token,
            )


def _rebuild(vocab_lines: list[str], state: dict[str, Any]) -> BertTokenizer:
    tok = BertTokenizer.__new__(BertTokenizer)
    tok._vocab_lines = list(vocab_lines)
    tok._vocab = {token: i for i, token in enumerate(tok._vocab_lines)}
    tok._ids_to_tokens = {i: token for token, i in tok._vocab.items()}
    tok._do_lower_case = state["do_lower_case"]
    tok._tokenize_chinese_chars = state["tokenize_chinese_chars"]
    tok._strip_accents = state["strip_accents"]
    tok.model_max_length = state["model_max_length"]
    tok._special_tokens = {name: state[name] for name in _SPECIAL_NAMES}
    tok._pipeline, tok._pipeline_standard = state.get("pipeline"), state.get("pipeline_standard", True)
    tok._build_engines()
    return tok


def _options_from_config(folder: Path) -> dict[str, Any]:
    """BertTokenizer's settings from the folder's tokenizer_config.json; {} without one."""
    if not folder_has(folder, CONFIG_FILE):
        return {}
    path = folder / CONFIG_FILE
    try:
        config = json.loads(read_folder_text(folder, CONFIG_FILE, SETTINGS_MAX_BYTES))
    except json.JSONDecodeError as exc:
        raise ValueError(f"cannot read tokenizer settings from {path}: {exc}") from None
    if not isinstance(config, dict):
        raise ValueError(f"{path} must hold a JSON object, got {type(config).__name__}")
    options: dict[str, Any] = {}
    for key in ("do_lower_case", "tokenize_chinese_chars", "strip_accents"):
        if config.get(key) is not None or (key == "strip_accents" and key in config):
            if not isinstance(config[key], bool) and config[key] is not None:  # named here, with its file
                raise ValueError(f"{path}: field {key!r} must be true or false, got {config[key]!r}")
            options[key] = config[key]
    length = config.get("model_max_length")
    if isinstance(length, int) and not isinstance(length, bool) and length > 0:
        options["model_max_length"] = length
    for name in _SPECIAL_NAMES:
        value = config.get(name)
        if isinstance(value, dict):  # serialised AddedToken
            value = value.get("content")
        if isinstance(value, str) and value:
            options[name] = value
    return options


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

"""``RobertaTokenizer``: byte-level BPE (GPT-2's, as RoBERTa uses it) and ``train_bpe``.

The files are GPT-2's ``vocab.json`` (token -> id) and ``merges.txt`` (one merge per line, in priority
order). The pipeline is the one Hugging Face builds for RoBERTa (byte-level pre-tokeniser with GPT-2's
regex, BPE, ``<s> A </s></s> B </s>`` template that trims the leading space off offsets), so the ids
equal ``transformers.RobertaTokenizer``'s. Bytes make every text encodable: there is no unknown token
in practice. Whitespace is part of the following word ("Ġworld"), which is how whole-word masking
finds word starts.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from tqdm.auto import tqdm

from ..folder_files import VOCAB_MAX_BYTES, folder_has, read_folder_text
from ..textio import total_bytes
from .fast import SPECIAL_NAMES, FastTokenizer, check_overrides, read_tokenizer_options, write_json
from .hf_json import TOKENIZER_JSON
from .train import _batches

__all__ = ["RobertaTokenizer", "train_bpe"]

VOCAB_FILE = "vocab.json"
MERGES_FILE = "merges.txt"
MERGES_HEADER = "#version: 0.2"
# RoBERTa's layout: <s>, <pad>, </s>, <unk> take ids 0-3, <mask> is the last id.
LEADING_SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")
MASK = "<mask>"
_OPTIONS = ("add_prefix_space", "trim_offsets", "model_max_length", *SPECIAL_NAMES)


class RobertaTokenizer(FastTokenizer):
    """RoBERTa's byte-level BPE with :class:`BertTokenizer`'s call API (``cls_token`` is ``<s>``, ``sep_token``
    ``</s>``; token type ids are all 0, as RoBERTa has one segment type).

    ``add_prefix_space`` encodes a text as if a space preceded it, so its first word gets the same ids as
    mid-sentence. Pre-split words (``is_split_into_words=True``) are always encoded that way, each as a word
    of running text: this is the setting ``transformers`` requires for them (v4 refuses them without it; v5
    would encode every word as if it began a text). ``trim_offsets`` leaves the leading space out of a
    token's offsets.
    """

    word_start_prefix = "Ġ"

    def __init__(
        self,
        vocab_file: str | os.PathLike[str],
        merges_file: str | os.PathLike[str],
        add_prefix_space: bool = False,
        trim_offsets: bool = True,
        model_max_length: int = 512,
        bos_token: str = "<s>",
        eos_token: str = "</s>",
        unk_token: str = "<unk>",
        sep_token: str = "</s>",
        pad_token: str = "<pad>",
        cls_token: str = "<s>",
        mask_token: str = "<mask>",
    ) -> None:
        for name, value in (("add_prefix_space", add_prefix_space), ("trim_offsets", trim_offsets)):
            if not isinstance(value, bool):
                raise TypeError(f"{name} must be True or False, got {value!r}")
        # a dict and a list are a vocabulary and merges already read (from a tokenizer.json)
        vocab = dict(vocab_file) if isinstance(vocab_file, dict) else read_vocab_json(vocab_file)
        merges = list(merges_file) if isinstance(merges_file, list) else read_merges(merges_file)
        if isinstance(vocab_file, dict):
            vocab_file = merges_file = TOKENIZER_JSON
        try:
            model = models.BPE(vocab, merges, dropout=None, continuing_subword_prefix="", end_of_word_suffix="",
                               fuse_unk=False)
        except Exception as exc:  # tokenizers raises a bare Exception for a merge of unknown tokens
            raise ValueError(f"{merges_file} does not fit {vocab_file}: {exc}") from None
        backend, words_backend = Tokenizer(model), Tokenizer(model)
        for engine, prefix_space in ((backend, add_prefix_space), (words_backend, True)):
            engine.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=prefix_space)
            engine.decoder = decoders.ByteLevel()
            if sep_token in vocab and cls_token in vocab:
                engine.post_processor = processors.RobertaProcessing(
                    (sep_token, vocab[sep_token]), (cls_token, vocab[cls_token]), trim_offsets=trim_offsets,
                    add_prefix_space=prefix_space)
        specials = dict(bos_token=bos_token, eos_token=eos_token, unk_token=unk_token, sep_token=sep_token,
                        pad_token=pad_token, cls_token=cls_token, mask_token=mask_token)
        self.add_prefix_space, self.trim_offsets = add_prefix_space, trim_offsets
        self._merges = merges
        super().__init__(backend, specials, model_max_length, str(vocab_file), words_backend=words_backend)

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike[str], **overrides: Any) -> RobertaTokenizer:
        """Load a folder with ``vocab.json`` + ``merges.txt`` (+ optional ``tokenizer_config.json``)."""
        check_overrides(overrides, _OPTIONS)
        folder = Path(path)
        if not folder.is_dir():
            raise FileNotFoundError(f"tokenizer folder not found: {folder} (expected {VOCAB_FILE} + {MERGES_FILE})")
        if not folder_has(folder, MERGES_FILE) and folder_has(folder, TOKENIZER_JSON):
            return cls._from_tokenizer_json(folder, overrides)
        for name in (VOCAB_FILE, MERGES_FILE):
            if not folder_has(folder, name):
                raise FileNotFoundError(f"{folder} has no {name}; a byte-level BPE tokenizer needs "
                                        f"{VOCAB_FILE} and {MERGES_FILE}")
        options = {**read_tokenizer_options(folder, _OPTIONS), **overrides}
        return cls(folder / VOCAB_FILE, folder / MERGES_FILE, **options)

    @classmethod
    def _from_tokenizer_json(cls, folder: Path, overrides: dict[str, Any]) -> RobertaTokenizer:
        """Vocabulary and merges from tokenizer.json, settings from tokenizer_config.json. A tokenizer.json whose
        pipeline is not RoBERTa's (a normaliser, another pre-tokeniser or template...) runs as it is, unless
        `add_prefix_space` or `trim_offsets` is given here (RoBERTa's pipeline with these settings)."""
        from .hf_json import bpe_parts, model_type, read_pipeline, read_tokenizer_json, same_pipeline
        path = folder / TOKENIZER_JSON
        data = read_tokenizer_json(folder)
        kind = model_type(data, path)
        if kind != "BPE":
            raise ValueError(f"{path} holds a {kind} tokenizer, not RoBERTa's byte-level BPE")
        vocab, merges = bpe_parts(data, path)
        tok = cls(vocab, merges, **{**read_tokenizer_options(folder, _OPTIONS), **overrides})
        if not {"add_prefix_space", "trim_offsets"} & set(overrides) and not same_pipeline(tok.backend, data):
            tok.adopt_pipeline(read_pipeline(data, path), str(path))
        return tok

    def save_pretrained(self, save_directory: str | os.PathLike[str]) -> tuple[Path, ...]:
        """Write ``vocab.json``, ``merges.txt``, ``tokenizer.json``, ``tokenizer_config.json`` and
        ``special_tokens_map.json``: what ``transformers.AutoTokenizer`` (any version) loads RoBERTa from. A
        tokenizer running a tokenizer.json's own pipeline (:attr:`own_pipeline`) writes no ``vocab.json`` and
        ``merges.txt``: they would describe another tokenizer."""
        out = Path(save_directory)
        if out.exists() and not out.is_dir():
            raise NotADirectoryError(f"cannot save the tokenizer into {out}: it is a file")
        out.mkdir(parents=True, exist_ok=True)
        classic = [out / VOCAB_FILE, out / MERGES_FILE]
        if self.own_pipeline:
            for path in classic:
                path.unlink(missing_ok=True)  # an older save's files would contradict tokenizer.json
        else:
            write_json(classic[0], dict(sorted(self._vocab.items(), key=lambda item: item[1])))
            write_merges(classic[1], self._merges)
        json_path = out / TOKENIZER_JSON
        self._backend.save(str(json_path))
        configs = self._write_configs(out, {"tokenizer_class": "RobertaTokenizer", "errors": "replace",
                                            "add_prefix_space": self.add_prefix_space,
                                            "trim_offsets": self.trim_offsets})
        return (*([] if self.own_pipeline else classic), json_path, *configs)


def read_vocab_json(path: str | os.PathLike[str]) -> dict[str, int]:
    """``vocab.json`` as token -> id; errors name the file."""
    path = Path(path)
    text = read_folder_text(path.parent, path.name, VOCAB_MAX_BYTES)
    try:
        vocab = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not a valid vocab.json (a JSON object of token -> id): {exc}") from None
    if not isinstance(vocab, dict) or not vocab or not all(
            isinstance(t, str) and isinstance(i, int) and not isinstance(i, bool) for t, i in vocab.items()):
        raise ValueError(f"{path} is not a valid vocab.json: expected a non-empty JSON object of token -> int id")
    if len(set(vocab.values())) != len(vocab):
        raise ValueError(f"{path} is not a valid vocab.json: two tokens share an id")
    return vocab


def read_merges(path: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """``merges.txt`` as (left, right) pairs in priority order; the ``#version`` header is skipped."""
    path = Path(path)
    lines = read_folder_text(path.parent, path.name, VOCAB_MAX_BYTES).splitlines()
    merges = []
    for number, line in enumerate(lines, 1):
        if not line or (number == 1 and line.startswith("#version")):
            continue
        parts = line.split(" ")
        if len(parts) != 2 or not all(parts):
            raise ValueError(f"{path} line {number}: expected two tokens separated by one space, got {line!r}")
        merges.append((parts[0], parts[1]))
    return merges


def write_merges(path: Path, merges: Sequence[tuple[str, str]]) -> Path:
    path.write_text("\n".join([MERGES_HEADER, *(f"{a} {b}" for a, b in merges)]) + "\n", encoding="utf-8")
    return path


def train_bpe(
    files: Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
    output_dir: str | os.PathLike[str],
    vocab_size: int = 50265,
    min_frequency: int = 2,
    add_prefix_space: bool = False,
    show_progress: bool = True,
    skip_bad_lines: bool = False,
) -> Path:
    """Learn a byte-level BPE from text files (.txt/.gz/.xz/.bz2) and write a RoBERTa tokenizer folder.

    ``vocab_size`` counts everything (the 256 byte symbols and the 5 special tokens included); pairs seen
    fewer than ``min_frequency`` times are not merged. A line that is not UTF-8 fails with its file and line
    unless ``skip_bad_lines``. Returns ``output_dir``.
    """
    paths = [Path(files)] if isinstance(files, (str, os.PathLike)) else [Path(f) for f in files]
    if not paths:
        raise ValueError("train_bpe needs at least one input file")
    for name, value, low in (("vocab_size", vocab_size, 1), ("min_frequency", min_frequency, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    if vocab_size <= len(alphabet) + len(LEADING_SPECIALS) + 1:
        raise ValueError(f"vocab_size={vocab_size} leaves no room for merges after the {len(alphabet)} bytes "
                         f"and {len(LEADING_SPECIALS) + 1} special tokens")
    size = total_bytes(paths)
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - 1, min_frequency=min_frequency,
                                  special_tokens=list(LEADING_SPECIALS), initial_alphabet=alphabet,
                                  show_progress=False)
    seen = [0]
    with tqdm(total=size, unit="B", unit_scale=True, unit_divisor=1024, desc="reading text",
              disable=not show_progress) as bar:
        tokenizer.train_from_iterator(_batches(paths, bar.update, seen, skip_bad_lines), trainer=trainer)
    if seen[0] == 0:
        raise ValueError(f"no text found in {', '.join(str(p) for p in paths)} (all files are empty or blank)")
    model = json.loads(tokenizer.to_str())["model"]
    vocab = dict(sorted(model["vocab"].items(), key=lambda item: item[1]))
    vocab[MASK] = len(vocab)
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / VOCAB_FILE, vocab)
    write_merges(out / MERGES_FILE, merges)
    RobertaTokenizer(out / VOCAB_FILE, out / MERGES_FILE, add_prefix_space=add_prefix_space).save_pretrained(out)
    return out

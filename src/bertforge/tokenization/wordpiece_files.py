"""A `BertTokenizer`'s folder: reading it (vocab.txt with tokenizer_config.json, a bare vocab.txt, or a folder
with only a tokenizer.json, as transformers 5 saves it) and writing the Hugging Face layout, which
`transformers.AutoTokenizer` and older tools that read vocab.txt both load."""
from __future__ import annotations

import json
import os
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any

from ..folder_files import folder_has
from .base import CONFIG_FILE, SPECIAL_TOKENS_MAP_FILE, read_tokenizer_config
from .hf_json import TOKENIZER_JSON
from .vocab import save_vocab

VOCAB_FILE = "vocab.txt"
SPECIAL_NAMES = ("unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
INIT_OPTIONS = ("do_lower_case", "tokenize_chinese_chars", "strip_accents", "model_max_length", *SPECIAL_NAMES)


@dataclass
class WordPieceFolder:
    """What a tokenizer folder (or a vocab.txt) says: the vocabulary (a vocab.txt's path, or the tokens of a
    tokenizer.json), `BertTokenizer`'s options, and a tokenizer.json's own pipeline to run, if any (with the file
    read, `data`)."""

    vocab: str | os.PathLike[str] | list[str]
    options: dict[str, Any] = field(default_factory=dict)
    pipeline: Any = None
    data: dict[str, Any] | None = None


def read_wordpiece_folder(path: str | os.PathLike[str], do_lower_case: bool | None,
                          overrides: dict[str, Any]) -> WordPieceFolder:
    """`BertTokenizer.from_pretrained`: a folder with vocab.txt (+ tokenizer_config.json), a vocab.txt, or a
    folder with only a tokenizer.json."""
    unknown = sorted(set(overrides) - set(INIT_OPTIONS))
    if unknown:
        raise TypeError(f"from_pretrained() got unexpected argument(s) {unknown}; allowed: {list(INIT_OPTIONS)}")
    p = Path(path)
    options: dict[str, Any] = {}
    if p.is_dir() and not folder_has(p, VOCAB_FILE) and folder_has(p, TOKENIZER_JSON):
        return _from_tokenizer_json(p, do_lower_case, overrides)
    if p.is_dir():
        vocab_file = p / VOCAB_FILE
        if not folder_has(p, VOCAB_FILE):
            raise FileNotFoundError(
                f"{p} has no {VOCAB_FILE}; expected a tokenizer folder with {VOCAB_FILE} "
                f"(and optionally {CONFIG_FILE}) or the path of a {VOCAB_FILE} file"
            )
        options = options_from_config(p)
    elif os.path.lexists(p):  # a vocab.txt (read_vocab_lines says if it is not one)
        vocab_file = p
    else:
        raise FileNotFoundError(
            f"tokenizer path not found: {p} (expected a folder with {VOCAB_FILE} or a {VOCAB_FILE} file)"
        )
    options.update(overrides)
    if do_lower_case is not None:
        options["do_lower_case"] = do_lower_case
    return WordPieceFolder(vocab_file, options)


def _from_tokenizer_json(folder: Path, do_lower_case: bool | None, overrides: dict[str, Any]) -> WordPieceFolder:
    """A folder saved by transformers 5: the vocabulary comes from tokenizer.json, the special tokens and
    length from tokenizer_config.json, and the file's own pipeline runs (as in transformers), unless the
    casing is given here (`do_lower_case`, `strip_accents`, `tokenize_chinese_chars`: BERT's exact
    tokenization with these settings, as for a vocab.txt)."""
    from .hf_json import model_type, read_pipeline, read_tokenizer_json, wordpiece_options, wordpiece_vocab
    data = read_tokenizer_json(folder)
    kind = model_type(data, folder / TOKENIZER_JSON)
    if kind != "WordPiece":
        raise ValueError(f"{folder / TOKENIZER_JSON} holds a {kind} tokenizer, not BERT's WordPiece")
    options = options_from_config(folder)
    options.update(wordpiece_options(data, folder / TOKENIZER_JSON))
    options.update(overrides)
    if do_lower_case is not None:
        options["do_lower_case"] = do_lower_case
    found = WordPieceFolder(wordpiece_vocab(data, folder / TOKENIZER_JSON), options)
    if do_lower_case is None and not {"strip_accents", "tokenize_chinese_chars"} & set(overrides):
        found.pipeline, found.data = read_pipeline(data, folder / TOKENIZER_JSON), data
    return found


def write_wordpiece_folder(save_directory: str | os.PathLike[str], vocab_lines: list[str] | None,
                           config: dict[str, Any], specials: dict[str, str], backend: Any) -> tuple[Path, ...]:
    """Write vocab.txt (unless `vocab_lines` is None: a tokenizer.json's own pipeline, whose folder must not
    hold one), tokenizer.json (`backend`, a `tokenizers.Tokenizer`), tokenizer_config.json (`config` and the
    special tokens) and special_tokens_map.json; the paths written."""
    out = Path(save_directory)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"cannot save the tokenizer into {out}: it is a file")
    out.mkdir(parents=True, exist_ok=True)
    vocab_path = out / VOCAB_FILE
    if vocab_lines is not None:
        save_vocab(vocab_lines, vocab_path)
    else:
        vocab_path.unlink(missing_ok=True)  # an older save's file would take precedence over tokenizer.json
    config_path = out / CONFIG_FILE
    config_path.write_text(json.dumps({**config, **specials}, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    map_path = out / SPECIAL_TOKENS_MAP_FILE
    map_path.write_text(json.dumps(specials, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    json_path = out / TOKENIZER_JSON
    backend.save(str(json_path))
    return (*([] if vocab_lines is None else [vocab_path]), json_path, config_path, map_path)


def options_from_config(folder: Path) -> dict[str, Any]:
    """BertTokenizer's settings from the folder's tokenizer_config.json; {} without one."""
    config = read_tokenizer_config(folder)
    if config is None:
        return {}
    path = folder / CONFIG_FILE
    options: dict[str, Any] = {}
    for key in ("do_lower_case", "tokenize_chinese_chars", "strip_accents"):
        if config.get(key) is not None or (key == "strip_accents" and key in config):
            if not isinstance(config[key], bool) and config[key] is not None:  # named here, with its file
                raise ValueError(f"{path}: field {key!r} must be true or false, got {config[key]!r}")
            options[key] = config[key]
    length = config.get("model_max_length")
    if isinstance(length, int) and not isinstance(length, bool) and length > 0:
        options["model_max_length"] = length
    for name in SPECIAL_NAMES:
        value = config.get(name)
        if isinstance(value, dict):  # serialised AddedToken
            value = value.get("content")
        if isinstance(value, str) and value:
            options[name] = value
    return options

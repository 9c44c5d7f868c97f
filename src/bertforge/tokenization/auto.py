"""Load whichever tokenizer a folder holds: WordPiece (`vocab.txt`), byte-level BPE (`vocab.json` +
`merges.txt`, RoBERTa) or SentencePiece (`spiece.model`, ALBERT), or a `tokenizer.json` alone (what
`transformers` 5 saves) of any of the three.

Every file is read through `bertforge.folder_files`: only a regular file inside the folder, of bounded size."""
from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from ..folder_files import folder_has
from .base import CONFIG_FILE, SPECIAL_TOKENS_MAP_FILE
from .bpe import MERGES_FILE
from .bpe import VOCAB_FILE as BPE_VOCAB_FILE
from .fast import read_tokenizer_options
from .hf_json import TOKENIZER_JSON
from .sentencepiece import MODEL_FILE
from .wordpiece_files import VOCAB_FILE

# file that identifies the kind -> "module:Class"; checked in this order
TOKENIZER_FILES = (
    ("spiece.model", "bertforge.tokenization.sentencepiece:AlbertTokenizer"),
    ("merges.txt", "bertforge.tokenization.bpe:RobertaTokenizer"),
    ("vocab.txt", "bertforge.tokenization.wordpiece:BertTokenizer"),
    ("tokenizer.json", None),  # any of the three: its model type decides
)
# every file of a tokenizer folder, in the order a GLUE run's model fingerprint hashes them (do not reorder)
TOKENIZER_FOLDER_FILES = (VOCAB_FILE, TOKENIZER_JSON, BPE_VOCAB_FILE, MERGES_FILE, MODEL_FILE, CONFIG_FILE,
                          SPECIAL_TOKENS_MAP_FILE)
# tokenizer.json's model type -> the class that reads it
JSON_MODEL_TYPES = {
    "Unigram": "bertforge.tokenization.sentencepiece:AlbertTokenizer",
    "BPE": "bertforge.tokenization.bpe:RobertaTokenizer",
    "WordPiece": "bertforge.tokenization.wordpiece:BertTokenizer",
}
# SentencePiece folders are ALBERT's unless tokenizer_config.json's `tokenizer_class` names another layout
SENTENCEPIECE_CLASSES = {"XLNetTokenizer": "bertforge.tokenization.xlnet:XLNetTokenizer"}


def tokenizer_class_for(directory: str | Path) -> type:
    folder = Path(directory)
    if folder.is_file():
        raise NotADirectoryError(f"{directory} is a file; expected a model or tokenizer folder (the folder that "
                                 "holds config.json and vocab.txt, tokenizer.json or spiece.model)")
    if not folder.is_dir():
        raise FileNotFoundError(f"{directory}: no such tokenizer folder")
    for name, target in TOKENIZER_FILES:
        if folder_has(folder, name):
            if target is None:
                from .hf_json import model_type, read_tokenizer_json
                target = JSON_MODEL_TYPES[model_type(read_tokenizer_json(folder), folder / name)]
            if target == JSON_MODEL_TYPES["Unigram"]:
                declared = read_tokenizer_options(folder, ("tokenizer_class",)).get("tokenizer_class")
                target = SENTENCEPIECE_CLASSES.get(declared, target)
            module, cls = target.split(":")
            return getattr(importlib.import_module(module), cls)
    raise FileNotFoundError(f"{directory}: no tokenizer files; expected one of "
                            f"{', '.join(name for name, _ in TOKENIZER_FILES)}")


def load_tokenizer(directory: str | Path, **kwargs: Any):
    """The folder's tokenizer, whatever its kind (all share `BertTokenizer`'s call API)."""
    return tokenizer_class_for(directory).from_pretrained(str(directory), **kwargs)

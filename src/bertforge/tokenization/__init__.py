"""Tokenizers of the BERT family, all with one call API, and vocabulary training.

``BertTokenizer`` gives exactly the ids of the original BERT tokenizer (checked against it on real
corpora, on every Unicode code point and by fuzzing) while running on the Rust engine of ``tokenizers``;
``RobertaTokenizer`` (byte-level BPE) and ``AlbertTokenizer`` (SentencePiece) give the ids of their
`transformers` counterparts. ``load_tokenizer(dir)`` picks the right one from the files in a folder;
``train_wordpiece`` / ``train_bpe`` / ``train_sentencepiece`` learn a vocabulary from text files.
"""

from .auto import load_tokenizer
from .encoding import BatchEncoding
from .train import train_wordpiece
from .wordpiece import BertTokenizer

# the BPE and SentencePiece modules load on first use
_LAZY = {"RobertaTokenizer": ".bpe", "train_bpe": ".bpe",
         "AlbertTokenizer": ".sentencepiece", "train_sentencepiece": ".sentencepiece"}

__all__ = ["BertTokenizer", "BatchEncoding", "load_tokenizer", "train_wordpiece", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

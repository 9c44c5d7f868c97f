"""Exact, fast BERT WordPiece tokenization and vocabulary training.

``BertTokenizer`` gives exactly the ids of the original BERT tokenizer (checked
against it on real corpora, on every Unicode code point and by fuzzing) while
running on the Rust engine of ``tokenizers``; ``train_wordpiece`` learns a
``vocab.txt`` in BERT's layout from plain or compressed text files.
"""

from .auto import load_tokenizer
from .encoding import BatchEncoding
from .train import train_wordpiece
from .wordpiece import BertTokenizer

__all__ = ["BertTokenizer", "BatchEncoding", "load_tokenizer", "train_wordpiece"]

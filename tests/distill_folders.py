"""Tiny teachers for the distillation tests: a WordPiece vocabulary of a few words and a random BERT saved with it."""
from __future__ import annotations

import torch

from bertforge.config import BertConfig
from bertforge.model.bert import BertForMaskedLM

WORDS = ("the a film movie is was good bad great awful fun dull plot actors story loved hated boring brilliant "
         "not very really quite and but it this that of to in with best worst").split()


def tiny_vocab(folder):
    """A WordPiece vocab.txt with BERT's special ids (0 pad, 100 unk, 101 cls, 102 sep, 103 mask)."""
    tokens = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list(WORDS)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return len(tokens)


def tiny_teacher(folder, cls=BertForMaskedLM, layers: int = 4, vocab_dir=None, **overrides):
    """A random BERT with token types (the part DistilBERT drops), saved with a tokenizer."""
    from bertforge.tokenization import load_tokenizer
    if vocab_dir is None:
        vocab_size = tiny_vocab(folder)
    else:
        tok = load_tokenizer(vocab_dir)
        tok.save_pretrained(folder)
        vocab_size = len(tok.vocab)
    config = BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=layers, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=64, **overrides)
    torch.manual_seed(0)
    model = cls(config)
    with torch.no_grad():  # non-trivial segment 0 and MLM bias, so folding them is really tested
        model.bert.embeddings.token_type_embeddings.weight.normal_(0, 0.5)
        if hasattr(model, "mlm"):
            model.mlm.bias.normal_(0, 0.5)
    model.eval().save_pretrained(folder)
    return model

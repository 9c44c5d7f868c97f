"""A tiny BERT trained in a few seconds on a language whose infills are known: eight fixed sentences.

Sentence k is `k{k}w0 k{k}w1 ... k{k}w7`, so any visible word fixes every other one: the right infill of
`k3w0 k3w1 [MASK] [MASK] k3w4 ...` is `k3w2 k3w3` whatever the sampler, and a sample with no context must still
be one of the eight sentences.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

N_SENTENCES = 8
SEQ = 8
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = [f"k{k}w{j}" for k in range(N_SENTENCES) for j in range(SEQ)]


def word_id(sentence: int, position: int) -> int:
    return len(SPECIAL) + sentence * SEQ + position


def sentence_batch(generator: torch.Generator, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """[CLS] sentence [SEP] rows with a random share (15 % to all) of the words masked, and MLM labels."""
    sentences = torch.randint(0, N_SENTENCES, (batch, 1), generator=generator)
    words = word_id(0, 0) + sentences * SEQ + torch.arange(SEQ)
    ids = torch.cat([torch.full((batch, 1), 2), words, torch.full((batch, 1), 3)], dim=1)
    rate = 0.15 + 0.85 * torch.rand((batch, 1), generator=generator)
    masked = torch.zeros_like(ids, dtype=torch.bool)
    masked[:, 1:-1] = torch.rand((batch, SEQ), generator=generator) < rate
    labels = torch.where(masked, ids, torch.full_like(ids, -100))
    return torch.where(masked, torch.full_like(ids, 4), ids), labels


def train_sentences_model(folder: Path) -> Path:
    """Train a 2-layer BERT on the eight sentences (about 4 s of one CPU core); save it with its vocab.txt."""
    from bertforge.config import BertConfig
    from bertforge.model.bert import BertForMaskedLM

    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(SPECIAL) + len(WORDS), hidden_size=64, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=128, max_position_embeddings=24,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = BertForMaskedLM(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=6e-3)
    generator = torch.Generator().manual_seed(0)
    model.train()
    for _ in range(300):
        ids, labels = sentence_batch(generator, 64)
        loss = model(input_ids=ids, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.save_pretrained(folder)
    (folder / "vocab.txt").write_text("\n".join(SPECIAL + WORDS) + "\n",
                                      encoding="utf-8")
    return folder


@pytest.fixture(scope="session")
def sentences_model_dir(tmp_path_factory) -> Path:
    return train_sentences_model(tmp_path_factory.mktemp("sentences-bert"))


@pytest.fixture(scope="session")
def sentences_mlm(sentences_model_dir):
    """(model, tokenizer) of the eight-sentence BERT, loaded the way users load a model."""
    from bertforge.generation import load_mlm
    return load_mlm(sentences_model_dir)


def sentence(k: int, start: int = 0, stop: int = SEQ) -> str:
    return " ".join(WORDS[k * SEQ + j] for j in range(start, stop))


def is_sentence(text: str) -> bool:
    """Whether `text` is one of the eight sentences, whole."""
    return text in {sentence(k) for k in range(N_SENTENCES)}

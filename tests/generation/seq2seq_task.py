"""A known sequence-to-sequence task for the encoder-decoder tests: reverse 3 to 6 letters of ten.

A tiny random BERT (the warm start of both halves) with a ten-letter vocabulary, and JSONL files of
(source, reversed source) pairs. The right output of every source is known.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

import torch

LETTERS = list("abcdefghij")
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def tiny_bert(folder: Path, seed: int = 0) -> Path:
    from bertforge.config import BertConfig
    from bertforge.model.bert import BertModel
    torch.manual_seed(seed)
    BertModel(BertConfig(vocab_size=len(SPECIAL) + len(LETTERS), hidden_size=64, num_hidden_layers=2,
                         num_attention_heads=2, intermediate_size=128, max_position_embeddings=16,
                         hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)).save_pretrained(folder)
    (folder / "vocab.txt").write_text("\n".join(SPECIAL + LETTERS) + "\n", encoding="utf-8")
    return folder


def reversal_pairs(n: int, seed: int) -> list[dict[str, str]]:
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        letters = [rng.choice(LETTERS) for _ in range(rng.randint(3, 6))]
        pairs.append({"source": " ".join(letters), "target": " ".join(reversed(letters))})
    return pairs


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def train(out: Path, init: Path, train_file: Path, eval_file: Path | None = None, steps: int = 300,
          lr: float = 3e-3, **options):
    from bertforge.training.options import TrainOptions
    from bertforge.tasks.seq2seq import Seq2SeqConfig, train_seq2seq
    train_options = {"max_steps": steps, "lr": lr, "warmup_steps": 20, "save_every": 0, "progress": False,
                     "log_every": 50, **options}
    cfg = Seq2SeqConfig(train_file=str(train_file), eval_file=str(eval_file) if eval_file else None,
                        output=str(out), encoder=str(init), max_source_length=12, max_target_length=8,
                        batch_size=32, train=TrainOptions(**train_options))
    return train_seq2seq(cfg)

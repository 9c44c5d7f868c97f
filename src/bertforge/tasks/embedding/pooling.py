"""How token vectors become one sentence vector.

A sentence-transformers folder declares its pooling (read and written by `st_folder.py`); a plain encoder
folder gets mean pooling over real tokens, which is what most embedding models use.
`embed_texts` is the one batching loop that serving, training-time evaluation and `evaluate` share.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bertforge.tasks.embedding.st_folder import (POOLING_MODES, read_pooling_settings,
                                                  write_sentence_transformers_files)

__all__ = ["POOLING_MODES", "Pooling", "embed_texts", "pool", "sentence_vectors"]


@dataclass(frozen=True)
class Pooling:
    """How token vectors become one sentence vector, and whether it is scaled to unit length."""

    mode: str = "mean"
    normalize: bool = False
    max_seq_length: int | None = None

    @classmethod
    def from_folder(cls, directory: str | Path) -> Pooling:
        """What a sentence-transformers folder declares (`st_folder`); mean pooling for a plain encoder folder."""
        settings = read_pooling_settings(directory)
        return cls(*settings) if settings else cls()

    def save(self, directory: str | Path, dimension: int) -> None:
        """The sentence-transformers files beside a saved encoder: `SentenceTransformer(directory)` then embeds
        as bertforge does."""
        write_sentence_transformers_files(directory, self.mode, self.normalize, self.max_seq_length, dimension)


def pool(hidden: torch.Tensor, attention_mask: torch.Tensor, mode: str) -> torch.Tensor:
    """[batch, seq, hidden] -> [batch, hidden] over real tokens only."""
    hidden = hidden.float()
    mask = attention_mask.to(hidden.dtype).unsqueeze(-1)
    if mode == "mean":
        return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    if mode == "cls":
        return hidden[:, 0]
    if mode == "max":
        return hidden.masked_fill(mask == 0, torch.finfo(hidden.dtype).min).max(1).values
    raise ValueError(f"unknown pooling {mode!r}; choose one of {', '.join(POOLING_MODES)}")


def sentence_vectors(hidden: torch.Tensor, attention_mask: torch.Tensor, mode: str, normalize: bool) -> torch.Tensor:
    """Pooled, and unit-length when asked: what every bertforge embedding is."""
    vectors = pool(hidden, attention_mask.to(hidden.device), mode)
    return torch.nn.functional.normalize(vectors, p=2, dim=1) if normalize else vectors


@torch.no_grad()
def embed_texts(model: Any, tokenizer: Any, texts: Sequence[str], *, mode: str, normalize: bool, max_length: int,
                batch_size: int = 32, precision: Any = None) -> np.ndarray:
    """[len(texts), hidden] float32 in input order. Texts are length-sorted into batches so padding stays small;
    `model(**inputs).last_hidden_state` is all the model must give (a bertforge encoder or an ONNX one)."""
    if mode not in POOLING_MODES:
        raise ValueError(f"unknown pooling {mode!r}; choose one of {', '.join(POOLING_MODES)}")
    texts = list(texts)
    out: np.ndarray | None = None
    order = np.argsort([-len(t) for t in texts], kind="stable")
    device = getattr(model, "device", torch.device("cpu"))
    for start in range(0, len(texts), max(1, batch_size)):
        idx = order[start:start + batch_size]
        enc = tokenizer([texts[i] for i in idx], padding=True, truncation=True, max_length=max_length,
                        return_tensors="pt")
        inputs = {k: enc[k].to(device) for k in ("input_ids", "attention_mask", "token_type_ids") if k in enc}
        if precision is None:
            hidden = model(**inputs).last_hidden_state
        else:
            with precision.autocast():
                hidden = model(**inputs).last_hidden_state
        vectors = sentence_vectors(hidden, enc["attention_mask"], mode, normalize).cpu().numpy()
        if out is None:
            out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
        out[idx] = vectors
    return out if out is not None else np.zeros((0, 0), dtype=np.float32)

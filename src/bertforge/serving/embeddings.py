"""Sentence embeddings from an encoder folder, pooled the way the folder declares (`tasks.embedding.pooling`:
a sentence-transformers folder's modules, mean pooling otherwise)."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bertforge.tasks.embedding.pooling import POOLING_MODES, Pooling, embed_texts, pool

__all__ = ["POOLING_MODES", "Pooling", "SentenceEncoder", "pool"]


class SentenceEncoder:
    """Texts in, one vector per text out (numpy float32, in input order)."""

    def __init__(self, model, tokenizer, pooling: Pooling, precision=None, path: Path | None = None) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.pooling = pooling
        self.precision = precision
        self.path = path
        config = getattr(model, "config", None)
        limits = [pooling.max_seq_length, getattr(config, "max_position_embeddings", None),
                  getattr(tokenizer, "model_max_length", None)]
        self.max_length = min(n for n in limits if n)

    @classmethod
    def load(cls, directory: str | Path, device: str = "cpu", precision: str = "fp32",
             backend: str = "torch") -> SentenceEncoder:
        from bertforge.tokenization import load_tokenizer
        directory = Path(directory)
        if backend == "onnx":
            from bertforge.serving.onnx_backend import OnnxModel
            model, prec = OnnxModel.from_pretrained(directory, device=device), None
        elif backend == "torch":
            from bertforge.device import placement
            from bertforge.model.auto import AutoModel
            dev, prec = placement(device, precision)
            model = AutoModel.from_pretrained(directory).to(dev)
        else:
            raise ValueError(f"unknown backend {backend!r}; choose torch or onnx")
        return cls(model, load_tokenizer(directory), Pooling.from_folder(directory), prec, directory)

    @property
    def dimension(self) -> int:
        return int(self.model.config.hidden_size)

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """Tokens per text with special tokens and without truncation (to check lengths before batching)."""
        return [len(ids) for ids in self.tokenizer(list(texts))["input_ids"]]

    def encode(self, texts: Sequence[str], batch_size: int = 32, pooling: str | None = None,
               normalize: bool | None = None) -> np.ndarray:
        """[len(texts), hidden] float32. Texts are length-sorted into batches so padding stays small."""
        if isinstance(texts, str):
            raise TypeError("encode() takes a list of texts; wrap a single text in a list")
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        mode = pooling or self.pooling.mode
        normalize = self.pooling.normalize if normalize is None else normalize
        if getattr(self.model, "sentence_pooling", None) == (mode, normalize):  # an exported graph that pools
            return self._graph_vectors(list(texts), batch_size)
        return embed_texts(self.model, self.tokenizer, texts, mode=mode, normalize=normalize,
                           max_length=self.max_length, batch_size=batch_size, precision=self.precision)

    def _graph_vectors(self, texts: list[str], batch_size: int) -> np.ndarray:
        """The sentence vectors an exported graph computes itself (pooling and normalisation inside it)."""
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        order = np.argsort([-len(t) for t in texts], kind="stable")
        for start in range(0, len(texts), max(1, batch_size)):
            idx = order[start:start + batch_size]
            enc = self.tokenizer([texts[i] for i in idx], padding=True, truncation=True,
                                 max_length=self.max_length, return_tensors="pt")
            inputs = {k: enc[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in enc}
            out[idx] = self.model(**inputs, outputs=["sentence_embedding"]).sentence_embedding.cpu().numpy()
        return out


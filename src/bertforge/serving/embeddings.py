"""Sentence embeddings from an encoder folder, pooled the way the folder declares (`tasks.embedding.pooling`:
a sentence-transformers folder's modules, mean pooling otherwise).

A text longer than the encoder reads is cut (`truncate`, the default), refused, or read in windows (`chunk`), as
its `LongInputOptions` say: with `chunk` each window of `max_seq_length` tokens (windows `chunk_stride` tokens
apart) is pooled as the model pools, and the text's vector is the mean of its windows' vectors weighted by each
window's tokens (special tokens included; max pooling takes the largest value of any window), normalised after
when the model normalises. A text that fits is embedded exactly as without chunks."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bertforge.settings import SettingError
from bertforge.tasks.embedding.pooling import POOLING_MODES, Pooling, embed_texts, pool, sentence_vectors
from bertforge.tasks.long_inputs import LongInputOptions, chunk_classification, over_length

__all__ = ["POOLING_MODES", "Pooling", "SentenceEncoder", "pool"]


class SentenceEncoder:
    """Texts in, one vector per text out (numpy float32, in input order)."""

    def __init__(self, model, tokenizer, pooling: Pooling, precision=None, path: Path | None = None, *,
                 long_inputs: LongInputOptions | None = None) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.pooling = pooling
        self.precision = precision
        self.path = path
        self.read_long_inputs(long_inputs or LongInputOptions())

    def read_long_inputs(self, options: LongInputOptions) -> None:
        """How later calls embed texts longer than the encoder reads; a `max_seq_length` of their own
        replaces the folder's, up to the model's positions."""
        config = getattr(self.model, "config", None)
        positions = getattr(config, "max_position_embeddings", None)
        limits = [self.pooling.max_seq_length, positions, getattr(self.tokenizer, "model_max_length", None)]
        self.max_length = min(n for n in limits if n)
        if options.max_seq_length is not None:
            if positions is not None and options.max_seq_length > positions:
                raise SettingError("{max_seq_length} is {got:,} but the model reads at most {most:,} tokens (its "
                                   "position table)", owner=LongInputOptions, got=options.max_seq_length,
                                   most=positions)
            self.max_length = options.max_seq_length
        self.long_inputs = options

    @classmethod
    def load(cls, directory: str | Path, device: str = "cpu", precision: str = "fp32", backend: str = "torch", *,
             long_inputs: LongInputOptions | None = None) -> SentenceEncoder:
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
        return cls(model, load_tokenizer(directory), Pooling.from_folder(directory), prec, directory,
                   long_inputs=long_inputs)

    @property
    def dimension(self) -> int:
        return int(self.model.config.hidden_size)

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """Tokens per text with special tokens and without truncation (to check lengths before batching)."""
        return [len(ids) for ids in self.tokenizer(list(texts))["input_ids"]]

    def encode(self, texts: Sequence[str], batch_size: int = 32, pooling: str | None = None,
               normalize: bool | None = None) -> np.ndarray:
        """[len(texts), hidden] float32. Texts are length-sorted into batches so padding stays small; texts longer
        than `max_length` are cut, refused or read in windows as `long_inputs` says."""
        if isinstance(texts, str):
            raise TypeError("encode() takes a list of texts; wrap a single text in a list")
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        texts = list(texts)
        mode = pooling or self.pooling.mode
        normalize = self.pooling.normalize if normalize is None else normalize
        long: dict[int, int] = {}
        if self.long_inputs.long_inputs != "truncate":
            long = over_length(self.token_counts(texts), self.max_length, self.long_inputs, what="text")
        if not long:
            return self._vectors(texts, batch_size, mode, normalize)
        fits = [i for i in range(len(texts)) if i not in long]
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if fits:
            out[fits] = self._vectors([texts[i] for i in fits], batch_size, mode, normalize)
        chunked = sorted(long)
        out[chunked] = self._chunk_vectors([texts[i] for i in chunked], batch_size, mode, normalize)
        return out

    def _vectors(self, texts: list[str], batch_size: int, mode: str, normalize: bool) -> np.ndarray:
        if getattr(self.model, "sentence_pooling", None) == (mode, normalize):  # an exported graph that pools
            return self._graph_vectors(texts, batch_size)
        return embed_texts(self.model, self.tokenizer, texts, mode=mode, normalize=normalize,
                           max_length=self.max_length, batch_size=batch_size, precision=self.precision)

    def _chunk_vectors(self, texts: list[str], batch_size: int, mode: str, normalize: bool) -> np.ndarray:
        """Each text read in windows: the windows' pooled vectors, averaged with their token counts as weights
        (max pooling: the largest value of any window), then normalised if asked."""
        import torch
        if mode not in POOLING_MODES:
            raise ValueError(f"unknown pooling {mode!r}; choose one of {', '.join(POOLING_MODES)}")
        windows, owners = chunk_classification(self.tokenizer, texts, [None] * len(texts), self.max_length,
                                               self.long_inputs.stride(self.max_length))
        vectors = np.zeros((len(windows), self.dimension), dtype=np.float64)
        weights = np.array([len(w["input_ids"]) for w in windows], dtype=np.float64)
        device = getattr(self.model, "device", torch.device("cpu"))
        with torch.no_grad():
            for start in range(0, len(windows), max(1, batch_size)):
                batch = windows[start:start + batch_size]
                width = max(len(w["input_ids"]) for w in batch)
                pad = self.tokenizer.pad_token_id or 0
                ids = torch.tensor([w["input_ids"] + [pad] * (width - len(w["input_ids"])) for w in batch])
                types = torch.tensor([w["token_type_ids"] + [0] * (width - len(w["input_ids"])) for w in batch])
                mask = torch.tensor([[1] * len(w["input_ids"]) + [0] * (width - len(w["input_ids"])) for w in batch])
                inputs = {"input_ids": ids.to(device), "attention_mask": mask.to(device),
                          "token_type_ids": types.to(device)}
                if self.precision is None:
                    hidden = self.model(**inputs).last_hidden_state
                else:
                    with self.precision.autocast():
                        hidden = self.model(**inputs).last_hidden_state
                vectors[start:start + len(batch)] = sentence_vectors(hidden, mask, mode, False).double().cpu().numpy()
        out = np.zeros((len(texts), self.dimension), dtype=np.float64)
        for i in range(len(texts)):
            rows = [k for k, owner in enumerate(owners) if owner == i]
            if mode == "max":
                out[i] = vectors[rows].max(axis=0)
            else:
                out[i] = (vectors[rows] * weights[rows, None]).sum(axis=0) / weights[rows].sum()
        if normalize:
            out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out.astype(np.float32)

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


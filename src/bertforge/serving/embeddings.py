"""Sentence embeddings from an encoder folder, pooled the way the folder declares.

A sentence-transformers folder says how to pool in `modules.json` + `1_Pooling/config.json` (and asks for
unit-length vectors with a `Normalize` module); `sentence_bert_config.json` gives the length it truncates to.
A plain encoder folder gets mean pooling over real tokens, which is what most embedding models use.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

POOLING_MODES = ("mean", "cls", "max")


@dataclass(frozen=True)
class Pooling:
    """How token vectors become one sentence vector, and whether it is scaled to unit length."""

    mode: str = "mean"
    normalize: bool = False
    max_seq_length: int | None = None

    @classmethod
    def from_folder(cls, directory: str | Path) -> Pooling:
        folder = Path(directory)
        modules_file = folder / "modules.json"
        if not modules_file.is_file():
            return cls()
        modules = _read_json(modules_file)
        if not isinstance(modules, list):
            raise ValueError(f"{modules_file}: expected a JSON list of modules")  # noqa: TRY004 - bad file
        mode, normalize = "mean", False
        for module in modules:
            kind = str(module.get("type", "")).rsplit(".", 1)[-1] if isinstance(module, dict) else ""
            if kind == "Pooling":
                mode = _pooling_mode(folder / module.get("path", "") / "config.json")
            elif kind == "Normalize":
                normalize = True
        max_len = None
        sbert = folder / "sentence_bert_config.json"
        if sbert.is_file():
            max_len = _read_json(sbert).get("max_seq_length")
        return cls(mode, normalize, int(max_len) if max_len else None)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON (line {err.lineno}: {err.msg})") from None


def _pooling_mode(config_file: Path) -> str:
    config = _read_json(config_file)
    flags = {"cls": config.get("pooling_mode_cls_token"), "mean": config.get("pooling_mode_mean_tokens"),
             "max": config.get("pooling_mode_max_tokens")}
    chosen = [name for name, on in flags.items() if on]
    unsupported = [k for k in ("pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens",
                               "pooling_mode_lasttoken") if config.get(k)]
    if unsupported or len(chosen) != 1:
        raise ValueError(f"{config_file}: bertforge pools with exactly one of {', '.join(POOLING_MODES)}; "
                         f"this file asks for {', '.join(chosen + unsupported) or 'none'}")
    return chosen[0]


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
            from bertforge.device import Precision, resolve_device
            from bertforge.model.auto import AutoModel
            dev = resolve_device(device)
            prec = Precision.resolve(precision, dev)
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

    @torch.no_grad()
    def encode(self, texts: Sequence[str], batch_size: int = 32, pooling: str | None = None,
               normalize: bool | None = None) -> np.ndarray:
        """[len(texts), hidden] float32. Texts are length-sorted into batches so padding stays small."""
        if isinstance(texts, str):
            raise TypeError("encode() takes a list of texts; wrap a single text in a list")
        mode = pooling or self.pooling.mode
        if mode not in POOLING_MODES:
            raise ValueError(f"unknown pooling {mode!r}; choose one of {', '.join(POOLING_MODES)}")
        normalize = self.pooling.normalize if normalize is None else normalize
        texts = list(texts)
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        order = np.argsort([-len(t) for t in texts], kind="stable")
        for start in range(0, len(texts), max(1, batch_size)):
            idx = order[start:start + batch_size]
            enc = self.tokenizer([texts[i] for i in idx], padding=True, truncation=True,
                                 max_length=self.max_length, return_tensors="pt")
            out[idx] = self._vectors(enc, mode, normalize).cpu().numpy()
        return out

    def _vectors(self, enc, mode: str, normalize: bool) -> torch.Tensor:
        if getattr(self.model, "sentence_pooling", None) == (mode, normalize):  # an exported graph that pools
            inputs = {k: enc[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in enc}
            return self.model(**inputs, outputs=["sentence_embedding"]).sentence_embedding
        hidden = self._hidden(enc)
        vectors = pool(hidden, enc["attention_mask"].to(hidden.device), mode)
        if normalize:
            vectors = torch.nn.functional.normalize(vectors, p=2, dim=1)
        return vectors

    def _hidden(self, enc) -> torch.Tensor:
        device = getattr(self.model, "device", torch.device("cpu"))
        inputs = {k: enc[k].to(device) for k in ("input_ids", "attention_mask", "token_type_ids") if k in enc}
        if self.precision is None:
            return self.model(**inputs).last_hidden_state
        with self.precision.autocast():
            return self.model(**inputs).last_hidden_state


"""How token vectors become one sentence vector, and the sentence-transformers folder that says so.

A sentence-transformers folder declares its pooling in `modules.json` + `1_Pooling/config.json` (`pooling_mode`,
or one `pooling_mode_*` flag per mode as sentence-transformers before 6 wrote it) and asks for unit-length
vectors with a `Normalize` module; `sentence_bert_config.json` gives the length it truncates to.
A plain encoder folder gets mean pooling over real tokens, which is what most embedding models use.
`embed_texts` is the one batching loop that serving, training-time evaluation and `evaluate` share.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bertforge.atomic import atomic_write_text
from bertforge.folder_files import folder_has, read_folder_json

POOLING_MODES = ("mean", "cls", "max")
POOLING_DIR = "1_Pooling"
NORMALIZE_DIR = "2_Normalize"


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
        if not folder_has(folder, "modules.json"):
            return cls()
        modules = read_folder_json(folder, "modules.json")
        if not isinstance(modules, list):
            raise ValueError(f"{modules_file}: expected a JSON list of modules")  # noqa: TRY004 - bad file
        mode, normalize = "mean", False
        for module in modules:
            kind = str(module.get("type", "")).rsplit(".", 1)[-1] if isinstance(module, dict) else ""
            if kind == "Pooling":
                mode = _pooling_mode(folder, str(Path(str(module.get("path", ""))) / "config.json"))
            elif kind == "Normalize":
                normalize = True
        max_len = None
        if folder_has(folder, "sentence_bert_config.json"):
            sbert = read_folder_json(folder, "sentence_bert_config.json")
            max_len = sbert.get("max_seq_length") if isinstance(sbert, dict) else None
        return cls(mode, normalize, int(max_len) if max_len else None)

    def save(self, directory: str | Path, dimension: int) -> None:
        """The sentence-transformers files beside a saved encoder (model and tokenizer already in `directory`):
        `SentenceTransformer(directory)` then embeds as bertforge does."""
        import torch as _torch
        folder = Path(directory)
        modules: list[dict[str, Any]] = [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": POOLING_DIR, "type": "sentence_transformers.models.Pooling"}]
        if self.normalize:
            modules.append({"idx": 2, "name": "2", "path": NORMALIZE_DIR,
                            "type": "sentence_transformers.models.Normalize"})
            (folder / NORMALIZE_DIR).mkdir(parents=True, exist_ok=True)
        (folder / POOLING_DIR).mkdir(parents=True, exist_ok=True)
        pooling = {"word_embedding_dimension": int(dimension), "pooling_mode_cls_token": self.mode == "cls",
                   "pooling_mode_mean_tokens": self.mode == "mean", "pooling_mode_max_tokens": self.mode == "max",
                   "pooling_mode_mean_sqrt_len_tokens": False}
        sbert = {"max_seq_length": self.max_seq_length or 512, "do_lower_case": False}
        # the oldest sentence-transformers that reads this layout (a newer one warns about nothing)
        versions = {"sentence_transformers": "2.0.0", "pytorch": _torch.__version__}
        config = {"__version__": versions, "prompts": {}, "default_prompt_name": None,
                  "similarity_fn_name": "cosine"}
        for path, value in ((folder / "modules.json", modules), (folder / POOLING_DIR / "config.json", pooling),
                            (folder / "sentence_bert_config.json", sbert),
                            (folder / "config_sentence_transformers.json", config)):
            atomic_write_text(path, json.dumps(value, indent=2) + "\n")


def _pooling_mode(folder: Path, name: str) -> str:
    config_file = folder / name
    config = read_folder_json(folder, name)
    if not isinstance(config, dict):
        raise ValueError(f"{config_file}: expected a JSON object of pooling settings")  # noqa: TRY004 - bad file
    if "pooling_mode" in config:  # sentence-transformers >= 6: one name, or a list of names to concatenate
        named = config["pooling_mode"]
        names = [named] if isinstance(named, str) else named if isinstance(named, list) else [repr(named)]
        chosen = [str(n) for n in names if n in POOLING_MODES]
        unsupported = [f"pooling_mode {n!r}" for n in names if n not in POOLING_MODES]
    else:  # the older layout: one boolean per mode
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

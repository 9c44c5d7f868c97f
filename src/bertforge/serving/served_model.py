"""Whatever a folder holds, ready to serve: an encoder (embeddings), a fine-tuned predictor (`task.json`) or
an MLM (fill-mask, and embeddings from its encoder). Batch-level methods run in the server's worker thread.
How it reads inputs longer than it takes is the app's to say (`ServeSettings.long`, applied by
`read_long_inputs`)."""
from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from bertforge.config import has_config, read_model_config
from bertforge.settings import SettingError
from bertforge.tasks.embedding.st_folder import is_sentence_transformers_folder
from bertforge.tasks.heads import HEADS
from bertforge.tasks.long_inputs import LongInputOptions
from bertforge.tasks.predictor import is_predictor_folder
from bertforge.serving.embeddings import Pooling, SentenceEncoder
from bertforge.serving.request_tokens import RequestTokens

KINDS = ("encoder", "predictor", "mlm")
KIND_NAMES = {"encoder": "an encoder", "predictor": "a predictor", "mlm": "an MLM"}
# The exported graph computes every padded position (the PyTorch model skips them), so the onnx backend runs a
# length-sorted batch in small slices of neighbours; on SST-2 sentences slices of 8 beat one call of 32.
ONNX_SLICE = 8
MLM_ARCHITECTURES = ("ForMaskedLM", "ForPreTraining")


def folder_kind(directory: Path) -> str:
    if is_predictor_folder(directory):
        return "predictor"
    if is_sentence_transformers_folder(directory):
        return "encoder"
    config = read_model_config(directory)
    architectures = config.get("architectures") if isinstance(config, dict) else None
    if isinstance(architectures, list) and any(isinstance(a, str) and a.endswith(MLM_ARCHITECTURES)
                                               for a in architectures):
        return "mlm"
    return "encoder"


class ServedModel:
    """One folder on one backend/device/precision, with the batch functions the endpoints need."""

    def __init__(self, directory: str | Path, device: str = "cpu", precision: str = "fp32",
                 backend: str = "torch") -> None:
        from bertforge.tokenization import load_tokenizer
        self.path = Path(directory)
        if not has_config(self.path):
            raise FileNotFoundError(f"--model {directory}: no config.json; expected a model folder")
        if backend not in ("torch", "onnx"):
            raise SettingError("{backend} {got!r}: choose torch or onnx", got=backend)
        self.backend, self.device_name = backend, device
        self.kind = folder_kind(self.path)
        if self.kind == "mlm" and backend == "onnx":
            self.kind = "encoder"  # an MLM folder exports its encoder (last_hidden_state): it serves embeddings
        self.tokenizer = load_tokenizer(self.path)
        # Requests are counted and tokenized with their own copy of the tokenizer: it holds a lock while it
        # encodes, and a long request being counted must not hold up the model's next batch.
        self.requests = RequestTokens(load_tokenizer(self.path))
        self.encoder: SentenceEncoder | None = None
        self.predictor = None
        self.mlm = None
        self.precision = None
        self.long_inputs = LongInputOptions()
        if backend == "torch":
            from bertforge.device import placement
            self.device, self.precision = placement(device, precision)
        elif precision not in ("auto", "fp32"):
            raise SettingError("{precision}: the onnx backend runs the precision it was exported in; use {precision} "
                               "fp32 (or export with {quantize} int8)")
        if self.kind == "predictor":
            self.predictor = self._load_predictor()
            self.max_length = int(self.predictor.task.get("max_seq_length") or 512)
        elif self.kind == "mlm":
            from bertforge.model.auto import AutoModelForMaskedLM
            self.mlm = AutoModelForMaskedLM.from_pretrained(self.path).to(self.device).eval()
            self.encoder = SentenceEncoder(self._base_of(self.mlm), self.tokenizer, Pooling.from_folder(self.path),
                                           self.precision, self.path)
            self.max_length = self.encoder.max_length
        else:
            self.encoder = SentenceEncoder.load(self.path, device=device, precision=precision, backend=backend)
            self.max_length = self.encoder.max_length

    @staticmethod
    def _base_of(model):
        from bertforge.model.bert import BertModel
        for module in model.modules():
            if isinstance(module, BertModel):
                return module
        raise ValueError(f"{type(model).__name__} has no encoder to embed with")

    def _load_predictor(self):
        from bertforge.tasks.predictor import Predictor, read_task_file
        from bertforge.tokenization import load_tokenizer
        if self.backend == "onnx":
            from bertforge.serving.onnx_backend import OnnxModel
            task = read_task_file(self.path)
            return Predictor(OnnxModel.from_pretrained(self.path, device=self.device_name), load_tokenizer(self.path),
                             task, self.path)
        return Predictor.load(self.path, device=self.device, precision=self.precision)

    def read_long_inputs(self, options: LongInputOptions) -> None:
        """How the predictor and the encoder read inputs longer than they take (`tasks.long_inputs`), and the
        length the endpoints check inputs against."""
        # With refuse the handlers refuse an over-long input before it joins a batch (a refusal inside the batch
        # would fail every request sharing it); the model itself then cuts whatever they let through.
        inside = replace(options, long_inputs="truncate") if options.long_inputs == "refuse" else options
        if self.predictor is not None:
            self.predictor.read_long_inputs(inside)
            self.max_length = int(self.predictor.settings.max_seq_length or 512)
        if self.encoder is not None:
            self.encoder.read_long_inputs(inside)
            self.max_length = self.encoder.max_length
        self.long_inputs = options

    def long_mode(self, call: str) -> str | None:
        """How the model call `call` ("predict" or "embed") reads an input longer than `max_length`: truncate,
        refuse or chunk; None for a call this folder does not make."""
        model = self.predictor if call == "predict" else self.encoder if call == "embed" else None
        return self.long_inputs.long_inputs if model is not None else None

    # ---- what the endpoints ask ---------------------------------------------------------------------------------
    @functools.cached_property
    def endpoints(self) -> list[str]:
        """The endpoints this folder serves (paths without their leading slash)."""
        embeddings = ["v1/embeddings", "embed", "similarity", "rerank"]
        names = {"encoder": embeddings, "predictor": ["predict"] + (["rerank"] if self.cross_encoder else []),
                 "mlm": embeddings + ["fill-mask", "generate"]}[self.kind]
        return names + ["tokenize"]

    @property
    def cross_encoder(self) -> bool:
        """A predictor that scores a (query, text) pair with one number: a regression head, or a classifier
        with two labels whose second one means "relevant"."""
        if self.predictor is None:
            return False
        return HEADS[self.predictor.head].pair_scorer(self.predictor.labels)

    def pair_score(self, result: dict[str, Any], raw: bool = False) -> float:
        """A cross-encoder's relevance score from its prediction for one pair, as text-embeddings-inference gives
        it: the sigmoid of the regression output (the output itself with `raw`), or the probability of the second
        label (its logit against the first with `raw`)."""
        if HEADS[self.predictor.head].regression:
            value = float(result["score"])
            return value if raw else float(1 / (1 + np.exp(-value)))
        negative, positive = (float(result["scores"][name]) for name in self.predictor.labels)
        if raw:
            return float(np.log(max(positive, 1e-300)) - np.log(max(negative, 1e-300)))
        return positive

    @property
    def embed_normalizes(self) -> bool:
        return bool(self.encoder and self.encoder.pooling.normalize)

    def embed_batch(self, texts: list[str]) -> list[np.ndarray]:
        """Pooled, not normalized: each request decides about unit length."""
        vectors = self.encoder.encode(texts, batch_size=self._slice(len(texts)), normalize=False)
        return list(vectors)

    def predict_batch(self, inputs: list[Any]) -> list[dict[str, Any]]:
        if self.precision is None:
            return self.predictor.predict(inputs, batch_size=self._slice(len(inputs)))
        with self.precision.autocast():
            return self.predictor.predict(inputs, batch_size=len(inputs))

    def warm_up(self) -> None:
        """One small call of every batch function before the server accepts requests, so that the first client
        does not pay for the model's lazy imports and first allocations."""
        if self.encoder is not None:
            self.embed_batch(["warm up"])
        if self.predictor is not None:
            self.predict_batch([HEADS[self.predictor.head].sample])
        if self.mlm is not None:
            self.fill_mask_batch([(f"warm {self.tokenizer.mask_token}", 1)])

    def _slice(self, n: int) -> int:
        return min(n, ONNX_SLICE) if self.backend == "onnx" else n

    def fill_mask_batch(self, items: list[tuple[str, int]]) -> list[list[dict[str, Any]]]:
        import torch

        from bertforge.generation.fill_mask import fill_mask
        top_k = max(k for _, k in items)
        with torch.no_grad(), self.precision.autocast():
            results = fill_mask(self.mlm, self.tokenizer, [t for t, _ in items], top_k=top_k)
        return [[{"top": [{"token": tok, "score": float(p)} for tok, p in mask["top"][:k]]} for mask in masks]
                for (_, k), masks in zip(items, results)]

    def generate_batch(self, items: list[tuple]) -> list[dict[str, Any]]:
        """/generate: each (text, steps, top_k, top_p, temperature, seed) filled by the mdlm sampler."""
        import torch

        from bertforge.generation.api import generate
        out = []
        with torch.no_grad(), self.precision.autocast():
            for text, steps, top_k, top_p, temperature, seed in items:
                (sample,) = generate(self.mlm, self.tokenizer, text, sampler="mdlm", iterations=steps, top_k=top_k,
                                     top_p=top_p, temperature=temperature, seed=seed, precision="fp32")
                out.append({key: sample[key] for key in ("text", "spans", "tokens")})
        return out

    def info(self) -> dict[str, Any]:
        config = read_model_config(self.path)
        info: dict[str, Any] = {"model": self.path.name, "kind": self.kind, "backend": self.backend,
                                "model_type": config.get("model_type", "bert"), "max_input_length": self.max_length,
                                "endpoints": self.endpoints, "long_inputs": self.long_inputs.long_inputs,
                                "device": str(getattr(self, "device", self.device_name)),
                                "precision": self.precision.name if self.precision else "onnx"}
        if self.encoder is not None:
            info.update(embedding_dimension=self.encoder.dimension, pooling=self.encoder.pooling.mode,
                        normalize=self.encoder.pooling.normalize)
        if self.predictor is not None:
            info.update(task=self.predictor.task["task"], head=self.predictor.head, labels=self.predictor.labels)
        return info

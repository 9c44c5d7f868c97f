"""Scoring a model on a task: encode examples, run the model in batches, decode its outputs into task-level
predictions, and apply the task's official metric. Fine-tuning, `bertforge evaluate`, distillation and the
predictor all go through here."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch

from bertforge.device import Precision, move_to, placement
from bertforge.tasks.features import Feature, iterate_batches
from bertforge.tasks.heads import HEADS
from bertforge.tasks.registry import TaskSpec
from bertforge.training.progress import progress as make_bar


@dataclass
class InferenceSettings:
    """The settings that shape encoding and decoding (`FinetuneSettings` carries the same fields)."""

    max_seq_length: int | None = None  # None: 384 for SQuAD, 128 otherwise
    eval_batch_size: int = 64
    max_batch_tokens: int | None = None  # cap on padded tokens per batch (None: rows only)
    doc_stride: int = 128
    max_query_length: int = 64
    max_answer_length: int = 30
    n_best: int = 20
    long_inputs: Any = None  # a `LongInputOptions`: warn, refuse or chunk inputs longer than max_seq_length

    def seq_length(self, spec: TaskSpec) -> int:
        return default_seq_length(spec, self.max_seq_length)


def default_seq_length(spec: TaskSpec, asked: int | None) -> int:
    if asked:
        return asked
    return HEADS[spec.head].max_length


def encode(spec: TaskSpec, tokenizer, examples: Sequence[Any], settings: "InferenceSettings",
           labels: Sequence[str] | None, training: bool) -> list[Feature]:
    """The head kind's features for `examples`."""
    length = settings.seq_length(spec)
    label2id = {name: i for i, name in enumerate(labels)} if labels else None
    if spec.head not in HEADS:
        raise ValueError(f"unknown head kind {spec.head!r}")
    return HEADS[spec.head].encode(tokenizer, examples, length, label2id, settings, training)


def model_inputs(batch: dict[str, torch.Tensor], with_labels: bool) -> dict[str, torch.Tensor]:
    keys = ("input_ids", "token_type_ids", "attention_mask") + (
        ("labels", "start_positions", "end_positions") if with_labels else ())
    return {k: v for k, v in batch.items() if k in keys}


def _numpy(x: Any) -> np.ndarray:
    """A model output as float32 numpy on the CPU, whatever device and dtype it came from."""
    if isinstance(x, torch.Tensor):
        return x.detach().float().cpu().numpy()
    return np.asarray(x, dtype=np.float32)


@torch.no_grad()
def run_model(model, features: Sequence[Feature], batch_size: int = 64, pad_id: int = 0, *,
              device: torch.device | str | None = None, precision: Precision | str | None = None,
              max_batch_tokens: int | None = None, progress: bool = False) -> list[Any]:
    """Raw outputs per feature in the original order: logits (float32 numpy, unpadded) or (start, end) for QA.

    Every batch goes to `device` (default: the model's own, see `device.model_device`) and runs under `precision`
    (default fp32). Batches hold at most `batch_size` features and, with `max_batch_tokens`, at most that many
    padded tokens. `model` is anything callable on input_ids / token_type_ids / attention_mask with an
    `.eval()` that returns `.logits` or `.start_logits` / `.end_logits`.
    """
    device, precision = placement(device, precision, model)
    model.eval()
    outputs: list[Any] = [None] * len(features)
    bar = make_bar(len(features), bar=True, desc="inference", unit="feature", leave=False, silent=not progress)
    for idx, batch in iterate_batches(features, batch_size, shuffle=False, pad_id=pad_id, max_tokens=max_batch_tokens):
        lengths = batch["attention_mask"].sum(-1).tolist()
        with precision.autocast():
            out = model(**move_to(model_inputs(batch, with_labels=False), device))
        if hasattr(out, "start_logits"):
            s, e = _numpy(out.start_logits), _numpy(out.end_logits)
            for row, i in enumerate(idx):
                outputs[i] = (s[row, :lengths[row]], e[row, :lengths[row]])
        else:
            logits = _numpy(out.logits)
            for row, i in enumerate(idx):
                outputs[i] = logits[row, :lengths[row]] if logits.ndim == 3 else logits[row]
        bar.update(len(idx))
    bar.close()
    return outputs


# ---- scoring ---------------------------------------------------------------------------------------------------
def decode_outputs(spec: TaskSpec, examples: Sequence[Any], features: Sequence[Feature], outputs: Sequence[Any],
                   labels: Sequence[str] | None, settings: "InferenceSettings") -> Any:
    """Task-level predictions: label ids / floats, word tag lists, or {qid: QuestionPrediction}."""
    return HEADS[spec.head].decode(examples, features, outputs, labels, settings)


def score(spec: TaskSpec, examples: Sequence[Any], predictions: Any, labels: Sequence[str] | None) -> dict[str, Any]:
    """The task's official metric on decoded predictions."""
    return HEADS[spec.head].score(spec, examples, predictions, labels)


@dataclass
class EvalRun:
    """Everything one scoring pass made, for writing per-example predictions: the features, the model's raw
    outputs per feature and the decoded task-level predictions."""

    features: list[Feature]
    outputs: list[Any]
    predictions: Any


def predict_examples(model, tokenizer, spec: TaskSpec, examples: Sequence[Any], settings: "InferenceSettings",
                     labels: Sequence[str] | None, *, device: torch.device | str | None = None,
                     precision: Precision | str | None = None, progress: bool = False) -> EvalRun:
    """Encode, run and decode `examples` (no scoring); inputs longer than the settings' length are handled as
    their `long_inputs` says (without it: truncated, as when training). Chunked token classification keeps a
    feature and an output per window (as question answering does) and one tag list per sentence."""
    long = getattr(settings, "long_inputs", None)
    owners, windows = None, None
    label2id = {name: i for i, name in enumerate(labels)} if labels else None
    head = HEADS[spec.head]
    if long is not None and head.chunking == "mean":
        from bertforge.tasks.long_inputs import encode_texts
        features, owners, _ = encode_texts(tokenizer, examples, settings.seq_length(spec), long, label2id,
                                           regression=head.regression)
    elif long is not None and head.chunking == "central":
        from bertforge.tasks.long_inputs import encode_sentences
        features, windows, _ = encode_sentences(tokenizer, examples, settings.seq_length(spec), long, label2id)
    else:
        features = encode(spec, tokenizer, examples, settings, labels, training=False)
        if long is not None:
            from bertforge.tasks.long_inputs import check_encoded
            check_encoded(spec.head, tokenizer, examples, features, settings.seq_length(spec), long)
    outputs = run_model(model, features, settings.eval_batch_size, tokenizer.pad_token_id, device=device,
                        precision=precision, max_batch_tokens=getattr(settings, "max_batch_tokens", None),
                        progress=progress)
    if owners is not None:  # chunked: each example's logits are its windows' mean; its first window stands for it
        from bertforge.tasks.long_inputs import mean_by_owner
        outputs = mean_by_owner(outputs, owners, len(examples))
        features = [features[owners.index(i)] for i in range(len(examples))]
    predictions = decode_outputs(spec, examples, features, outputs, labels, settings)
    if windows is not None:  # chunked: each word tagged in the window where it is most central
        predictions = windows.tags(predictions)
    return EvalRun(features, outputs, predictions)


def evaluate_examples(model, tokenizer, spec: TaskSpec, examples: Sequence[Any], settings: "InferenceSettings",
                      labels: Sequence[str] | None, *, device: torch.device | str | None = None,
                      precision: Precision | str | None = None, keep: list[EvalRun] | None = None,
                      progress: bool = False) -> tuple[dict[str, Any], Any]:
    """(metrics, predictions) of `model` on labelled `examples`, plus throughput in the metrics.

    Pass a list as `keep` to get the whole `EvalRun` appended to it (per-example outputs)."""
    start = time.perf_counter()
    run = predict_examples(model, tokenizer, spec, examples, settings, labels, device=device, precision=precision,
                           progress=progress)
    metrics = score(spec, examples, run.predictions, labels)
    seconds = time.perf_counter() - start
    metrics["n_examples"] = len(examples)
    metrics["eval_seconds"] = round(seconds, 3)
    metrics["examples_per_second"] = round(len(examples) / max(seconds, 1e-9), 2)
    if keep is not None:
        keep.append(run)
    return metrics, run.predictions


def main_value(spec: TaskSpec, metrics: dict[str, Any]) -> float:
    """The number runs are compared on (best-threshold F1 for SQuAD v2)."""
    if spec.name == "squad2" and "best_f1" in metrics:
        return float(metrics["best_f1"])
    return float(metrics[spec.main_metric])

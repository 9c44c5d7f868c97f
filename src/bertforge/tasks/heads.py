"""Head kinds, one row each: everything the code that encodes, trains, decodes, scores, chunks, exports and serves
a head needs to know of it (as `transformers`' pipelines keep their `SUPPORTED_TASKS`).

A head's name is what task.json's `head` field and `TaskSpec.head` hold. The code that depends on the kind of head
asks its row (`HEADS[spec.head].per_text`, `.encode(...)`, `.onnx_outputs`) rather than comparing names, so a new
kind of head is a row here and the tasks that use it (`registry.TASKS`). Code keyed by `Head.inputs` is written
once per input shape: a head with a new one also needs its `Predictor` handler, its line and record parsing
(`prediction_io`) and its /predict JSON (`serving.requests`).

Calling conventions of the row's functions:
  `row.encode(tokenizer, examples, max_length, label2id, settings, training) -> list[Feature]`,
  `row.decode(examples, features, outputs, labels, settings)`: task-level predictions from the model's outputs,
  `row.score(spec, examples, predictions, labels) -> dict[str, float]`: the task's metric on them,
where `settings` is an `InferenceSettings` (doc_stride, max_query_length, n_best, max_answer_length).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from bertforge.tasks.features import (Feature, encode_classification, encode_multiple_choice, encode_ner,
                                      encode_squad)
from bertforge.tasks.metrics import align_predictions_to_words, squad_v1_evaluate, squad_v2_evaluate
from bertforge.tasks.squad_postprocess import postprocess_squad

#: What a head's predictor takes per input (`Head.inputs`): a text or (text, text_pair); a text or a list of
#: words; a (question, context) pair; a (context, [start,] [endings]) tuple.
INPUT_KINDS = ("text", "words", "question", "choices")
#: How `--long-inputs chunk` reads a long input (`Head.chunking`): the mean of its windows' logits; each word
#: tagged in the window where it is most central; the best span of any window (the SQuAD doc-stride recipe).
CHUNKINGS = ("mean", "central", "spans")
#: Where an example keeps its gold answer (`Head.gold`).
GOLDS = ("label", "tags", "answers")


# ---- encode ------------------------------------------------------------------------------------------------------
def _encode_texts(tokenizer, examples: Sequence[Any], length: int, label2id: Mapping[str, int] | None, settings: Any,
                  training: bool, *, regression: bool = False) -> list[Feature]:
    return encode_classification(tokenizer, examples, length, label2id, regression=regression)


def _encode_words(tokenizer, examples: Sequence[Any], length: int, label2id: Mapping[str, int] | None, settings: Any,
                  training: bool) -> list[Feature]:
    return encode_ner(tokenizer, examples, length, label2id)


def _encode_questions(tokenizer, examples: Sequence[Any], length: int, label2id: Mapping[str, int] | None,
                      settings: Any, training: bool) -> list[Feature]:
    return encode_squad(tokenizer, examples, length, settings.doc_stride, settings.max_query_length, training=training)


def _encode_choices(tokenizer, examples: Sequence[Any], length: int, label2id: Mapping[str, int] | None,
                    settings: Any, training: bool) -> list[Feature]:
    return encode_multiple_choice(tokenizer, examples, length)


# ---- decode ------------------------------------------------------------------------------------------------------
def _decode_numbers(examples: Sequence[Any], features: Sequence[Feature], outputs: Sequence[Any],
                    labels: Sequence[str] | None, settings: Any) -> list[float]:
    return [float(o.reshape(-1)[0]) for o in outputs]


def _decode_classes(examples: Sequence[Any], features: Sequence[Feature], outputs: Sequence[Any],
                    labels: Sequence[str] | None, settings: Any) -> list[int]:
    return [int(np.argmax(o)) for o in outputs]


def _decode_tags(examples: Sequence[Any], features: Sequence[Feature], outputs: Sequence[Any],
                 labels: Sequence[str] | None, settings: Any) -> list[list[str]]:
    return [align_predictions_to_words(np.argmax(o, -1), f["word_ids"], labels, f["num_words"])
            for o, f in zip(outputs, features)]


def _decode_spans(examples: Sequence[Any], features: Sequence[Feature], outputs: Sequence[Any],
                  labels: Sequence[str] | None, settings: Any) -> Any:
    return postprocess_squad(examples, features, [o[0] for o in outputs], [o[1] for o in outputs],
                             settings.n_best, settings.max_answer_length)


# ---- score -------------------------------------------------------------------------------------------------------
def _score_classes(spec: Any, examples: Sequence[Any], predictions: Any, labels: Sequence[str] | None) -> dict:
    label2id = {name: i for i, name in enumerate(labels or [])}
    return spec.metric(predictions, [label2id[str(ex.label)] for ex in examples])


def _score_numbers(spec: Any, examples: Sequence[Any], predictions: Any, labels: Sequence[str] | None) -> dict:
    return spec.metric(predictions, [float(ex.label) for ex in examples])


def _score_tags(spec: Any, examples: Sequence[Any], predictions: Any, labels: Sequence[str] | None) -> dict:
    return spec.metric(predictions, [list(ex.tags) for ex in examples])


def _score_choices(spec: Any, examples: Sequence[Any], predictions: Any, labels: Sequence[str] | None) -> dict:
    return spec.metric(predictions, [int(ex.label) for ex in examples])


def _score_spans(spec: Any, examples: Sequence[Any], predictions: Any, labels: Sequence[str] | None) -> dict:
    if spec.name == "squad2":
        texts = {q: p.answer() for q, p in predictions.items()}
        diffs = {q: p.null_diff for q, p in predictions.items()}
        return squad_v2_evaluate(texts, list(examples), na_probs=diffs, na_prob_thresh=0.0)
    return squad_v1_evaluate({q: p.answer() for q, p in predictions.items()}, list(examples))


@dataclass(frozen=True)
class Head:
    """A kind of task head, and what the code that encodes, trains, reads, exports and serves it needs to know of it."""

    name: str
    model_role: str  # the model class that carries it (`model.auto` roles): a regression head is a sequence classifier
    encode: Callable[..., list[Feature]]  # (tokenizer, examples, max_length, label2id, settings, training)
    decode: Callable[..., Any]  # (examples, features, outputs, labels, settings) -> task-level predictions
    score: Callable[..., dict[str, Any]]  # (spec, examples, predictions, labels) -> the task's metric
    inputs: str  # what its predictor takes per input, one of INPUT_KINDS
    gold: str  # where an example keeps its gold answer, one of GOLDS
    sample: Any  # one input of that kind (the server's warm-up call)
    onnx_outputs: tuple[str, ...] = ("logits",)  # the exported graph's outputs, in the order it returns them
    per_token: bool = False  # outputs have a row per token (the graph's "sequence" axis)
    labelled: bool = False  # predicts names from a label list the data defines (id2label, task.json's labels)
    per_text: bool = False  # one prediction per text or text pair, from its [CLS] row
    regression: bool = False  # one real number per input (a sequence head with one output) rather than a class
    problem_type: str | None = None  # config.json's `problem_type` for the fine-tuned model
    chunking: str | None = None  # how `--long-inputs chunk` reads it (one of CHUNKINGS); None: no chunked form
    report: bool = False  # evaluations get a per-class report (classification_report.json, confusion matrix)
    max_length: int = 128  # default max_seq_length

    def pair_scorer(self, labels: Sequence[str] | None) -> bool:
        """Scores a (query, text) pair with one number (a cross-encoder, for /rerank): a per-text head with one
        real output, or with two labels whose second one means "relevant"."""
        return self.per_text and (self.regression or len(labels or ()) == 2)


HEADS: dict[str, Head] = {h.name: h for h in (
    Head("sequence_classification", "sequence_classification", _encode_texts, _decode_classes, _score_classes,
         inputs="text", gold="label", sample="warm up", labelled=True, per_text=True,
         problem_type="single_label_classification", chunking="mean", report=True),
    Head("regression", "sequence_classification", partial(_encode_texts, regression=True), _decode_numbers,
         _score_numbers, inputs="text", gold="label", sample="warm up", per_text=True, regression=True,
         problem_type="regression", chunking="mean"),
    Head("token_classification", "token_classification", _encode_words, _decode_tags, _score_tags,
         inputs="words", gold="tags", sample=["warm", "up"], per_token=True, labelled=True, chunking="central",
         report=True),
    Head("question_answering", "question_answering", _encode_questions, _decode_spans, _score_spans,
         inputs="question", gold="answers", sample=("warm up", "warm up"), onnx_outputs=("start_logits", "end_logits"),
         per_token=True, chunking="spans", max_length=384),
    Head("multiple_choice", "multiple_choice", _encode_choices, _decode_classes, _score_choices,
         inputs="choices", gold="label", sample=("warm up", "", ["a", "b"])),
)}
HeadKind = str  # a name in HEADS

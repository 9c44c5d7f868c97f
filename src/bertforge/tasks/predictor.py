"""A fine-tuned output folder as a ready-to-use predictor: texts in, labels / spans / entities out.

The folder holds the model (HF layout), the tokenizer and `task.json` (task, head kind, label names,
lengths, SQuAD settings), so prediction needs nothing but the path: `Predictor.load(DIR).predict([...])`.
"""
from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from bertforge.tasks.evaluation import InferenceSettings, decode_outputs, evaluate_examples, run_model
from bertforge.tasks.finetune import TASK_FILE
from bertforge.tasks.task_data import load_task_data
from bertforge.tasks.features import encode_classification, encode_multiple_choice, encode_ner, encode_squad
from bertforge.tasks.readers import SquadExample, SwagExample, TextExample
from bertforge.tasks.registry import get_task

_WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def split_words(text: str) -> list[tuple[str, int, int]]:
    """(word, start, end) with punctuation as separate words, the way CoNLL text is tokenized."""
    return [(m.group(), m.start(), m.end()) for m in _WORD.finditer(text)]


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


class Predictor:
    """Model + tokenizer + task settings. `timing` holds the last call's example count, seconds and examples/s."""

    def __init__(self, model, tokenizer, task: dict[str, Any], path: Path | None = None) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.task = task
        self.path = path
        self.spec = get_task(task["task"])
        self.labels: list[str] | None = task.get("labels")
        self.settings = InferenceSettings(max_seq_length=task.get("max_seq_length"),
                                          doc_stride=task.get("doc_stride", 128),
                                          max_query_length=task.get("max_query_length", 64),
                                          max_answer_length=task.get("max_answer_length", 30),
                                          n_best=task.get("n_best", 20))
        self.timing: dict[str, float] = {}

    @classmethod
    def load(cls, directory: str | Path) -> "Predictor":
        from bertforge.model.auto import model_class_for
        from bertforge.tokenization import load_tokenizer
        directory = Path(directory)
        task_file = directory / TASK_FILE
        if not task_file.is_file():
            raise FileNotFoundError(f"{directory} has no {TASK_FILE}: not a fine-tuned predictor folder "
                                    "(make one with `bertforge finetune`)")
        task = json.loads(task_file.read_text(encoding="utf-8"))
        model = model_class_for(directory, task["head"]).from_pretrained(directory)
        return cls(model, load_tokenizer(directory), task, directory)

    @property
    def head(self) -> str:
        return self.task["head"]

    # ---- prediction --------------------------------------------------------------------------------------------
    def predict(self, inputs: Sequence[Any], batch_size: int = 64) -> list[dict[str, Any]]:
        """One result dict per input.

        Inputs by head: a text or a (text, text_pair) tuple (classification / regression); a text or a
        list of words (NER); a (question, context) tuple (QA); a (context, [endings]) or
        (context, start, [endings]) tuple (multiple choice).
        """
        start = time.perf_counter()
        inputs = list(inputs)
        handler = {"sequence_classification": self._classify, "regression": self._classify,
                   "token_classification": self._ner, "question_answering": self._qa,
                   "multiple_choice": self._choose}[self.head]
        results = handler(inputs, batch_size) if inputs else []
        seconds = time.perf_counter() - start
        self.timing = {"n": len(inputs), "seconds": round(seconds, 4),
                       "examples_per_second": round(len(inputs) / max(seconds, 1e-9), 2)}
        return results

    def _run(self, features, batch_size: int) -> list[Any]:
        return run_model(self.model, features, batch_size, self.tokenizer.pad_token_id)

    def _classify(self, inputs: list[Any], batch_size: int) -> list[dict[str, Any]]:
        examples = []
        for i, item in enumerate(inputs):
            text, pair = (item[0], item[1]) if isinstance(item, (tuple, list)) else (item, None)
            examples.append(TextExample(str(i), text, pair, None, 0))
        out: list[dict[str, Any]] = []
        # single texts and pairs cannot share one encode call
        for want_pair in (False, True):
            idx = [i for i, ex in enumerate(examples) if (ex.text_pair is not None) == want_pair]
            if not idx:
                continue
            feats = encode_classification(self.tokenizer, [examples[i] for i in idx],
                                          self.settings.seq_length(self.spec))
            for i, logits in zip(idx, self._run(feats, batch_size)):
                out.append((i, self._label_result(logits)))
        return [r for _, r in sorted(out, key=lambda t: t[0])]

    def _label_result(self, logits: np.ndarray) -> dict[str, Any]:
        if self.head == "regression":
            return {"score": float(logits.reshape(-1)[0])}
        probs = _softmax(logits.astype(np.float64))
        k = int(np.argmax(probs))
        names = self.labels or [str(i) for i in range(len(probs))]
        return {"label": names[k], "score": float(probs[k]),
                "scores": {name: float(p) for name, p in zip(names, probs)}}

    def _ner(self, inputs: list[Any], batch_size: int) -> list[dict[str, Any]]:
        words_spans = [split_words(x) if isinstance(x, str) else [(w, None, None) for w in x] for x in inputs]
        feats = encode_ner(self.tokenizer, [[w for w, _, _ in ws] for ws in words_spans],
                           self.settings.seq_length(self.spec))
        outputs = self._run(feats, batch_size)
        tags = decode_outputs(self.spec, [], feats, outputs, self.labels, self.settings)
        results = []
        for item, ws, word_tags in zip(inputs, words_spans, tags):
            entities = []
            for kind, first, last in _entities(word_tags):
                entity: dict[str, Any] = {"entity": kind, "words": [w for w, _, _ in ws[first:last + 1]],
                                          "first_word": first, "last_word": last}
                if isinstance(item, str):
                    entity.update(text=item[ws[first][1]:ws[last][2]], start=ws[first][1], end=ws[last][2])
                entities.append(entity)
            results.append({"words": [w for w, _, _ in ws], "tags": word_tags, "entities": entities})
        return results

    def _qa(self, inputs: list[Any], batch_size: int) -> list[dict[str, Any]]:
        examples = [SquadExample(str(i), q, c, ()) for i, (q, c) in enumerate(inputs)]
        feats = encode_squad(self.tokenizer, examples, self.settings.seq_length(self.spec), self.settings.doc_stride,
                             self.settings.max_query_length)
        preds = decode_outputs(self.spec, examples, feats, self._run(feats, batch_size), None, self.settings)
        threshold = self.task.get("null_threshold", 0.0) if self.spec.name == "squad2" else None
        results = []
        for ex in examples:
            p = preds[ex.qid]
            r: dict[str, Any] = {"answer": p.answer(threshold)}
            if p.best is not None:
                r.update(score=p.best.score, start=p.best.start_char, end=p.best.end_char)
            if threshold is not None:
                r["null_diff"] = p.null_diff
            results.append(r)
        return results

    def _choose(self, inputs: list[Any], batch_size: int) -> list[dict[str, Any]]:
        examples = []
        for i, item in enumerate(inputs):
            context, start, endings = (item[0], "", item[1]) if len(item) == 2 else item
            examples.append(SwagExample(str(i), context, start, tuple(endings), None, 0))
        results: list[dict[str, Any]] = [{} for _ in examples]
        # a batch needs one number of choices: run each count separately
        for count in sorted({len(ex.endings) for ex in examples}):
            idx = [i for i, ex in enumerate(examples) if len(ex.endings) == count]
            feats = encode_multiple_choice(self.tokenizer, [examples[i] for i in idx],
                                           self.settings.seq_length(self.spec))
            for i, logits in zip(idx, self._run(feats, batch_size)):
                probs = _softmax(logits.astype(np.float64))
                results[i] = {"label": int(np.argmax(probs)), "score": float(probs.max()),
                              "scores": [float(p) for p in probs]}
        return results

    # ---- evaluation --------------------------------------------------------------------------------------------
    def evaluate(self, data: str | None = None, eval_file: str | None = None, split: str = "dev",
                 max_samples: int | None = None, task: str | None = None,
                 skip_bad_rows: bool = False) -> dict[str, Any]:
        """Score this predictor on a labelled split with the task's official metric."""
        spec = get_task(task) if task else self.spec
        if spec.head != self.spec.head:
            raise ValueError(f"this predictor has a {self.spec.head} head; task {spec.name} needs {spec.head}")
        data_ = load_task_data(spec, data, None, eval_file, skip_bad_rows=skip_bad_rows, need_train=False,
                               eval_split=split)
        report: dict[str, Any] = {"task": spec.name, "note": data_.note or None, "files": data_.files}
        for name, examples in data_.evals.items():
            examples = examples[:max_samples] if max_samples else examples
            metrics, _ = evaluate_examples(self.model, self.tokenizer, spec, examples, self.settings, self.labels)
            report[name] = metrics
        return report


def _entities(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """(type, first word, last word) of each IOB2 entity; a stray I- starts one, as conlleval counts it."""
    spans: list[tuple[str, int, int]] = []
    kind, first = None, 0
    for i, tag in enumerate(list(tags) + ["O"]):
        prefix, _, name = tag.partition("-")
        continues = prefix == "I" and name == kind
        if kind is not None and not continues:
            spans.append((kind, first, i - 1))
            kind = None
        if prefix in ("B", "I") and not continues:
            kind, first = name, i
    return spans

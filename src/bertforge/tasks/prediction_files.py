"""Per-example predictions of an evaluation, in the formats other tools read.

SQuAD: `predictions.json` ({qid: answer text}) and, for v2, `null_odds.json` ({qid: null score - best span
score}), the files the official evaluation scripts take (`evaluate-v2.0.py data.json predictions.json
--na-prob-file null_odds.json --na-prob-thresh 0` gives the numbers `bertforge evaluate` reports; the texts
are each question's best span, the no-answer decision is the threshold's). NER: CoNLL lines `word gold
predicted`, a blank line between sentences, as conlleval reads them. Classification, regression and multiple
choice: `predictions.csv` with the index, the text, the gold and predicted label and the probabilities.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from bertforge.atomic import atomic_path, atomic_write_text
from bertforge.settings import SettingError
from bertforge.tasks.evaluation import EvalRun
from bertforge.tasks.registry import HEADS, TaskSpec
from bertforge.training.run_output import write_results


def write_eval_outputs(out_dir: str | Path, spec: TaskSpec, report: dict[str, Any],
                       runs: dict[str, tuple[Sequence[Any], EvalRun]], labels: Sequence[str] | None) -> list[Path]:
    """`metrics.json` (the whole report) and each eval set's predictions; returns the files written.

    The first eval set's files have the plain names; further sets (MNLI mismatched) get `-<set>` added.
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise SettingError("{output} {path}: exists and is not a folder", path=out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for i, (name, (examples, run)) in enumerate(runs.items()):
        tag = "" if i == 0 else f"-{name.removeprefix('eval_')}"
        written += _write_one(out, tag, spec, examples, run, labels)
    return written + [write_results(out, report)]


def _write_one(out: Path, tag: str, spec: TaskSpec, examples: Sequence[Any], run: EvalRun,
               labels: Sequence[str] | None) -> list[Path]:
    if HEADS[spec.head].gold == "answers":
        files = [out / f"predictions{tag}.json"]
        atomic_write_text(files[0], json.dumps({q: p.answer() for q, p in run.predictions.items()},
                                               ensure_ascii=False, indent=1) + "\n")
        if spec.name == "squad2":
            files.append(out / f"null_odds{tag}.json")
            atomic_write_text(files[1], json.dumps({q: p.null_diff for q, p in run.predictions.items()},
                                                   indent=1) + "\n")
        return files
    if HEADS[spec.head].gold == "tags":
        path = out / f"predictions{tag}.conll"
        atomic_write_text(path, conll_text(examples, run.predictions))
        return [path]
    path = out / f"predictions{tag}.csv"
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        for row in table_rows(spec, examples, run, labels):
            writer.writerow(row)
    return [path]


def conll_text(examples: Sequence[Any], predictions: Sequence[Sequence[str]]) -> str:
    """`word gold predicted` per word, a blank line after each sentence."""
    lines = []
    for ex, tags in zip(examples, predictions):
        for word, gold, pred in zip(ex.words, ex.tags, tags):
            lines.append(f"{word} {gold} {pred}")
        lines.append("")
    return "\n".join(lines) + "\n"


def table_rows(spec: TaskSpec, examples: Sequence[Any], run: EvalRun, labels: Sequence[str] | None) -> list[list[Any]]:
    """Header + one row per example for classification, regression and multiple choice."""
    if HEADS[spec.head].inputs == "choices":
        n = max((len(ex.endings) for ex in examples), default=0)
        rows: list[list[Any]] = [["index", "context", "start", "endings", "gold", "predicted"]
                                 + [f"prob_{i}" for i in range(n)]]
        for i, (ex, pred, logits) in enumerate(zip(examples, run.predictions, run.outputs)):
            rows.append([i, ex.context, ex.start, json.dumps(list(ex.endings), ensure_ascii=False), ex.label, pred]
                        + [_fmt(p) for p in _softmax(logits)])
        return rows
    pairs = any(ex.text_pair is not None for ex in examples)
    head = ["index", "text"] + (["text_pair"] if pairs else []) + ["gold", "predicted"]
    if HEADS[spec.head].regression:
        rows = [head]
        for i, (ex, pred) in enumerate(zip(examples, run.predictions)):
            rows.append([i, ex.text] + ([ex.text_pair] if pairs else []) + [ex.label, _fmt(pred)])
        return rows
    names = list(labels) if labels else [str(i) for i in range(len(run.outputs[0]) if run.outputs else 0)]
    rows = [head + [f"prob_{name}" for name in names]]
    for i, (ex, pred, logits) in enumerate(zip(examples, run.predictions, run.outputs)):
        rows.append([i, ex.text] + ([ex.text_pair] if pairs else []) + [ex.label, names[pred]]
                    + [_fmt(p) for p in _softmax(logits)])
    return rows


def _softmax(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max())
    return e / e.sum()


def _fmt(x: float) -> str:
    return repr(float(x))

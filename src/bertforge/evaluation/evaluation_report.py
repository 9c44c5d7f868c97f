"""metrics.json of `bertforge evaluate --output` as a type: `EvaluationReport`, read by `read_evaluation_report`.

What was scored decides the keys. A predictor folder: {"task", "note", "files": {eval set: file}, "eval": the first
eval set's metrics}, then one key per further eval set (MNLI's "eval_dev_mismatched", kept in `extra`; `eval_set`
reads them). Sentence embeddings (task sts or retrieval): {"task", "model", "files": [file or folder], "split",
"eval"}. Each key of its layout is written even when it is null (`split` of a file given by name, `note` of data
without one).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from bertforge.training.run_output import RESULTS
from bertforge.training.summary import JsonRecord, key

EMBEDDING_TASKS = ("sts", "retrieval")
_NONE = type(None)
_ONLY = {"note": "predictor", "model": "embeddings", "split": "embeddings"}  # the keys of one layout only


@dataclass(kw_only=True)
class EvaluationReport(JsonRecord):
    """One evaluation's metrics.json: the task, the files scored and the metrics (see the module for the layouts)."""

    FILE: ClassVar[str] = RESULTS
    task: str = key(str)
    note: str | None = key((str, _NONE), None)      # a predictor's data: what reading it noted (a split, skipped rows)
    model: str | None = key((str, _NONE), None)     # embeddings: the encoder folder scored
    files: dict[str, Any] | list[Any] = key((dict, list))  # a predictor's: {eval set: file}; embeddings: [source]
    split: str | None = key((str, _NONE), None)     # embeddings: the split of a data folder (null: a file)
    eval: dict[str, Any] = key(dict)
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def layout(self) -> str:
        """"embeddings" (task sts or retrieval) or "predictor": which keys the file has."""
        return "embeddings" if self.task in EMBEDDING_TASKS else "predictor"

    def _omit(self, name: str) -> bool:
        return _ONLY.get(name, self.layout) != self.layout and getattr(self, name) is None

    def eval_set(self, name: str) -> dict[str, Any] | None:
        """The metrics of eval set `name` ("eval" is the first; others, such as "eval_dev_mismatched", follow)."""
        value = self.eval if name == "eval" else self.extra.get(name)
        return value if isinstance(value, dict) else None


def read_evaluation_report(folder: str | Path) -> EvaluationReport:
    """The metrics.json `bertforge evaluate --output` wrote in `folder` (FileNotFoundError or ValueError in one line
    naming the file and the key)."""
    return EvaluationReport.from_json(Path(folder) / EvaluationReport.FILE)

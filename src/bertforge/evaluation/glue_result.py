"""glue.json as types: `GlueResult` and its per-task `GlueTaskResult` (the format is described in `evaluation.glue`).

`bertforge glue` writes it, `report.py` draws it, and other tools may write it too, so reading is lenient where the
format allows (keys it does not know are kept in `extra`; optional keys may be missing) and strict where drawing
needs it (a task's score and metrics, the average, the known task names), each error naming the file and the key.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from bertforge.evaluation.scores import GLUE_TASKS, METRICS
from bertforge.training.summary import NUMBER, JsonRecord, key

FORMAT = "bertforge-glue/1"
GLUE_JSON = "glue.json"
_OPTIONAL_NUMBER = NUMBER + (type(None),)


@dataclass(kw_only=True)
class GlueTaskResult(JsonRecord):
    """One task of glue.json: its score (the mean of its metrics, in points) and how it was reached."""

    FILE: ClassVar[str] = GLUE_JSON
    method: str = key(str, "finetune")                              # "finetune" or "majority"
    in_average: bool = key(bool, True)
    majority: dict[str, Any] | None = key((dict, type(None)), None)  # the majority-class floor: score, metrics
    train_examples: int | None = key((int, type(None)), None)
    dev_examples: dict[str, Any] | None = key((dict, type(None)), None)
    score: float | None = key(_OPTIONAL_NUMBER, None)
    metrics: dict[str, Any] = key(dict)
    selected: dict[str, Any] | None = key((dict, type(None)), None)  # {"lr", "seeds"}: the runs the score is from
    spread: dict[str, Any] | None = key((dict, type(None)), None)    # {"n", "min", "max", "stdev"} over seeds
    runs: list[dict[str, Any]] = key(list, factory=list)
    extra: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(kw_only=True)
class GlueResult(JsonRecord):
    """A whole glue.json: the task entries, their average (WNLI excluded), the floor's average, the record."""

    FILE: ClassVar[str] = GLUE_JSON
    format: str = key(str, FORMAT)
    name: str | None = key((str, type(None)), None)          # the label in tables and plots
    model: dict[str, Any] = key(dict)                        # {"path", "model_type", "fingerprint"}
    protocol: dict[str, Any] = key(dict)                     # Protocol fields, "changed": overrides of the preset
    tasks: dict[str, GlueTaskResult] = key(dict)
    average: float | None = key(_OPTIONAL_NUMBER)
    average_over: list[str] = key(list)
    majority_average: float | None = key(_OPTIONAL_NUMBER, None)
    skipped: dict[str, str] = key(dict)                      # task -> why it has no files
    failed: dict[str, str] = key(dict, factory=dict)         # task -> the failed unit (only written when some did)
    command: str | None = key((str, type(None)), None)
    seconds: float = key(NUMBER, 0.0)
    created: str | None = key((str, type(None)), None)
    software: dict[str, Any] | None = key((dict, type(None)), None)
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def label(self) -> str:
        """The name in tables and plots: `name`, else the model folder's name."""
        return str(self.name or Path(str(self.model.get("path", "model"))).name)

    def _omit(self, name: str) -> bool:
        return name == "failed" and not self.failed

    def to_dict(self) -> dict[str, Any]:
        data = super().to_dict()
        data["tasks"] = {t: e.to_dict() for t, e in self.tasks.items()}
        return data

    def _check(self, where: str, prefix: str) -> None:
        if self.format != FORMAT:
            raise ValueError(f"{where}format {self.format!r}; this bertforge reads {FORMAT}")
        tasks: dict[str, GlueTaskResult] = {}
        for task, entry in self.tasks.items():
            if task not in METRICS:
                raise ValueError(f"{where}tasks.{task}: not a GLUE task ({', '.join(GLUE_TASKS)})")
            tasks[task] = entry if isinstance(entry, GlueTaskResult) else GlueTaskResult.from_dict(
                entry, where[:-2] or None, f"tasks.{task}.")
        self.tasks = tasks

    @classmethod
    def coerce(cls, result: GlueResult | dict[str, Any]) -> GlueResult:
        """`result` as a GlueResult (a dict in glue.json's format is checked and converted)."""
        return result if isinstance(result, GlueResult) else cls.from_dict(result)

"""metrics.json of a `bertforge finetune` run: the best run's scores, every run of the grid and the settings.

`tasks.finetune` writes it into the predictor folder and returns it; `bertforge distill` reads the teacher's
settings from it, `bertforge glue` each unit's scores. The eval sets scored after training besides the first
(MNLI's `eval_dev_mismatched`) are keys of their own after "settings", kept in `extra` (`eval_set` reads them).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from bertforge.training.run_output import RESULTS
from bertforge.training.summary import NUMBER, JsonRecord, check_kind, key

_RUN_KEYS = {"name": (str,), "lr": NUMBER, "seed": (int,), "value": NUMBER}


@dataclass(kw_only=True)
class FinetuneReport(JsonRecord):
    """A fine-tuning run's metrics.json. `eval` is the kept predictor's metrics on the first eval set; `runs` has
    one {"name", "lr", "seed", "value", "steps", "seconds", "eval"} per (learning rate, restart)."""

    FILE: ClassVar[str] = RESULTS
    task: str | None = key((str, type(None)), None)  # every key may be missing: a teacher's older report still
    main_metric: str | None = key((str, type(None)), None)  # gives its settings to `bertforge distill`
    note: str | None = key((str, type(None)), None)
    files: dict[str, Any] | None = key((dict, type(None)), None)
    n_train_examples: int = key(int, 0)
    n_train_features: int = key(int, 0)
    eval: dict[str, Any] = key(dict, factory=dict)
    best_run: dict[str, Any] | None = key((dict, type(None)), None)
    runs: list[dict[str, Any]] = key(list, factory=list)
    summary: dict[str, Any] = key(dict, factory=dict)    # median, min, max, stdev, n_runs of the runs' values
    settings: dict[str, Any] = key(dict, factory=dict)   # the FinetuneSettings record
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def eval_set(self, name: str) -> dict[str, Any] | None:
        """The metrics of eval set `name` ("eval" is the first; others, such as "eval_dev_mismatched", follow)."""
        value = self.eval if name == "eval" else self.extra.get(name)
        return value if isinstance(value, dict) else None

    def _check(self, where: str, prefix: str) -> None:
        for i, run in enumerate(self.runs):
            check_kind(run, (dict,), f"{where}key 'runs[{i}]'")
            for name, kinds in _RUN_KEYS.items():
                if name in run:
                    check_kind(run[name], kinds, f"{where}key 'runs[{i}].{name}'")
            check_kind(run.get("eval", {}), (dict,), f"{where}key 'runs[{i}].eval'")


def read_finetune_report(folder: str | Path) -> FinetuneReport:
    """The metrics.json in a fine-tuned predictor `folder` (FileNotFoundError/ValueError naming file and key)."""
    return FinetuneReport.from_json(Path(folder) / FinetuneReport.FILE)

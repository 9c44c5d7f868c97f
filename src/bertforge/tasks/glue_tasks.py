"""One row per GLUE task: where its files keep each column, its labels, its official metrics and how tables
name it. Everything GLUE-specific elsewhere (the reader, the task registry, the scores, the reports, the
ablation tables) is read from these rows, so a GLUE-like task is one row here.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GLUE", "GlueFormat", "GlueTask", "METRIC_SHORT", "glue_task", "normalize_task_name"]

#: How a table heading abbreviates each official metric ("MRPC (F1/acc)").
METRIC_SHORT = {"mcc": "MCC", "f1": "F1", "accuracy": "acc", "pearson": "P", "spearman": "S",
                "accuracy_matched": "m", "accuracy_mismatched": "mm"}


@dataclass(frozen=True)
class GlueFormat:
    """Where a GLUE task keeps its text, pair, label and id columns (by header name)."""

    text: str
    pair: str | None
    label: str
    labels: tuple[str, ...] | None  # canonical order; None = regression
    ids: tuple[str, ...] = ("index", "id")
    headerless: tuple[str, ...] | None = None  # column names when train/dev have no header (CoLA)
    score_range: tuple[float, float] | None = None


@dataclass(frozen=True)
class GlueTask:
    """A GLUE task. `metrics` are the official ones in the leaderboard's order (the task's score is their mean);
    `main` is the one a single number reports (BERT's Table 1: F1 for MRPC/QQP, Spearman for STS-B); a task
    outside the benchmark average (WNLI) has `averaged=False`."""

    name: str
    display: str            # how the benchmark writes it; also the task's folder under glue/
    format: GlueFormat
    metrics: tuple[str, ...]
    main: str
    dev: tuple[str, ...] = ("dev.tsv",)
    test: tuple[str, ...] = ("test.tsv",)
    averaged: bool = True

    @property
    def labels(self) -> tuple[str, ...] | None:
        return self.format.labels

    @property
    def heading(self) -> str:
        """The column heading of a table: the name, and the metrics when they are not plain accuracy."""
        if self.metrics == ("accuracy",):
            return self.display
        return f"{self.display} ({'/'.join(METRIC_SHORT[m] for m in self.metrics)})"


_BINARY = ("0", "1")
_NLI2 = ("entailment", "not_entailment")
_ROWS = (
    GlueTask("cola", "CoLA", GlueFormat("sentence", None, "label", _BINARY,
                                        headerless=("source", "label", "star", "sentence")), ("mcc",), "mcc"),
    GlueTask("sst2", "SST-2", GlueFormat("sentence", None, "label", _BINARY), ("accuracy",), "accuracy"),
    GlueTask("mrpc", "MRPC", GlueFormat("#1 String", "#2 String", "Quality", _BINARY), ("f1", "accuracy"), "f1"),
    GlueTask("stsb", "STS-B", GlueFormat("sentence1", "sentence2", "score", None, score_range=(0.0, 5.0)),
             ("pearson", "spearman"), "spearman"),
    GlueTask("qqp", "QQP", GlueFormat("question1", "question2", "is_duplicate", _BINARY), ("f1", "accuracy"), "f1"),
    GlueTask("mnli", "MNLI", GlueFormat("sentence1", "sentence2", "gold_label",
                                        ("contradiction", "entailment", "neutral")),
             ("accuracy_matched", "accuracy_mismatched"), "accuracy",
             dev=("dev_matched.tsv", "dev_mismatched.tsv"), test=("test_matched.tsv", "test_mismatched.tsv")),
    GlueTask("qnli", "QNLI", GlueFormat("question", "sentence", "label", _NLI2), ("accuracy",), "accuracy"),
    GlueTask("rte", "RTE", GlueFormat("sentence1", "sentence2", "label", _NLI2), ("accuracy",), "accuracy"),
    GlueTask("wnli", "WNLI", GlueFormat("sentence1", "sentence2", "label", _BINARY), ("accuracy",), "accuracy",
             averaged=False),
)
#: The tasks in the benchmark's order, by name.
GLUE: dict[str, GlueTask] = {row.name: row for row in _ROWS}


def normalize_task_name(name: str) -> str:
    """`SST-2`, `sts_b`, `MNLI` -> `sst2`, `stsb`, `mnli`: the spellings people actually use."""
    return name.lower().replace("-", "").replace("_", "")


def glue_task(name: str) -> GlueTask:
    """The row of `name` (`SST-2`, `sts_b` and `MNLI` spelt any usual way)."""
    key = normalize_task_name(name)
    if key not in GLUE:
        raise KeyError(f"unknown GLUE task {name!r}; known: {', '.join(GLUE)}")
    return GLUE[key]

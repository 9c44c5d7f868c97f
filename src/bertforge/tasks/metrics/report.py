"""Per-class scores and a confusion matrix of one classification or NER evaluation, as files and as a table.

A headline accuracy hides which classes a model confuses; this module writes what shows it, next to
`metrics.json`: `classification_report.json` (`per_class`: name -> precision, recall, f1, support; `macro avg`,
`weighted avg`, `accuracy`; read back by `read_classification_report` as a `ClassificationReport`),
`confusion_matrix.csv` (rows = true, columns = predicted, the label names as first row and column) and
`confusion_matrix.png`, plus the text table the CLI prints (sklearn's layout). Classes are the task's own label
names in the task's label order, and every one of them has a row and a column even when the data never shows or
predicts it. NER is scored per entity type, as seqeval counts entities (its `micro avg` added), with token
accuracy; its matrix counts word-level tags. scikit-learn, seqeval and matplotlib are imported when a report is
made, not with the module (start-up time of every command).
"""
from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Sequence

import numpy as np

from bertforge.atomic import atomic_path
from bertforge.tasks.heads import HEADS
from bertforge.training.summary import NUMBER, JsonRecord, key

REPORT_FILE = "classification_report.json"
MATRIX_CSV = "confusion_matrix.csv"
MATRIX_PNG = "confusion_matrix.png"
REPORT_FILES = (REPORT_FILE, MATRIX_CSV, MATRIX_PNG)
AVERAGES = ("micro avg", "macro avg", "weighted avg")
#: The heads whose evaluations get a report (regression, QA and multiple choice have none).
REPORT_HEADS = tuple(name for name, head in HEADS.items() if head.report)
CORNER = "true\\predicted"  # the first cell of the CSV: what the rows and columns are


@dataclass(kw_only=True)
class ClassScores(JsonRecord):
    """One row of classification_report.json: a class's (or an average's) precision, recall, F1 and support."""

    FILE: ClassVar[str] = REPORT_FILE
    precision: float = key(NUMBER)
    recall: float = key(NUMBER)
    f1: float = key(NUMBER)
    support: int = key(int)
    extra: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(kw_only=True)
class ClassificationReport(JsonRecord):
    """classification_report.json: `per_class` (name -> scores, in the task's label order), the averages by the
    names sklearn and seqeval give them (`micro avg` for NER, then `macro avg` and `weighted avg`, the last two
    always there) and `accuracy`, in that order in the file."""

    FILE: ClassVar[str] = REPORT_FILE
    per_class: dict[str, ClassScores] = key(dict)
    averages: dict[str, ClassScores] = field(default_factory=dict)  # keys of their own in the file
    accuracy: float = key(NUMBER)
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def macro(self) -> ClassScores:
        return self.averages["macro avg"]

    @property
    def weighted(self) -> ClassScores:
        return self.averages["weighted avg"]

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"per_class": {name: row.to_dict() for name, row in self.per_class.items()}}
        data.update((name, row.to_dict()) for name, row in self.averages.items())
        data["accuracy"] = self.accuracy
        data.update(self.extra)
        return data

    def _check(self, where: str, prefix: str) -> None:
        source = where[:-2] or None
        self.per_class = {name: row if isinstance(row, ClassScores) else
                          ClassScores.from_dict(row, source, f"{prefix}per_class.{name}.")
                          for name, row in self.per_class.items()}
        for name in ("macro avg", "weighted avg"):
            if name not in self.averages and name not in self.extra:
                raise ValueError(f"{where}key {prefix + name!r} is missing")
        found = [name for name in self.extra if name in AVERAGES]  # in the file's order
        self.averages.update((name, ClassScores.from_dict(self.extra.pop(name), source, f"{prefix}{name}."))
                             for name in found)


def read_classification_report(folder: str | Path, tag: str = "") -> ClassificationReport:
    """The classification_report.json an evaluation wrote in `folder` (`tag`: a further eval set's, as
    `write_reports` names it: "-dev_mismatched" for MNLI's); FileNotFoundError or ValueError in one line naming the
    file and the key."""
    return ClassificationReport.from_json(Path(folder) / _tagged(REPORT_FILE, tag))


def _tagged(name: str, tag: str) -> str:
    return f"{Path(name).stem}{tag}{Path(name).suffix}"


@dataclass
class ClassReport:
    """One evaluation's report: the JSON dict, the confusion matrix and the label names of its rows/columns."""

    report: dict[str, Any]
    matrix: np.ndarray
    labels: list[str]

    def text(self, digits: int = 4) -> str:
        return format_report(self.report, digits)


def _scores(row: dict[str, Any]) -> dict[str, Any]:
    return {"precision": float(row["precision"]), "recall": float(row["recall"]), "f1": float(row["f1-score"]),
            "support": int(row["support"])}


def confusion_counts(gold: Sequence[str], predicted: Sequence[str], labels: Sequence[str]) -> np.ndarray:
    """Counts [true, predicted] over `labels` in their order (a name outside `labels` is an error)."""
    from sklearn.metrics import confusion_matrix
    names = list(labels)
    unknown = sorted(set(gold).union(predicted) - set(names))
    if unknown:
        raise ValueError(f"labels {unknown[:5]} are not among the task's labels {names}")
    return confusion_matrix(list(gold), list(predicted), labels=names).astype(np.int64)


def label_report(gold: Sequence[str], predicted: Sequence[str], labels: Sequence[str]) -> ClassReport:
    """Per-class scores of single-label predictions; `labels` fixes the classes and their order."""
    from sklearn.metrics import accuracy_score, classification_report
    if len(gold) != len(predicted) or not gold:
        raise ValueError(f"{len(predicted)} predictions for {len(gold)} labels (need as many, at least one)")
    names = list(labels)
    matrix = confusion_counts(gold, predicted, names)
    raw = classification_report(list(gold), list(predicted), labels=names, output_dict=True, zero_division=0)
    report = {"per_class": {name: _scores(raw[name]) for name in names},
              "macro avg": _scores(raw["macro avg"]), "weighted avg": _scores(raw["weighted avg"]),
              "accuracy": float(accuracy_score(list(gold), list(predicted)))}
    return ClassReport(report, matrix, names)


def entity_types(tags: Sequence[str]) -> list[str]:
    """Entity types of an IOB tag list in the order they first appear (`B-PER`, `I-PER` -> `PER`)."""
    return list(dict.fromkeys(t.split("-", 1)[1] for t in tags if "-" in t))


def entity_report(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]],
                  labels: Sequence[str]) -> ClassReport:
    """Per-entity-type scores (seqeval, default conlleval mode) and the word-level tag matrix over `labels`.

    Types are ordered as the task's tags name them; a type with neither gold nor predicted entities has no
    row (seqeval gives it none, and its averages leave it out)."""
    from seqeval.metrics import accuracy_score, classification_report
    y_true, y_pred = [list(s) for s in gold], [list(s) for s in predicted]
    if len(y_true) != len(y_pred) or any(len(t) != len(p) for t, p in zip(y_true, y_pred)):
        raise ValueError("predicted and gold tag sequences differ in number or length")
    raw = classification_report(y_true, y_pred, output_dict=True, zero_division=0)
    seen = [name for name in raw if name not in AVERAGES]
    order = [t for t in entity_types(labels) if t in seen] + [t for t in seen if t not in entity_types(labels)]
    report: dict[str, Any] = {"per_class": {name: _scores(raw[name]) for name in order}}
    report.update({avg: _scores(raw[avg]) for avg in AVERAGES if avg in raw})
    report["accuracy"] = float(accuracy_score(y_true, y_pred))
    flat_true = [t for s in y_true for t in s]
    flat_pred = [t for s in y_pred for t in s]
    return ClassReport(report, confusion_counts(flat_true, flat_pred, labels), list(labels))


def format_report(report: dict[str, Any], digits: int = 4) -> str:
    """The report as sklearn's text table: one row per class, then accuracy (or micro avg) and the averages."""
    averages = [avg for avg in AVERAGES if avg in report]
    names = list(report["per_class"])
    width = max([len(n) for n in names] + [len(a) for a in averages])
    head = f"{'':>{width}s} " + "".join(f" {h:>9}" for h in ("precision", "recall", "f1-score", "support"))
    lines = [head, ""]

    def row(name: str, s: dict[str, Any]) -> str:
        return (f"{name:>{width}s} " + "".join(f" {s[k]:>9.{digits}f}" for k in ("precision", "recall", "f1"))
                + f" {s['support']:>9}")
    lines += [row(name, report["per_class"][name]) for name in names]
    lines.append("")
    if "micro avg" not in report:
        total = sum(s["support"] for s in report["per_class"].values())
        lines.append(f"{'accuracy':>{width}s} " + f" {'':>9}" * 2 + f" {report['accuracy']:>9.{digits}f}"
                     + f" {total:>9}")
    lines += [row(avg, report[avg]) for avg in averages]
    return "\n".join(lines) + "\n"


def write_matrix_csv(path: Path, matrix: np.ndarray, labels: Sequence[str]) -> Path:
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow([CORNER, *labels])
        for name, counts in zip(labels, matrix):
            writer.writerow([name, *(int(c) for c in counts)])
    return path


def draw_matrix(path: Path, matrix: np.ndarray, labels: Sequence[str], title: str = "") -> Path:
    """The matrix as a picture: each cell's count written in it, its colour the share of its true class's row."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    n = len(labels)
    rows = matrix.sum(axis=1, keepdims=True)
    share = np.divide(matrix, rows, out=np.zeros(matrix.shape, dtype=float), where=rows > 0)
    side = min(max(4.0, 0.55 * n + 2.0), 30.0)
    fig, ax = plt.subplots(figsize=(side + 1.0, side))
    image = ax.imshow(share, cmap="Blues", vmin=0.0, vmax=1.0)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="share of the true class")
    if n <= 40:
        for i in range(n):
            for j in range(n):
                ax.text(j, i, str(int(matrix[i, j])), ha="center", va="center", fontsize=8,
                        color="white" if share[i, j] > 0.5 else "black")
    ax.set_xticks(range(n), list(labels), rotation=45, ha="right")
    ax.set_yticks(range(n), list(labels))
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_title(title or "confusion matrix", fontsize=10)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
    return path


def write_report(out_dir: str | Path, result: ClassReport, tag: str = "", title: str = "") -> list[Path]:
    """The three report files in `out_dir`; `tag` is added to each name (`-mismatched` for a second eval set)."""
    out = Path(out_dir)
    names = [_tagged(f, tag) for f in REPORT_FILES]
    report_path = ClassificationReport.from_dict(result.report).to_json(out / names[0])
    return [report_path, write_matrix_csv(out / names[1], result.matrix, result.labels),
            draw_matrix(out / names[2], result.matrix, result.labels, title)]


def evaluation_report(head: str, examples: Sequence[Any], predictions: Sequence[Any],
                      labels: Sequence[str] | None) -> ClassReport | None:
    """The report of a decoded evaluation: class ids (`sequence_classification`, gold in `ex.label`) or word tag
    lists (`token_classification`, gold in `ex.tags`); None for every other head (regression, QA, multiple
    choice) or without a label list."""
    row = HEADS.get(head)
    if not labels or not examples or row is None or not row.report:
        return None
    if row.gold == "label":
        names = list(labels)
        return label_report([str(ex.label) for ex in examples], [names[int(p)] for p in predictions], names)
    return entity_report([list(ex.tags) for ex in examples], predictions, labels)


def evaluation_reports(head: str, runs: dict[str, tuple[Sequence[Any], Any]],
                       labels: Sequence[str] | None) -> dict[str, ClassReport]:
    """{eval set: report} of evaluation runs ({name: (examples, run with `.predictions`)}, as
    `Predictor.evaluate(keep=...)` fills it); empty for heads that have no report."""
    found = {name: evaluation_report(head, examples, run.predictions, labels)
             for name, (examples, run) in runs.items()}
    return {name: r for name, r in found.items() if r is not None}


def write_reports(out_dir: str | Path, reports: dict[str, ClassReport]) -> list[Path]:
    """Every eval set's report files: the first set's with the plain names, further sets (MNLI mismatched) with
    `-<set>` added, as their predictions files are named."""
    written: list[Path] = []
    for i, (name, result) in enumerate(reports.items()):
        tag = "" if i == 0 else f"-{name.removeprefix('eval_')}"
        written += write_report(out_dir, result, tag, title=f"confusion matrix: {name}")
    return written


def report_tables(reports: dict[str, ClassReport]) -> dict[str, str]:
    return {name: result.text() for name, result in reports.items()}

"""Task name -> everything the fine-tuning loop needs: reader, files, head kind, labels, metric.

Calling conventions, the same for every task:
  `spec.reader(path, **options) -> ReadResult` (options: `skip_bad_rows`, ...; the generic tasks
  `classification`, `regression`, `ner` and `qa`, which read the user's own files, also take the
  column options and `label_list`/`label_source`, see `TaskSpec.generic`),
  `spec.metric(predictions, references, **options) -> dict[str, float]`, where references are
  label ids/names (GLUE, SWAG, classification), word-level tag lists (CoNLL) or the SQuAD
  examples/JSON (with `na_probs=` for squad2), and `spec.main_metric` names the headline key.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable, Sequence

from bertforge.data.records import input_kind
from bertforge.tasks.glue_tasks import GLUE, GlueTask
from bertforge.tasks.heads import HEADS, Head as Head, HeadKind  # Head, HEADS: also importable from here
from bertforge.tasks.metrics import (
    accuracy,
    glue_metrics,
    ner_metrics,
    pearson,
    spearman,
    squad_v1_evaluate,
    squad_v2_evaluate,
)
from bertforge.tasks.readers import (
    CONLL2003_LABELS,
    ReadResult,
    read_classification,
    read_glue,
    read_ner,
    read_qa,
    read_squad,
    read_swag,
)

#: Suffixes tried for a default file name given without one (user data can be any of these).
GENERIC_SUFFIXES = (".jsonl", ".csv", ".tsv", ".json", ".parquet", ".arrow")
NER_SUFFIXES = (".txt", ".conll", ".bio", ".iob", ".jsonl", ".json", ".tsv", ".parquet", ".arrow")
QA_SUFFIXES = (".json", ".jsonl", ".parquet", ".arrow")
#: A user's classification folder may hold `text;label` tables as .txt (the ktrain emotion layout): tried last,
#: and read as a table only when its header splits (the reader sniffs it).
TABLE_SUFFIXES = GENERIC_SUFFIXES + (".txt",)
#: Names tried, in order, for the dev file of a user's own data folder.
GENERIC_DEV_NAMES = ("dev", "valid", "validation", "val", "eval")


@dataclass(frozen=True)
class TaskSpec:
    """How to read, model and score one task.

    `labels` is the canonical label list (ids are positions in it); None where there is none
    (regression, QA) or where it comes from the user's train file (the generic tasks). For
    multiple choice it lists the choice indices. File names are relative to `folder`; a name
    without a suffix is tried with each of `suffixes`. `generic` tasks read the user's own files:
    their readers take the column options of `DataOptions`, and their label set comes from data.
    """

    name: str
    head: HeadKind
    reader: Callable[..., ReadResult]
    metric: Callable[..., dict[str, Any]]
    main_metric: str
    folder: str
    train_files: tuple[str, ...]
    dev_files: tuple[str, ...]
    test_files: tuple[str, ...] = ()
    labels: tuple[str, ...] | None = None
    suffixes: tuple[str, ...] = GENERIC_SUFFIXES
    generic: bool = False

    @property
    def num_labels(self) -> int | None:
        """Output size of the head: classes, 1 for regression, None when it depends on data or is a span."""
        if HEADS[self.head].regression:
            return 1
        return len(self.labels) if self.labels is not None else None

    def files(self, data_dir: str | Path, split: str = "train") -> list[Path]:
        """The split's files under `data_dir`, found in `data_dir/<folder>`, `data_dir/<last part of
        folder>` or `data_dir` itself (so the shared-data root, a `glue_data` folder and the task
        folder all work); `name.gz` is accepted for `name`. A generic task's dev file may also be
        called valid, validation or eval (the usual names of users' own splits), and its splits may be
        `datasets` save_to_disk folders (`train/`, `validation/` of a saved DatasetDict)."""
        names = {"train": self.train_files, "dev": self.dev_files, "test": self.test_files}.get(split)
        if names is None:
            raise ValueError(f"split must be 'train', 'dev' or 'test', got {split!r}")
        if not names:
            raise FileNotFoundError(f"task {self.name!r} has no default {split} file")
        root = Path(data_dir)
        dirs = list(dict.fromkeys([root / self.folder, root / Path(self.folder).name, root]))
        found = []
        for name in names:
            aliases = GENERIC_DEV_NAMES if self.generic and split == "dev" else (name,)
            tried = [d / cand for alias in aliases for d in dirs for cand in _candidates(alias, self.suffixes)]
            if self.generic:
                tried += [d / alias for alias in aliases for d in dirs]
            hit = next((p for p in tried if p.is_file() or (p.is_dir() and input_kind(p) == "datasets")), None)
            if hit is None:
                wanted = f"{' / '.join(aliases)}" + ("" if Path(name).suffix else f" + {' / '.join(self.suffixes)}")
                raise FileNotFoundError(f"{self.name} {split} file {name!r} not found: looked for {wanted} (or .gz) "
                                        f"in {', '.join(str(d) for d in dirs)}")
            found.append(hit)
        return found

    def read(self, data_dir: str | Path, split: str = "train", **options: Any) -> list[ReadResult]:
        """Read every file of a split (MNLI dev gives two results: matched, then mismatched)."""
        return [self.reader(path, **options) for path in self.files(data_dir, split)]


def _candidates(name: str, suffixes: tuple[str, ...] = GENERIC_SUFFIXES) -> list[str]:
    base = [name] if Path(name).suffix else [name + s for s in suffixes]
    return [c for b in base for c in (b, b + ".gz")]


def swag_metrics(predictions: Sequence[int], labels: Sequence[int]) -> dict[str, float]:
    """SWAG reports accuracy of the chosen ending."""
    return {"accuracy": accuracy(predictions, labels)}


def classification_metrics(predictions: Sequence, labels: Sequence) -> dict[str, float]:
    """User classification data: accuracy (the label set is unknown, so no positive class for F1)."""
    return {"accuracy": accuracy(predictions, labels)}


def regression_metrics(predictions: Sequence[float], labels: Sequence[float]) -> dict[str, float]:
    """User regression data: Pearson and Spearman correlation (as for STS-B) and mean squared error."""
    mse = sum((float(p) - float(y)) ** 2 for p, y in zip(predictions, labels)) / max(len(labels), 1)
    return {"pearson": pearson(predictions, labels), "spearman": spearman(predictions, labels), "mse": mse}


def _glue(row: GlueTask) -> TaskSpec:
    return TaskSpec(
        name=row.name, head="regression" if row.labels is None else "sequence_classification",
        reader=partial(read_glue, row.name), metric=partial(glue_metrics, row.name), main_metric=row.main,
        folder=f"glue/{row.display}", train_files=("train.tsv",), dev_files=row.dev, test_files=row.test,
        labels=row.labels,
    )


TASKS: dict[str, TaskSpec] = {
    **{name: _glue(row) for name, row in GLUE.items()},
    "squad": TaskSpec("squad", "question_answering", partial(read_squad, version="1.1"), squad_v1_evaluate,
                      "f1", "squad", ("train-v1.1.json",), ("dev-v1.1.json",)),
    "squad2": TaskSpec("squad2", "question_answering", partial(read_squad, version="2.0"), squad_v2_evaluate,
                       "f1", "squad", ("train-v2.0.json",), ("dev-v2.0.json",)),
    # CoNLL-2003 as published (column text) or as `datasets` has it (records of tokens and ner_tags)
    "conll2003": TaskSpec("conll2003", "token_classification", partial(read_ner, label_list=CONLL2003_LABELS),
                          ner_metrics, "f1", "conll2003",
                          ("train.txt",), ("valid.txt",), ("test.txt",), tuple(CONLL2003_LABELS)),
    "swag": TaskSpec("swag", "multiple_choice", read_swag, swag_metrics, "accuracy", "swag",
                     ("train.csv",), ("val.csv",), ("test.csv",), ("0", "1", "2", "3")),
    # The user's own data (flags --text-column, --label-column, ... choose the columns).
    "classification": TaskSpec("classification", "sequence_classification", read_classification,
                               classification_metrics, "accuracy", ".", ("train",), ("dev",), ("test",),
                               suffixes=TABLE_SUFFIXES, generic=True),
    "regression": TaskSpec("regression", "regression", partial(read_classification, regression=True),
                           regression_metrics, "spearman", ".", ("train",), ("dev",), ("test",),
                           suffixes=TABLE_SUFFIXES, generic=True),
    "ner": TaskSpec("ner", "token_classification", read_ner, ner_metrics, "f1", ".", ("train",), ("dev",),
                    ("test",), suffixes=NER_SUFFIXES, generic=True),
    "qa": TaskSpec("qa", "question_answering", read_qa, squad_v1_evaluate, "f1", ".", ("train",), ("dev",),
                   ("test",), suffixes=QA_SUFFIXES, generic=True),
}

_ALIASES = {"sst": "sst2", "stsbenchmark": "stsb", "conll": "conll2003", "squad1": "squad", "squadv1": "squad",
            "squad11": "squad", "squadv11": "squad", "squadv2": "squad2", "squad20": "squad2",
            "squadv20": "squad2", "text": "classification", "textclassification": "classification",
            "tokenclassification": "ner", "questionanswering": "qa", "extractiveqa": "qa"}


def get_task(name: str) -> TaskSpec:
    """Look a task up by any usual spelling (`SST-2`, `sts_b`, `CoNLL-2003`, `squad_v2`)."""
    key = name.lower().replace("-", "").replace("_", "").replace(".", "")
    key = _ALIASES.get(key, key)
    if key not in TASKS:
        raise KeyError(f"unknown task {name!r}; known: {', '.join(TASKS)}")
    return TASKS[key]

"""A task's examples: the train set and the eval sets, from the task's standard files or the user's own."""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bertforge.tasks.readers import split_squad_by_article
from bertforge.tasks.registry import TaskSpec


@dataclass
class TaskData:
    train: list[Any]
    evals: dict[str, list[Any]]  # name -> examples; the first is the one runs are chosen on
    labels: list[str] | None
    note: str = ""
    files: dict[str, str] = field(default_factory=dict)


# ---- data ------------------------------------------------------------------------------------------------------
def subset(items: list[Any], n: int | None, seed: int | None) -> list[Any]:
    """The first n (eval, so numbers are comparable) or a seeded random n in file order (train)."""
    if n is None or n >= len(items):
        return items
    if seed is None:
        return items[:n]
    keep = sorted(random.Random(seed).sample(range(len(items)), n))
    return [items[i] for i in keep]


def load_task_data(spec: TaskSpec, data: str | None = None, train_file: str | None = None,
                   eval_file: str | None = None, *, skip_bad_rows: bool = False, need_train: bool = True,
                   eval_split: str = "dev") -> TaskData:
    """Find and read the train and eval examples of a task.

    `train_file`/`eval_file` win; otherwise `data` is a folder holding the task's standard files. For
    SQuAD a single JSON file as `data` (only the v1.1 dev set exists offline) is split by article: 0-37
    train, 38-47 eval, and `note` says so, because such numbers are not official dev results.
    """
    opts = {"skip_bad_rows": skip_bad_rows}
    qa = spec.head == "question_answering"
    if qa and data and Path(data).is_file() and not train_file and not eval_file:
        result = spec.reader(data, **opts)
        n = result.n_articles
        cut = round(n * 38 / 48)
        train, dev = split_squad_by_article(result.examples, range(0, cut), range(cut, n))
        note = (f"SQuAD article split of {Path(data).name}: trained on articles 0-{cut - 1}, evaluated on "
                f"articles {cut}-{n - 1} (not the official train/dev protocol)")
        return TaskData(train, {"eval": dev}, None, note, {"train": str(data), "eval": str(data)})
    files: dict[str, str] = {}
    train_paths: list[Path] = []
    if train_file:
        train_paths = [Path(train_file)]
    elif need_train:
        if not data:
            raise ValueError("give --data (the task's folder) or --train FILE")
        train_paths = spec.files(data, "train")
    if eval_file:
        eval_paths = [Path(eval_file)]
    else:
        if not data:
            raise ValueError("give --data (the task's folder) or --eval FILE")
        eval_paths = spec.files(data, eval_split)
    train: list[Any] = []
    labels = list(spec.labels) if spec.labels is not None else None
    if train_paths:
        result = spec.reader(train_paths[0], **opts)
        train = list(result.examples)
        files["train"] = str(train_paths[0])
        if labels is None and spec.head == "sequence_classification":
            labels = list(result.labels or [])
    evals: dict[str, list[Any]] = {}
    for i, path in enumerate(eval_paths):
        eval_opts = dict(opts)
        if spec.name == "classification" and labels:
            eval_opts["label_list"] = labels
        result = spec.reader(path, **eval_opts)
        if labels is None and spec.head == "sequence_classification":
            labels = list(result.labels or [])
        name = "eval" if i == 0 else f"eval_{Path(path).name.split('.')[0]}"
        evals[name] = list(result.examples)
        files[name] = str(path)
    return TaskData(train, evals, labels, "", files)

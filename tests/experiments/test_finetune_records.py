"""experiments/finetune_records.py: the records of finetune_results.sh's bertforge runs (group results-finetuning)
are what the run folders hold, at the lr the grid chose, and each median is the median of its three seeds.

The folders are the ones the script's steps leave, written with their owners' writers (metrics.json of `bertforge
finetune` and `bertforge evaluate`, classification_report.json) with planted scores: one real run of the smallest
task takes seconds, and the table reads 30 of them. RTE's and WNLI's majority classes are counted in the real dev sets.
"""
from __future__ import annotations

import json
import random
import statistics

import pytest

from published_records import assert_published

import finetune_records as fr  # noqa: E402

SEEDS = (42, 43, 44)
STEPS = ["seeds-mrpc", "extra-seeds", "sst2-full", "seeds-long", "cola-grid", "rte-grid", "seeds-conll", "wnli",
         "conll-test"]
# row of the seeds table -> (its folders by seed, metrics.json keys, score scale) as finetune_results.sh names them,
# CoLA's and RTE's at the lr that wins their planted grid
ROWS = {"mrpc": ({s: "mrpc_3seeds" for s in SEEDS}, ("accuracy", "f1"), 1.0),
        "sst2-8k": ({s: f"sst2_8k_s{s}" for s in SEEDS}, ("accuracy",), 1.0),
        "sst2-full": ({s: f"sst2_full_s{s}" for s in SEEDS}, ("accuracy",), 1.0),
        "cola": ({s: f"cola_lr5e-5_s{s}" for s in SEEDS}, ("mcc",), 1.0),
        "sts-b": ({s: f"stsb_s{s}" for s in SEEDS}, ("pearson", "spearman"), 1.0),
        "rte": ({s: f"rte_lr4e-5_s{s}" for s in SEEDS}, ("accuracy",), 1.0),
        "wnli": ({s: "wnli_3seeds" for s in SEEDS}, ("accuracy",), 1.0),
        "conll2003": ({s: f"conll_s{s}" for s in SEEDS}, ("f1",), 1.0),
        "squad": ({s: f"squad_full256_e1_s{s}" for s in SEEDS}, ("exact_match", "f1"), 100.0)}  # percentages
# the grids' seed-42 runs beside them: (task, key, {lr: score}), 5e-5 winning CoLA's and 4e-5 RTE's
GRIDS = (("cola", "mcc", {"2e-5": 0.20, "5e-5": 0.27, "4e-5": 0.25, "3e-5": 0.22}),
         ("rte", "accuracy", {"2e-5": 0.52, "5e-5": 0.53, "4e-5": 0.55, "3e-5": 0.54}))


def planted(folder: str, seed: int, key: str) -> float:
    """A score of its own for each folder, seed and metric, in [0, 1)."""
    return random.Random(f"{folder}/{seed}/{key}").random()


def write_run(runs, name: str, scores: dict[int, dict], model, truth: dict) -> None:
    """A fine-tuning folder's metrics.json, one run per seed (a --restarts folder has three), through its writer;
    `truth[folder, seed, key]` is what it holds."""
    from bertforge.tasks.finetune_report import FinetuneReport
    truth.update({(name, seed, key): value for seed, metrics in scores.items() for key, value in metrics.items()})
    folder = runs / name
    folder.mkdir(parents=True, exist_ok=True)
    entries = [{"name": f"lr2e-05_seed{seed}", "lr": 2e-5, "seed": seed, "value": 0.0, "steps": 10, "seconds": 1.0,
                "eval": metrics} for seed, metrics in scores.items()]
    FinetuneReport(task="t", main_metric="m", n_train_examples=100, eval=entries[0]["eval"],
                   best_run={k: entries[0][k] for k in ("name", "lr", "seed", "value")}, runs=entries,
                   settings={"model": str(model), "epochs": 3.0}).to_json(folder / FinetuneReport.FILE)


def plant_runs(runs, model, grids=GRIDS) -> dict:
    """Every folder the records read; returns {(folder, seed, metrics.json key): the score it holds}."""
    truth: dict = {}
    for folders, keys, scale in ROWS.values():
        for name in set(folders.values()):
            seeds = [s for s, f in folders.items() if f == name]
            write_run(runs, name, {s: {k: scale * planted(name, s, k) for k in keys} for s in seeds}, model, truth)
    for task, key, by_lr in grids:  # the seed-42 run of the winning lr is a row's too: its grid score replaces it
        for lr, score in by_lr.items():
            write_run(runs, f"{task}_s42" if lr == "2e-5" else f"{task}_lr{lr}_s42", {42: {key: score}}, model, truth)
    for seed in (43, 44):  # CoLA at lr 2e-5 (extra-seeds)
        write_run(runs, f"cola_s{seed}", {seed: {"mcc": planted(f"cola_s{seed}", seed, "mcc")}}, model, truth)
    from bertforge.tasks.metrics.report import REPORT_FILE, ClassificationReport, ClassScores

    def scores(f1: float) -> ClassScores:
        return ClassScores(precision=f1, recall=f1, f1=f1, support=10)
    ClassificationReport(per_class={name: scores(planted("conll_s42", 42, name)) for name in ("PER", "ORG", "LOC", "MISC")},
                         averages={name: scores(0.5) for name in ("micro avg", "macro avg", "weighted avg")},
                         accuracy=0.9).to_json(runs / "conll_s42" / REPORT_FILE)
    from bertforge.evaluation.evaluation_report import EvaluationReport
    (runs / "conll_s42_test").mkdir()
    EvaluationReport(task="conll2003", files={"eval": "../shared/data/conll2003/test.txt"},
                     eval={"f1": 0.8325, "n_gold": 5648, "n_examples": 3453}).to_json(
        runs / "conll_s42_test" / EvaluationReport.FILE)
    return truth


@pytest.mark.slow
def test_records_are_the_published_ones(shared_data, minilm_dir, tmp_path):
    runs, store = tmp_path / "ft", tmp_path / "store"
    truth = plant_runs(runs, minilm_dir)
    assert fr.main(["--runs", str(runs), "--data", str(shared_data), "--records", str(store), *STEPS]) == 0
    written = assert_published(store, *(f"results-finetuning/{part}/" for part in (
        "finetune-seeds", "cola-lr2e-5", "rte-lr2e-5", "rte", "wnli", "conll2003")))
    for row, (folders, keys, scale) in ROWS.items():
        for n, key in enumerate(keys, 1):
            part = f"/{n}" if len(keys) > 1 else ""
            values = [written[f"results-finetuning/finetune-seeds/{row}/seed{s}{part}"].value for s in SEEDS]
            assert values == pytest.approx([100 / scale * truth[folders[s], s, key] for s in SEEDS])
            median = written[f"results-finetuning/finetune-seeds/{row}/median{part}"]
            assert (median.value, median.seeds) == (statistics.median(values), 3)
    for seed in SEEDS:
        assert written[f"results-finetuning/cola-lr2e-5/seed{seed}"].value == pytest.approx(
            100 * truth[f"cola_s{seed}", seed, "mcc"])
    assert written["results-finetuning/rte-lr2e-5/seed42"].value == pytest.approx(52.0)
    assert written["results-finetuning/rte/majority"].value == pytest.approx(100 * 146 / 277)
    assert written["results-finetuning/wnli/majority"].value == pytest.approx(100 * 40 / 71)
    for name in ("PER", "ORG", "LOC", "MISC"):
        assert written[f"results-finetuning/conll2003/seed42/{name.lower()}"].value == pytest.approx(
            100 * planted("conll_s42", 42, name))
    test = written["results-finetuning/conll2003/seed42/test"]
    assert test.value == pytest.approx(83.25)
    assert test.command == (f"bertforge evaluate --model {runs}/conll_s42 --task conll2003 --data ../shared/data "
                            f"--split test --output {runs}/conll_s42_test")
    seeds = written["results-finetuning/finetune-seeds/cola/seed42"]
    assert seeds.command == "bash experiments/finetune_results.sh " + " ".join(STEPS)
    assert seeds.data == "../shared/data (GLUE dev, CoNLL-2003 valid.txt, SQuAD v1.1 dev split by article)"
    published = json.loads((fr.REPO / "docs" / "results" / "results-finetuning.json").read_text())["tables"]
    assert json.loads((store / "results-finetuning.json").read_text())["tables"] == {fr.TABLE: published[fr.TABLE]}


def test_the_grid_choice_picks_the_folders_and_one_step_writes_its_own(shared_data, minilm_dir, tmp_path, capsys):
    """2e-5 winning CoLA's grid: its seeds are the lr-2e-5 folders of extra-seeds (as the script then runs no
    others), --best-lr says so, and cola-grid alone writes CoLA's records without the whole table."""
    runs, store = tmp_path / "ft", tmp_path / "store"
    plant_runs(runs, minilm_dir, grids=(("cola", "mcc", {"2e-5": 0.30, "5e-5": 0.27}), GRIDS[1]))
    assert fr.main(["--runs", str(runs), "--best-lr", "cola"]) == 0
    assert capsys.readouterr().out.strip() == "2e-5"
    assert fr.main(["--runs", str(runs), "--data", str(shared_data), "--records", str(store), "cola-grid"]) == 0
    data = json.loads((store / "results-finetuning.json").read_text())
    values = {r["id"]: r["value"] for r in data["records"]}
    seeds = [values[f"results-finetuning/finetune-seeds/cola/seed{s}"] for s in SEEDS]
    assert seeds == [values[f"results-finetuning/cola-lr2e-5/seed{s}"] for s in SEEDS]
    assert seeds == pytest.approx([30.0] + [100 * planted(f"cola_s{s}", s, "mcc") for s in (43, 44)])
    assert {rid.split("/")[1] for rid in values} == {"finetune-seeds", "cola-lr2e-5"} and "tables" not in data

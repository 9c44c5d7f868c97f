"""The demo's published numbers as results-store records (groups results-demo and demo), read from its run folders.

    python demo/records.py --out demo-output --records DIR [--run-seconds S] [--setup-seconds S]
    python demo/records.py --recipes RUN... --data SHARDS --records DIR

The first form reads a finished demo's output folder (`DEMO_RECORDS=DIR make demo` runs it at the end of
demo/run.sh): the classifier's accuracy on its dev sentences (sentiment-model), the steps and held-out loss of the
tiny model's four-minute budget (tiny-fast; a run given a step count instead is not that run, and is left out), and
MiniLM's continued pre-training (minilm-reviews: its CPU time, the held-out loss at steps 50, 100 and 150). With
--run-seconds (demo/run.sh's own time) and --setup-seconds (the .venv set-up, which runs before it) it also records
`make demo` from a fresh clone, whose wall time is the two together:

    rm -rf .venv demo-output; s=$(date +%s); make .venv/.installed-core
    DEMO_SETUP_SECONDS=$(( $(date +%s) - s )) DEMO_RECORDS=DIR make demo

The second form reads the separate `bertforge pretrain` runs of docs/RESULTS.md's recipes table on the demo's
corpus (one run per row, each found by its run_config.json): steps and sequences from its training summary, and
the recipe race's held-out questions (experiments/recipe_race.py: MLM loss and accuracy, fill-mask top-5 hit rate,
the same for every model) and the table's fill-mask probe asked of its final weights. The `--recipe fast --init
model`, batch 8 run's steps are also demo/four-minutes/steps (README.md cites them).
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GROUP, DEMO_GROUP = "results-demo", "demo"
BUDGET_SECONDS = 240.0  # demo/run.sh's default DEMO_PRETRAIN_BUDGET (4m): the make-demo records are that run's
LOSS_STEPS = (50, 100, 150)  # the continued pre-training's held-out losses docs/RESULTS.md gives
WHAT = "the demo's corpus: BERT's layout against --recipe fast (tiny)"
PROBE = "the [MASK] of the film is set in new york ."
EVAL_BATCHES = 20  # the recipe race's default --eval-batches
# (row id, the table's cell, what the run's run_config.json holds, digits of its held-out MLM loss)
ROWS = (
    ("bert-layout-mlm-plus-nsp-batch-64", "BERT layout, MLM + NSP, batch 64",
     {"recipe": "bert", "objective": "mlm+nsp", "batch_size": 64}, 2),
    ("recipe-fast-init-model-batch-32", "`--recipe fast --init model`, batch 32",
     {"recipe": "fast", "init": "model", "batch_size": 32}, 2),
    ("recipe-fast-init-model-batch-16", "`--recipe fast --init model`, batch 16",
     {"recipe": "fast", "init": "model", "batch_size": 16}, 2),
    ("recipe-fast-init-model-batch-8", "`--recipe fast --init model`, batch 8",
     {"recipe": "fast", "init": "model", "batch_size": 8}, 3),
    ("recipe-fast-batch-8-1-874-steps", "**`--recipe fast`, batch 8, 1,874 steps**",
     {"recipe": "fast", "init": "bert", "batch_size": 8}, 3),
)
FOUR_MINUTES = "recipe-fast-init-model-batch-8"  # its steps are demo/four-minutes/steps


def corpus_data(shards: Path) -> str:
    """A record's `data`: the prepared corpus's documents and held-out documents (its manifest)."""
    from bertforge.data.shards import load_manifest
    manifest = load_manifest(shards)
    return (f"the demo's corpus ({manifest['counts']['documents']:,} movie reviews, "
            f"{manifest['splits']['heldout']['documents']:,} held out), demo/run.sh")


def make_records(out: Path, run_seconds: float | None, setup_seconds: float | None, command: str = "make demo") -> list:
    """The make-demo and continued-pretraining records of the finished demo in `out`."""
    from bertforge.outputs import read_run_config
    from bertforge.results_store import Record
    from bertforge.tasks.finetune_report import read_finetune_report
    from bertforge.training.metrics_log import read_metrics_log
    from bertforge.training.summary import TrainingSummary
    records = []

    def add(name: str, value: float, unit: str, what: str, data: str, digits: int) -> None:
        records.append(Record.measured(f"{GROUP}/{name}", value, unit, what, data, command=command, digits=digits))

    data = corpus_data(out / "shards")
    if run_seconds is not None and setup_seconds is not None:
        add("make-demo/wall", setup_seconds + run_seconds, "s",
            "make demo from a fresh clone: set-up of .venv and demo/run.sh", data, 0)
        add("make-demo/setup", setup_seconds, "s", "make demo from a fresh clone: the .venv set-up part", data, 0)
    elif run_seconds is not None:
        print("no --setup-seconds: make demo's wall and set-up times are not recorded")
    add("make-demo/accuracy", 100 * read_finetune_report(out / "sentiment-model").eval["accuracy"], "%",
        "accuracy of the demo's classifier (two fine-tuning epochs) on its 800 held-out sentences", data, 1)
    tiny = out / "tiny-fast"
    budget = ((read_run_config(tiny) or {}).get("train") or {}).get("time_budget")
    if budget == BUDGET_SECONDS:
        summary = TrainingSummary.from_json(tiny / TrainingSummary.FILE)
        add("make-demo/pretrain-steps", summary.step, "steps", "steps of 8 sequences the demo's tiny model makes in "
            "its four minutes of --recipe fast pre-training", data, 0)
        add("make-demo/heldout-loss", summary.final_eval["mlm_loss"], "loss",
            "held-out MLM loss of the demo's tiny model after its four minutes of pre-training", data, 2)
    else:
        print(f"{tiny} did not train for the demo's {BUDGET_SECONDS:.0f} s budget: its steps and loss are not recorded")
    minilm = out / "minilm-reviews"
    adapted, data = TrainingSummary.from_json(minilm / TrainingSummary.FILE), corpus_data(out / "shards-minilm")
    add("continued-pretraining/cpu-time", adapted.extra["cpu_seconds"], "s", f"CPU time of the {adapted.step} steps "
        "of continued pre-training of all-MiniLM-L6-v2 on the demo's reviews", data, 0)
    for entry in read_metrics_log(minilm):
        if entry.get("split") == "eval" and entry["step"] in LOSS_STEPS:
            add(f"continued-pretraining/loss-step{entry['step']}", entry["mlm_loss"], "loss",
                f"held-out MLM loss of all-MiniLM-L6-v2 continued on the demo's reviews, step {entry['step']}", data, 2)
    return records


def recipe_row(run: Path) -> str:
    """The recipes table's row that run folder `run` is, by the settings in its run_config.json."""
    from bertforge.outputs import read_run_config
    config = read_run_config(run) or {}
    found = [row for row, _, settings, _ in ROWS if all(config.get(k) == v for k, v in settings.items())]
    if len(found) != 1:
        raise SystemExit(f"{run}: not a run of the recipes table (its rows: "
                         + "; ".join(f"{cell} {settings}" for _, cell, settings, _ in ROWS) + ")")
    return found[0]


def measure_recipe(run: Path, data: Path) -> dict:
    """A recipes run's steps and sequences, the recipe race's held-out answers and the probe's top-5 answers."""
    from bertforge.generation.fill_mask import fill_mask
    from bertforge.generation.loading import load_mlm
    from bertforge.outputs import read_run_config
    from bertforge.training.summary import TrainingSummary
    spec = importlib.util.spec_from_file_location("recipe_race", REPO / "experiments" / "recipe_race.py")
    race = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(race)
    summary = TrainingSummary.from_json(run / TrainingSummary.FILE)
    held = race.evaluate_model(run, str(data), EVAL_BATCHES)
    model, tokenizer = load_mlm(str(run), device="cpu")
    (masks,) = fill_mask(model, tokenizer, [PROBE], top_k=5)
    return {"steps": summary.step, "sequences": summary.step * read_run_config(run)["batch_size"], **held,
            "answers": " ".join(token for token, _ in masks[0]["top"])}


def recipe_records(results: dict[str, dict], data: str, command: str) -> list:
    """The recipes table's records of `results` (row id -> measure_recipe's answer), demo/four-minutes/steps too."""
    from bertforge.results_store import Record
    records = []
    for row, cell, _, loss_digits in ROWS:
        result, label, rid = results[row], cell.replace("*", "").replace("`", ""), f"{GROUP}/recipes/{row}"
        if row == FOUR_MINUTES:
            records.append(Record.measured(f"{DEMO_GROUP}/four-minutes/steps", result["steps"], "steps",
                                           "steps --recipe fast (tiny, batch 8: the demo's settings) made in a "
                                           "5-minute budget", data, command=command, digits=0))
        else:
            records.append(Record.measured(f"{rid}/steps-sequences/1", result["steps"], "", f"{WHAT}: {label}, steps",
                                           data, command=command, digits=0))
        for name, column, value, unit, digits in (
                ("steps-sequences/2", "sequences (steps x batch size)", result["sequences"], "", 0),
                ("held-out-mlm-loss", "held-out MLM loss", result["mlm_loss"], "", loss_digits),
                ("mlm-acc", "MLM acc", 100 * result["mlm_acc"], "%", 1),
                ("fill-mask-top-5", "fill-mask top-5", 100 * result["top5"], "%", 1)):
            records.append(Record.measured(f"{rid}/{name}", value, unit, f"{WHAT}: {label}, {column}", data,
                                           command=command, digits=digits))
    return records


def recipes_table(answers: dict[str, str]) -> dict:
    """The published table's spec: every row's cells name its records, the last its run's answers to PROBE."""
    rows = []
    for row, cell, _, _ in ROWS:
        ref, mark = f"{GROUP}/recipes/{row}/", "**" if cell.startswith("**") else ""
        steps = "{demo/four-minutes/steps|bare}" if row == FOUR_MINUTES else f"{{{ref}steps-sequences/1}}"
        rows.append([cell, f"{steps} ({{{ref}steps-sequences/2}})",
                     *(f"{mark}{{{ref}{name}}}{mark}" for name in ("held-out-mlm-loss", "mlm-acc", "fill-mask-top-5")),
                     answers[row]])
    return {"header": ["run", "steps (sequences)", "held-out MLM loss", "MLM acc", "fill-mask top-5", f'"{PROBE}"'],
            "align": ["---"] * 6, "rows": rows}


def write_recipes(runs: list[Path], data: Path, folder: str, command: str) -> None:
    """Measure every row's run of the recipes table and write its records and the table."""
    from bertforge.results_store import write_records
    by_row: dict[str, Path] = {}
    for run in runs:
        row = recipe_row(run)
        if row in by_row:
            raise SystemExit(f"{run} and {by_row[row]} are both the recipes table's row {row!r}")
        by_row[row] = run
    missing = [cell for row, cell, _, _ in ROWS if row not in by_row]
    if missing:
        raise SystemExit(f"no run given for the recipes table's rows: {'; '.join(missing)}")
    results = {row: measure_recipe(run, data) for row, run in by_row.items()}
    records = recipe_records(results, corpus_data(data), command)
    write_records(GROUP, [r for r in records if r.id.startswith(f"{GROUP}/")], folder,
                  tables={"results-demo-recipes": recipes_table({row: r["answers"] for row, r in results.items()})})
    write_records(DEMO_GROUP, [r for r in records if r.id.startswith(f"{DEMO_GROUP}/")], folder)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--out", type=Path, help="a finished demo's output folder (demo/run.sh's DEMO_OUT)")
    what.add_argument("--recipes", type=Path, nargs="+", metavar="RUN", help="the recipes table's run folders")
    parser.add_argument("--data", type=Path, help="--recipes: the prepared demo corpus they were trained on")
    parser.add_argument("--run-seconds", type=float, help="--out: demo/run.sh's wall seconds")
    parser.add_argument("--setup-seconds", type=float, help="--out: the .venv set-up's seconds before it")
    parser.add_argument("--records", required=True, metavar="DIR", help="the results-store folder to write into")
    args = parser.parse_args(argv)
    from bertforge.measuring import portable_command
    from bertforge.results_store import write_records
    if args.recipes:
        if args.data is None:
            parser.error("--recipes needs --data (the shards the runs trained on)")
        command = portable_command("demo/records.py", list(sys.argv[1:] if argv is None else argv))
        write_recipes(args.recipes, args.data, args.records, command)
    else:
        write_records(GROUP, make_records(args.out, args.run_seconds, args.setup_seconds), args.records)
    print(f"records written to {args.records}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

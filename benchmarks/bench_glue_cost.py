"""What one GLUE fine-tuning run costs on one CPU core, per task, and so what `bertforge glue --protocol cpu`
(2,000 train examples x 3 epochs, the whole dev set) costs.

For each model and task, two real fine-tuning runs of one epoch — on N1 and N2 train examples, settings as the
suite's (`evaluation.units.finetune_settings`, protocol `cpu`) — give the training cost per example as the
difference of their CPU times over N2 - N1, after one warm-up run (what every run pays once — reading the data,
building the model, saving, drawing the curves — cancels out and is reported as the overhead); then the
fine-tuned predictor scores the whole dev set, which gives the cost per dev example. CPU seconds of this
one-threaded process are what an unshared core would take; wall seconds are shown beside them (on a shared
machine, wall is longer).

    OMP_NUM_THREADS=1 taskset -c 1 python benchmarks/bench_glue_cost.py [--models minilm,mini] [--n 64,320]
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from common import default_shared_data, machine_info, markdown_table, minilm_folder, start_process  # noqa: E402

TASKS = {"cola": "CoLA", "sst2": "SST-2", "mrpc": "MRPC", "stsb": "STS-B", "rte": "RTE"}


def mini_folder(root: Path) -> Path:
    """bertforge's `mini` size (L=4, H=256), randomly initialised, with MiniLM's uncased vocabulary."""
    from bertforge.model import BertModel
    from bertforge.model.auto import preset_config
    from bertforge.tokenization import BertTokenizer
    tokenizer = BertTokenizer.from_pretrained(minilm_folder())
    folder = root / "mini"
    BertModel(preset_config("mini", vocab_size=tokenizer.vocab_size)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def timed(call):
    cpu, wall = time.process_time(), time.perf_counter()
    value = call()
    return value, time.process_time() - cpu, time.perf_counter() - wall


def one_task(model: Path, task: str, glue: Path, sizes: tuple[int, int], root: Path) -> dict:
    from bertforge.evaluation.protocols import get_protocol
    from bertforge.evaluation.units import Unit, UnitContext, finetune_settings, planned_steps
    from bertforge.tasks.finetune import finetune
    from bertforge.tasks.predictor import Predictor
    from bertforge.tasks.registry import get_task
    runs = []
    for n in sizes:
        protocol = get_protocol("cpu", max_train_samples=n, epochs=1.0, max_eval_samples=1)
        unit = Unit(task, 42, protocol.learning_rates[0], str(root / f"{model.name}-{task}-{n}"), n,
                    planned_steps(n, protocol))
        report, cpu, wall = timed(lambda: finetune(finetune_settings(unit, UnitContext(str(model), str(glue), protocol,
                                                                                       device="cpu")),
                                                   say=lambda _line: None))
        runs.append({"n": report.n_train_examples, "cpu": cpu, "wall": wall, "train_wall": report.runs[0]["seconds"],
                     "folder": Path(unit.folder) / "run"})
    (small, large) = runs
    per_example = (large["cpu"] - small["cpu"]) / (large["n"] - small["n"])
    overhead = small["cpu"] - small["n"] * per_example
    predictor = Predictor.load(large["folder"], device="cpu", precision="fp32")
    report, eval_cpu, eval_wall = timed(lambda: predictor.evaluate(data=str(glue), task=task))
    n_dev = int(report["eval"]["n_examples"])
    n_train = len(get_task(task).read(glue)[0].examples)
    preset = min(n_train, 2000) * 3
    minutes = (overhead + preset * per_example + eval_cpu) / 60
    return {"task": task, "train ex/s (CPU)": 1 / per_example, "train ex/s (wall)": large["n"] / large["train_wall"],
            "dev ex/s (CPU)": n_dev / eval_cpu, "overhead s (CPU)": overhead, "dev examples": n_dev,
            "cpu preset: train passes": preset, "cpu preset: minutes (CPU)": minutes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="minilm,mini")
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--n", default="64,320", help="the two train sizes (examples, one epoch each)")
    parser.add_argument("--data", default=str(default_shared_data() / "glue"))
    parser.add_argument("--json", default=None, help="also write the rows here")
    args = parser.parse_args()
    start_process(1)
    import logging
    logging.disable(logging.WARNING)  # "newly initialised classifier" lines, once per run
    sizes = tuple(int(x) for x in args.n.split(","))
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-glue-") as tmp:
        root = Path(tmp)
        models = {"minilm": minilm_folder(), "mini": mini_folder(root)}
        # one run to warm up first: the lazy imports and caches of a process's first run are not a per-run cost
        one_task(models["mini"], "rte", Path(args.data), (8, 16), root / "warm-up")
        for name in args.models.split(","):
            for task in args.tasks.split(","):
                row = {"model": name, **one_task(models[name], task, Path(args.data), sizes, root)}
                print(json.dumps(row), flush=True)
                rows.append(row)
    headers = list(rows[0])
    print(markdown_table(headers, [[f"{r[h]:.1f}" if isinstance(r[h], float) else r[h] for h in headers] for r in rows]))
    for name in args.models.split(","):
        total = sum(r["cpu preset: minutes (CPU)"] for r in rows if r["model"] == name)
        print(f"{name}: the cpu preset over {args.tasks}: {total:.0f} CPU-minutes on one core")
    print(json.dumps(machine_info()))
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "machine": machine_info()}, indent=2))


if __name__ == "__main__":
    main()

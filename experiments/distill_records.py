"""The results-store records of "Distillation for serving" (group results-distillation, docs/RESULTS.md): the teacher
predictor and the student `bertforge distill task` made from it, read through their owners, and both timed again on
the same dev sentences.

    python experiments/distill_records.py [--teacher ../runs/kd/teacher-sst2] [--student ../runs/kd/student-sst2] \\
        [--data ../shared/data/glue/SST-2] [--rounds 3] [--threads 1] [--records DIR]

* layers: each predictor's config; parameters (M): the tensors of its weights file, counted from the safetensors
  headers (`bertforge.checkpoint`);
* the student's dev score and the share of the teacher's it keeps: the student folder's distill_report.json, where
  `bertforge distill task` scored both models on the same dev set (the library has no typed reader of that file; its
  own resume path reads it as JSON, as here);
* throughput: `bertforge.tasks.distill.measure_throughput`, what `distill task` times its report with: both predictors
  on the dev set's sentences, one warm-up call each, then `--rounds` rounds taking turns; each round's student
  examples/s over the teacher's, the median over the rounds and their range (the teacher is 1 by definition).

Prints the records; `--records DIR` also writes them (and the table) into DIR.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any, Sequence

REPO = Path(__file__).resolve().parents[1]
GROUP = "results-distillation"
TEACHER, STUDENT = "teacher (MiniLM fine-tuned)", "student (distilled)"
TEACHER_SCORE = "{results-finetuning/finetune-seeds/sst2-8k/seed42} %"  # the teacher's own fine-tuning record


def read_distill_report(folder: Path) -> dict[str, Any]:
    """The distill_report.json `bertforge distill task` wrote into the student `folder`, with the keys used here
    checked (FileNotFoundError / ValueError naming the file and the key)."""
    from bertforge.tasks.distill import REPORT_FILE
    path = folder / REPORT_FILE
    report = json.loads(path.read_text(encoding="utf-8"))
    metric = report.get("main_metric") if isinstance(report, dict) else None
    if not isinstance(metric, str) or not isinstance(report.get("task"), str):
        raise ValueError(f"{path}: no 'task' and 'main_metric' (not a distill task report?)")
    for who in ("teacher", "student"):
        if not isinstance((report.get(who) or {}).get(metric), (int, float)):
            raise ValueError(f"{path}: key '{who}.{metric}' is missing (a run without a dev set scores nothing)")
    return report


def count_parameters(folder: Path) -> int:
    """The number of values in the folder's weights (every tensor of its safetensors file or shards)."""
    from bertforge.checkpoint import find_weights, read_weight_shapes, resolve_folder
    return sum(math.prod(shape) for shape in read_weight_shapes(find_weights(resolve_folder(folder))).values())


def measure(teacher_dir: Path, student_dir: Path, data: Path, rounds: int) -> dict[str, Any]:
    """Layers, parameters and examples/s per round of both predictors, the scores of the student's report, the dev set."""
    from bertforge.tasks import distill
    from bertforge.tasks.predictor import Predictor
    from bertforge.tasks.task_data import load_task_data
    report = read_distill_report(student_dir)
    predictors = {"teacher": Predictor.load(teacher_dir, device="cpu"), "student": Predictor.load(student_dir, device="cpu")}
    if predictors["teacher"].spec.name != report["task"]:
        raise ValueError(f"{teacher_dir} was fine-tuned on {predictors['teacher'].spec.name}; the student on "
                         f"{report['task']}")
    dev = next(iter(load_task_data(report["task"], str(data), need_train=False).evals.values()))
    inputs = [ex.text if ex.text_pair is None else (ex.text, ex.text_pair) for ex in dev]
    batch = int((report.get("settings") or {}).get("eval_batch_size") or 64)  # what the run timed with
    rates = distill.measure_throughput(predictors, inputs, rounds, batch)
    metric = report["main_metric"]
    models = {who: {"layers": p.model.config.num_hidden_layers,
                    "parameters": count_parameters(teacher_dir if who == "teacher" else student_dir),
                    "score": float(report[who][metric]), "rates": rates[who]} for who, p in predictors.items()}
    return {"task": report["task"], "metric": metric, "dev": len(inputs), "rounds": rounds, **models}


def throughput_label(rounds: int) -> str:
    return f"inference throughput, median of {rounds} interleaved rounds (range)"


def display(task: str) -> str:
    from bertforge.evaluation.scores import DISPLAY
    return DISPLAY.get(task, task)


def score_label(task: str, metric: str) -> str:
    return f"{display(task)} dev {metric}"


def make_table(measured: dict[str, Any]) -> dict:
    """The docs' table: both models' layers, parameters, dev score (the teacher's from its fine-tuning) and throughput."""
    def row(name: str, who: str, score: str, speed: str) -> list[str]:
        return [name, f"{{{GROUP}/{who}/layers}}", f"{{{GROUP}/{who}/parameters}}", score, speed]
    student = f"{GROUP}/student"
    return {GROUP: {
        "header": ["model", "layers", "parameters (M)", score_label(measured["task"], measured["metric"]),
                   throughput_label(measured["rounds"])],
        "align": ["---", "---:", "---:", "---:", "---:"],
        "rows": [row(TEACHER, "teacher", TEACHER_SCORE, f"{{{GROUP}/teacher/throughput}}"),
                 row(STUDENT, "student", f"**{{{student}/{measured['task']}}}**",
                     f"**{{{student}/throughput}}** ({{{student}/throughput|range}})")]}}


def make_records(measured: dict[str, Any], data: str, command: str) -> list:
    """The group's records from what `measure` found (see the module)."""
    from bertforge.results_store import Record
    teacher, student = measured["teacher"], measured["student"]
    depth = "half-depth" if 2 * student["layers"] == teacher["layers"] else f"{student['layers']}-layer"
    lead = f"{display(measured['task'])} teacher distilled into a {depth} student"
    ratios = [s / t for s, t in zip(student["rates"], teacher["rates"])]
    speed = throughput_label(measured["rounds"])
    described = f"{data} (dev: {measured['dev']:,} sentences)"

    def record(rid: str, value: float, unit: str, what: str, digits: int, **extra: Any) -> Record:
        return Record.measured(f"{GROUP}/{rid}", value, unit, what, described, command=command, digits=digits, **extra)

    records = []
    for who, name in (("teacher", TEACHER), ("student", STUDENT)):
        row = measured[who]
        records += [record(f"{who}/layers", float(row["layers"]), "", f"{lead}: {name}, layers", 0),
                    record(f"{who}/parameters", row["parameters"] / 1e6, "", f"{lead}: {name}, parameters (M)", 2)]
    records += [
        record("teacher/throughput", 1.0, "x", f"{lead}: {TEACHER}, {speed}", 2),
        record("student/throughput", statistics.median(ratios), "x",
               f"{lead}: {STUDENT}, {speed} (the range over runs beside it)", 2, spread=(min(ratios), max(ratios))),
        record(f"student/{measured['task']}", 100 * student["score"], "%",
               f"{lead}: {STUDENT}, {score_label(measured['task'], measured['metric'])}", 2),
        record("score-kept", 100 * student["score"] / teacher["score"], "%",
               f"the distilled student's {score_label(measured['task'], measured['metric'])} as a share of the "
               "teacher's", 1),
        record("fewer-parameters", 100 * (1 - student["parameters"] / teacher["parameters"]), "%",
               f"share of the teacher's parameters the {depth} student does without", 0)]
    return records


def _portable(path: Path) -> str:
    """`path` as a record names it (`bertforge.measuring.portable_path`)."""
    from bertforge.measuring import portable_path
    return portable_path(path)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--teacher", type=Path, default=Path("../runs/kd/teacher-sst2"), help="the teacher predictor folder")
    p.add_argument("--student", type=Path, default=Path("../runs/kd/student-sst2"),
                   help="the `bertforge distill task` output (a predictor folder with distill_report.json)")
    p.add_argument("--data", type=Path, default=Path("../shared/data/glue/SST-2"), help="the task's folder (its dev set)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds (default: 3, as distill task)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default: 1, as the published run)")
    p.add_argument("--records", default=None, metavar="DIR", help=f"also write the records (group {GROUP}) into DIR")
    args = p.parse_args(argv)
    if args.rounds < 1 or args.threads < 1:
        p.error("--rounds and --threads must be at least 1")
    from bertforge.measuring import portable_command, start_process
    start_process(args.threads)
    measured = measure(args.teacher, args.student, args.data, args.rounds)
    command = portable_command("experiments/distill_records.py", list(sys.argv[1:] if argv is None else argv))
    records = make_records(measured, _portable(args.data), command)
    for r in records:
        print(f"{r.id}: {r.value:.{r.digits + 2}f} {r.unit}".rstrip())
    if args.records:
        from bertforge.results_store import write_records
        print(write_records(GROUP, records, args.records, tables=make_table(measured)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

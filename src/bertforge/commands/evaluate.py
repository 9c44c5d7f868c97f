"""`bertforge evaluate`: re-score a fine-tuned predictor folder on any labelled split."""
from __future__ import annotations

import argparse
import json

from bertforge.commands import add_common


def register(sub) -> None:
    p = sub.add_parser("evaluate", help="score a fine-tuned predictor on a task split",
                       description="Run a predictor folder (from `bertforge finetune`) on a labelled split and "
                                   "print the task's official metrics as JSON.")
    p.add_argument("--model", required=True, metavar="DIR", help="predictor folder (has task.json)")
    p.add_argument("--task", default=None, help="task name (default: the one the predictor was trained on)")
    p.add_argument("--data", metavar="PATH", help="the task's data folder (SQuAD: the dev JSON, article split)")
    p.add_argument("--eval", metavar="FILE", help="a labelled file to score (overrides --data)")
    p.add_argument("--split", default="dev", choices=("dev", "test", "train"))
    p.add_argument("--max-eval-samples", type=int, default=None)
    p.add_argument("--skip-bad-rows", action="store_true")
    p.add_argument("--output", metavar="FILE", help="also write the metrics JSON here")
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bertforge.atomic import atomic_write_text
    from bertforge.tasks.predictor import Predictor
    predictor = Predictor.load(args.model)
    report = predictor.evaluate(data=args.data, eval_file=args.eval, split=args.split,
                                max_samples=args.max_eval_samples, task=args.task, skip_bad_rows=args.skip_bad_rows)
    if report.get("note"):
        print(f"NOTE: {report['note']}")
    text = json.dumps(report, indent=2, default=float)
    print(text)
    if args.output:
        atomic_write_text(args.output, text + "\n")
    return 0

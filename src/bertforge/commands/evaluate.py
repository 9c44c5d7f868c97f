"""`bertforge evaluate`: re-score a fine-tuned predictor folder on any labelled split."""
from __future__ import annotations

import argparse
import json
import sys

from bertforge.commands import add_common
from bertforge.commands.predict import add_inference_flags, positive_int


def register(sub) -> None:
    from bertforge.tasks.predictor import DEFAULT_MAX_BATCH_TOKENS
    p = sub.add_parser("evaluate", help="score a fine-tuned predictor on a task split",
                       description="Run a predictor folder (from `bertforge finetune`) on a labelled split and "
                                   "print the task's official metrics as JSON. With --output DIR, also write "
                                   "metrics.json and the per-example predictions: SQuAD predictions.json (+ "
                                   "null_odds.json for v2) as the official scripts read them, NER "
                                   "predictions.conll (word gold predicted), others predictions.csv.")
    p.add_argument("--model", required=True, metavar="DIR", help="predictor folder (has task.json)")
    p.add_argument("--task", default=None, help="task name (default: the one the predictor was trained on)")
    p.add_argument("--data", metavar="PATH", help="the task's data folder (SQuAD: the dev JSON, article split)")
    p.add_argument("--eval", metavar="FILE", help="a labelled file to score (overrides --data)")
    p.add_argument("--split", default="dev", choices=("dev", "test", "train"),
                   help="which split of --data to score")
    p.add_argument("--max-eval-samples", type=positive_int, default=None,
                   help="score only the first N examples (default: all)")
    p.add_argument("--skip-bad-rows", action="store_true",
                   help="skip (and count) malformed rows instead of stopping at the first")
    p.add_argument("--output", metavar="DIR", help="write metrics.json and per-example predictions here")
    p.add_argument("--overwrite", action="store_true", help="empty --output first if it holds something else")
    add_inference_flags(p, 64)
    p.add_argument("--max-batch-tokens", type=positive_int, default=DEFAULT_MAX_BATCH_TOKENS,
                   help=f"most padded tokens per batch (default {DEFAULT_MAX_BATCH_TOKENS})")
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bertforge.tasks.prediction_files import write_eval_outputs
    from bertforge.tasks.predictor import Predictor
    from bertforge.tasks.registry import get_task
    if args.eval and args.split != "dev":
        raise ValueError(f"--split {args.split} picks a file of a --data folder; --eval {args.eval} is the file "
                         "scored (give one of them)")
    if args.output and args.output.lower().endswith(".json"):
        raise ValueError(f"--output {args.output}: expected a folder (metrics.json and the per-example "
                         "predictions are written inside it)")
    if args.output:
        from bertforge.outputs import claim_output, write_run_config
        settings = {k: getattr(args, k) for k in ("model", "task", "data", "eval", "split", "max_eval_samples",
                                                  "skip_bad_rows", "precision")}
        claim_output(args.output, verb="evaluate", overwrite=args.overwrite, settings=settings,
                     inputs=(args.model, args.data, args.eval))
        write_run_config(args.output, "evaluate", settings)
    predictor = Predictor.load(args.model, args.device, args.precision, max_batch_tokens=args.max_batch_tokens)
    predictor.settings.eval_batch_size = args.batch_size
    kept: dict = {} if args.output else None
    report = predictor.evaluate(data=args.data, eval_file=args.eval, split=args.split,
                                max_samples=args.max_eval_samples, task=args.task, skip_bad_rows=args.skip_bad_rows,
                                keep=kept, progress=sys.stderr.isatty())
    if report.get("note"):
        print(f"NOTE: {report['note']}")
    print(json.dumps(report, indent=2, default=float))
    if args.output:
        from bertforge.outputs import mark_finished
        files = write_eval_outputs(args.output, get_task(report["task"]), report, kept, predictor.labels)
        mark_finished(args.output)
        print("wrote " + ", ".join(str(f) for f in files))
    return 0

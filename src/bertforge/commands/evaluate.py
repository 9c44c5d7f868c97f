"""`bertforge evaluate`: re-score a fine-tuned predictor folder on any labelled split."""
from __future__ import annotations

import argparse
import sys

from bertforge.commands import add_common
from bertforge.commands.flags import add_settings_arguments, settings_from_args


def register(sub) -> None:
    from bertforge.evaluation.evaluate import EvaluateSettings
    p = sub.add_parser("evaluate", help="score a fine-tuned predictor, or sentence embeddings, on a task split",
                       description="Run a predictor folder (from `bertforge finetune`) on a labelled split and "
                                   "print the task's official metrics as JSON (classification and NER: after a "
                                   "per-class table). With --output DIR, also write metrics.json and the per-example "
                                   "predictions (classification and NER also classification_report.json, "
                                   "confusion_matrix.csv and confusion_matrix.png): SQuAD predictions.json (+ "
                                   "null_odds.json for v2) as the official scripts read them, NER "
                                   "predictions.conll (word gold predicted), others predictions.csv. "
                                   "--task sts and --task retrieval score the sentence embeddings of any encoder "
                                   "folder: sts the Spearman correlation of the cosine with the pairs' scores "
                                   "(--eval FILE, or --data DIR with SPLIT.tsv), retrieval nDCG@10, MRR@10 and "
                                   "recall@1/10/100 of exact cosine search on a BEIR folder (--data DIR with "
                                   "corpus.jsonl, queries.jsonl and qrels/SPLIT.tsv; --split default test).")
    add_settings_arguments(p, EvaluateSettings)
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bertforge.evaluation.evaluate import EvaluateSettings, evaluate
    evaluate(settings_from_args(EvaluateSettings, args), say=print, progress=sys.stderr.isatty())
    return 0

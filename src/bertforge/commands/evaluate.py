"""`bertforge evaluate`: re-score a fine-tuned predictor folder on any labelled split."""
from __future__ import annotations

import argparse
import json
import sys

from bertforge.commands import add_common
from bertforge.commands.predict import add_inference_flags
from bertforge.tasks.embedding.evaluation import CORPUS_CHUNK
from bertforge.commands.options import MAX_BATCH_TOKENS, at_most, positive_int
from bertforge.settings import MAX_SAMPLES

EMBEDDING_TASKS = ("sts", "retrieval")


def register(sub) -> None:
    from bertforge.tasks.predictor import DEFAULT_MAX_BATCH_TOKENS
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
    p.add_argument("--model", required=True, metavar="DIR", help="predictor folder (has task.json); for sts and "
                                                                 "retrieval, any encoder folder")
    p.add_argument("--task", default=None, help="task name (default: the one the predictor was trained on); sts or "
                                                "retrieval for sentence embeddings")
    p.add_argument("--data", metavar="PATH", help="the task's data folder (SQuAD: the dev JSON, article split)")
    p.add_argument("--eval", metavar="FILE", help="a labelled file to score (overrides --data)")
    p.add_argument("--split", default=None, choices=("dev", "test", "train"),
                   help="the split of a --data folder (default: dev; retrieval: test)")
    p.add_argument("--max-eval-samples", type=at_most(positive_int, MAX_SAMPLES), default=None,
                   help="score only the first N examples (default: all)")
    p.add_argument("--skip-bad-rows", action="store_true",
                   help="skip (and count) malformed rows instead of stopping at the first")
    p.add_argument("--vectors-dir", metavar="DIR",
                   help="retrieval: write the corpus vectors to a memory-mapped .npy file in DIR (removed "
                        "afterwards) and search them --corpus-chunk documents at a time, for corpora whose vectors "
                        "do not fit in memory (the same exact ranking)")
    p.add_argument("--corpus-chunk", type=at_most(positive_int, 16_777_216), default=CORPUS_CHUNK, metavar="N",
                   help=f"retrieval with --vectors-dir: documents embedded and searched per chunk (default "
                        f"{CORPUS_CHUNK})")
    p.add_argument("--output", metavar="DIR", help="write metrics.json and per-example predictions here")
    p.add_argument("--overwrite", action="store_true", help="empty --output first if it holds something else")
    add_inference_flags(p, 64)
    p.add_argument("--max-batch-tokens", type=at_most(positive_int, MAX_BATCH_TOKENS), default=DEFAULT_MAX_BATCH_TOKENS,
                   help=f"most padded tokens per batch (default {DEFAULT_MAX_BATCH_TOKENS})")
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.task and args.task.lower() in EMBEDDING_TASKS:
        return run_embeddings(args)
    args.split = args.split or "dev"
    from bertforge.tasks.metrics.report import evaluation_reports, report_tables, write_reports
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
        from bertforge.data.identity import INPUT_CONTENT, check_input_content
        from bertforge.outputs import claim_output, write_run_config
        settings = {k: getattr(args, k) for k in ("model", "task", "data", "eval", "split", "max_eval_samples",
                                                  "skip_bad_rows", "precision")}
        content = check_input_content(args.output, "evaluate", (args.model, args.data, args.eval), args.overwrite)
        claim_output(args.output, verb="evaluate", overwrite=args.overwrite, settings=settings,
                     inputs=(args.model, args.data, args.eval))
        write_run_config(args.output, "evaluate", {**settings, INPUT_CONTENT: content})
    predictor = Predictor.load(args.model, args.device, args.precision, max_batch_tokens=args.max_batch_tokens)
    predictor.settings.eval_batch_size = args.batch_size
    kept: dict = {}
    report = predictor.evaluate(data=args.data, eval_file=args.eval, split=args.split,
                                max_samples=args.max_eval_samples, task=args.task, skip_bad_rows=args.skip_bad_rows,
                                keep=kept, progress=sys.stderr.isatty())
    if report.get("note"):
        print(f"NOTE: {report['note']}")
    spec = get_task(report["task"])
    class_reports = evaluation_reports(spec.head, kept, predictor.labels)
    for name, table in report_tables(class_reports).items():  # before the JSON, which ends the output
        print(f"{name}:\n{table}")
    print(json.dumps(report, indent=2, default=float))
    if args.output:
        from bertforge.outputs import mark_finished
        files = write_eval_outputs(args.output, spec, report, kept, predictor.labels)
        files += write_reports(args.output, class_reports)
        mark_finished(args.output)
        print("wrote " + ", ".join(str(f) for f in files))
    return 0


def run_embeddings(args: argparse.Namespace) -> int:
    """`--task sts|retrieval`: the sentence embeddings of an encoder folder, scored; metrics.json with --output."""
    from bertforge.serving.embeddings import SentenceEncoder
    from bertforge.tasks.embedding.data import read_beir, read_pairs, split_file
    from bertforge.tasks.embedding.evaluation import evaluate_retrieval, evaluate_sts
    task = args.task.lower()
    if args.skip_bad_rows:
        raise ValueError(f"--skip-bad-rows is for predictor evaluations; --task {task} stops at a bad row")
    split = args.split or ("test" if task == "retrieval" else "dev")
    if task == "retrieval" and (args.eval or not args.data):
        raise ValueError("--task retrieval reads a BEIR folder: give --data DIR (corpus.jsonl, queries.jsonl, "
                         "qrels/SPLIT.tsv), not --eval")
    if task != "retrieval" and args.vectors_dir:
        raise ValueError(f"--vectors-dir is for --task retrieval (the corpus vectors); --task {task} has none")
    if task == "sts" and not (args.eval or args.data):
        raise ValueError("--task sts needs --eval FILE (sentence1, sentence2, score) or --data DIR with SPLIT.tsv")
    if args.output:
        from bertforge.data.identity import INPUT_CONTENT, check_input_content
        from bertforge.outputs import claim_output, write_run_config
        settings = {"model": args.model, "task": task, "data": args.data, "eval": args.eval, "split": split,
                    "max_eval_samples": args.max_eval_samples, "precision": args.precision}
        content = check_input_content(args.output, "evaluate", (args.model, args.data, args.eval), args.overwrite)
        claim_output(args.output, verb="evaluate", overwrite=args.overwrite, settings=settings,
                     inputs=(args.model, args.data, args.eval))
        write_run_config(args.output, "evaluate", {**settings, INPUT_CONTENT: content})
    limit = args.max_eval_samples
    if task == "sts":
        source = args.eval or split_file(args.data, split)
        pairs = read_pairs(source)[:limit]
        data = None
    else:
        source = args.data
        data = read_beir(args.data, split)
        if limit:
            data.queries = dict(list(data.queries.items())[:limit])
            data.qrels = {q: data.qrels[q] for q in data.queries}
    encoder = SentenceEncoder.load(args.model, device=args.device, precision=args.precision)

    def encode(texts):
        return encoder.encode(texts, batch_size=args.batch_size)
    metrics = evaluate_sts(encode, pairs) if data is None else evaluate_retrieval(
        encode, data, vectors_dir=args.vectors_dir, corpus_chunk=args.corpus_chunk)
    report = {"task": task, "model": str(args.model), "files": [str(source)], "split": split if not args.eval else None,
              "eval": metrics}
    print(json.dumps(report, indent=2, default=float))
    if args.output:

        from bertforge.outputs import mark_finished
        from bertforge.training.run_output import write_results
        written = write_results(args.output, report)
        mark_finished(args.output)
        print(f"wrote {written}")
    return 0

"""`bertforge distill init|pretrain|task`: make a DistilBERT student, distil it on a corpus or for a task."""
from __future__ import annotations

import argparse

from bertforge.commands import add_common
from bertforge.commands.options import add_output_arguments
from bertforge.commands.dataclass_args import (add_dataclass_arguments, dataclass_from_args, non_negative_int,
                                               positive_int)
from bertforge.commands.options import duration
from bertforge.training.options import DIST_TIMEOUT, TrainOptions, distill_defaults


def _layers(value: str) -> list[int]:
    try:
        return [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--layers takes comma-separated layer numbers, not {value!r}") from None


def register(sub) -> None:
    p = sub.add_parser("distill", help="knowledge distillation into a DistilBERT student",
                       description="Three steps: `init` builds a half-depth DistilBERT student from a teacher's "
                                   "weights; `pretrain` distils it on a prepared corpus (soft targets + MLM + "
                                   "cosine loss, resumable); `task` distils a fine-tuned teacher into a student "
                                   "predictor on unlabeled text and reports accuracy, size and speed of both.")
    p.set_defaults(run=lambda args: p.print_help() or 2)
    steps = p.add_subparsers(dest="distill_step", metavar="<step>")

    init = steps.add_parser("init", help="a DistilBERT student from every other teacher layer",
                            description="Copy the teacher's embeddings (segment 0 folded into the word embeddings), "
                                        "layers 0, 2, 4, ... and MLM head (if it has one) into a DistilBERT student "
                                        "with half the layers; writes a checkpoint that transformers loads, plus the "
                                        "teacher's tokenizer.")
    init.add_argument("--teacher", required=True, metavar="DIR", help="BERT or DistilBERT checkpoint folder")
    add_output_arguments(init, help="folder for the student (new or empty, unless --overwrite)")
    init.add_argument("--layers", type=_layers, metavar="I,J,...", help="teacher layers to keep (default 0,2,4,...)")
    add_common(init)
    init.set_defaults(run=run_init)

    pre = steps.add_parser("pretrain", help="distil on a prepared corpus (DistilBERT's triple loss)",
                           description="Loss = alpha_ce * T^2 * KL(teacher || student at temperature T, masked "
                                       "tokens) + alpha_mlm * MLM + alpha_cos * (1 - cos) of the last hidden states. "
                                       "Running the same command again resumes from OUTPUT/checkpoints.")
    pre.add_argument("--teacher", required=True, metavar="DIR", help="checkpoint with an MLM head")
    pre.add_argument("--student", required=True, metavar="DIR", help="initial student (e.g. from `distill init`)")
    pre.add_argument("--data", required=True, metavar="DIR", help="a folder written by `bertforge prepare`")
    pre.add_argument("--output", required=True, metavar="DIR")
    pre.add_argument("--temperature", type=float, default=2.0)
    pre.add_argument("--alpha-ce", type=float, default=5.0)
    pre.add_argument("--alpha-mlm", type=float, default=2.0)
    pre.add_argument("--alpha-cos", type=float, default=1.0)
    pre.add_argument("--vocab", metavar="DIR", help="default: the vocab the corpus was prepared with")
    pre.add_argument("--batch-size", type=positive_int, default=32)
    pre.add_argument("--max-seq-length", type=positive_int, default=128)
    pre.add_argument("--mask-rate", type=float, default=0.15)
    pre.add_argument("--eval-batches", type=non_negative_int, default=20, help="held-out batches at the end (0: none)")
    pre.add_argument("--overwrite", action="store_true",
                     help="start again in an OUTPUT that holds another run (its contents are deleted)")
    add_dataclass_arguments(pre, TrainOptions, defaults=distill_defaults(), title="training")
    add_common(pre)
    pre.set_defaults(run=run_pretrain)

    task = steps.add_parser("task", help="distil a fine-tuned predictor into a student predictor",
                            description="The teacher predictor labels the unlabeled texts (and the train set) with "
                                        "soft targets at --temperature; the student learns to match them. OUTPUT "
                                        "is a predictor folder (for `bertforge predict`) with distill_report.json: "
                                        "dev metric, parameters and measured examples/s of teacher and student.")
    task.add_argument("--teacher", required=True, metavar="PREDICTOR", help="a `bertforge finetune` output folder")
    task.add_argument("--student", required=True, metavar="DIR", help="student checkpoint (e.g. `distill init`)")
    task.add_argument("--unlabeled", required=True, nargs="+", metavar="FILE",
                      help=".txt (one text per line, TAB before a pair) or .tsv/.csv/.jsonl with a text column")
    task.add_argument("--task", help="default: the teacher's task")
    task.add_argument("--data", metavar="DIR", help="the task's folder (train set and dev set)")
    task.add_argument("--train", metavar="FILE", help="labelled train file (overrides --data)")
    task.add_argument("--eval", metavar="FILE", help="dev file (overrides --data)")
    task.add_argument("--output", required=True, metavar="DIR")
    task.add_argument("--temperature", type=float, default=2.0)
    task.add_argument("--alpha-hard", type=float, default=0.0, help="weight of gold-label CE on the train set")
    task.add_argument("--no-train-texts", action="store_true", help="leave the train set out of the transfer set")
    task.add_argument("--epochs", type=float, default=2.0)
    task.add_argument("--batch-size", type=int, default=32)
    task.add_argument("--lr", type=float, default=1e-4)
    task.add_argument("--max-unlabeled", type=int, default=None, help="a seeded sample of this many texts")
    task.add_argument("--max-train-samples", type=int, default=None, help="default: the teacher's")
    task.add_argument("--max-eval-samples", type=int, default=None)
    task.add_argument("--seed", type=int, default=None, help="default: the teacher's")
    task.add_argument("--timing-rounds", type=int, default=3, help="interleaved throughput rounds per model")
    task.add_argument("--no-progress", action="store_true")
    task.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    task.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16", "fp16"])
    task.add_argument("--save-every", type=non_negative_int, default=0,
                      help="checkpoint every N steps, so a killed run resumes (0: none)")
    task.add_argument("--dist-timeout", type=duration, default=DIST_TIMEOUT,
                      help="under torchrun: how long a process waits for the others before the run ends naming the "
                           f"rank and the cause, e.g. 90s, 10m (default: {DIST_TIMEOUT:g} s)")
    task.add_argument("--overwrite", action="store_true",
                      help="start again in an OUTPUT that holds another run (its contents are deleted)")
    add_common(task)
    task.set_defaults(run=run_task)


def run_init(args: argparse.Namespace) -> int:
    from bertforge.training.distill import INIT_RECORD, init_student
    out = init_student(args.teacher, args.output, args.layers, overwrite=args.overwrite)
    print(f"student written to {out} (see {out / INIT_RECORD})")
    return 0


def run_pretrain(args: argparse.Namespace) -> int:
    from bertforge.training.distill import DistillConfig, run_distillation
    from bertforge.training.distributed import is_main_process
    cfg = dataclass_from_args(DistillConfig, args, train=dataclass_from_args(TrainOptions, args))
    result = run_distillation(cfg, hooks=getattr(args, "hooks", None))
    if not is_main_process():
        return 0
    print(f"distilled student: {result.output} (step {result.step}, stopped by {result.stopped_by})")
    for note in result.notes:
        print(note)
    return 0


def run_task(args: argparse.Namespace) -> int:
    from bertforge.training.distill import TaskDistillSettings, distill_task
    distill_task(TaskDistillSettings(
        teacher=args.teacher, student=args.student, unlabeled=args.unlabeled, output=args.output, task=args.task,
        data=args.data, train_file=args.train, eval_file=args.eval, temperature=args.temperature,
        alpha_hard=args.alpha_hard, include_train=not args.no_train_texts, epochs=args.epochs,
        batch_size=args.batch_size, lr=args.lr, max_unlabeled=args.max_unlabeled,
        max_train_samples=args.max_train_samples, max_eval_samples=args.max_eval_samples, seed=args.seed,
        timing_rounds=args.timing_rounds, progress=not args.no_progress, device=args.device,
        precision=args.precision, save_every=args.save_every, dist_timeout=args.dist_timeout,
        overwrite=args.overwrite),
        hooks=getattr(args, "hooks", None))
    return 0

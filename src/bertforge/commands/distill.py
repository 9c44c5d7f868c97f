"""`bertforge distill init|pretrain|task`: make a DistilBERT student, distil it on a corpus (DistilBERT's or
TinyBERT's losses) or for a task."""
from __future__ import annotations

import argparse

from bertforge.commands import add_common
from bertforge.commands.flags import add_settings_arguments, settings_from_args
from bertforge.pretraining.distill import DistillConfig, DistillInitSettings
from bertforge.tasks.distill import TaskDistillSettings


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
    add_settings_arguments(init, DistillInitSettings)
    add_common(init)
    init.set_defaults(run=run_init)

    pre = steps.add_parser("pretrain", help="distil on a prepared corpus (DistilBERT's triple loss, or TinyBERT's)",
                           description="--loss distilbert: alpha_ce * T^2 * KL(teacher || student at temperature T, "
                                       "masked tokens) + alpha_mlm * MLM + alpha_cos * (1 - cos) of the last hidden "
                                       "states. --loss tinybert: first embedding, hidden-state (through a learned "
                                       "projection) and attention-score MSE of mapped layers, then soft cross-entropy "
                                       "at T; the student may be narrower, or a fresh named size. Running the same "
                                       "command again resumes from OUTPUT/checkpoints.")
    add_settings_arguments(pre, DistillConfig)
    add_common(pre)
    pre.set_defaults(run=run_pretrain)

    task = steps.add_parser("task", help="distil a fine-tuned predictor into a student predictor",
                            description="The teacher predictor labels the unlabeled texts (and the train set) with "
                                        "soft targets at --temperature; the student learns to match them. OUTPUT "
                                        "is a predictor folder (for `bertforge predict`) with distill_report.json: "
                                        "dev metric, parameters and measured examples/s of teacher and student.")
    add_settings_arguments(task, TaskDistillSettings)
    add_common(task)
    task.set_defaults(run=run_task)


def run_init(args: argparse.Namespace) -> int:
    from bertforge.pretraining.distill import INIT_RECORD, distill_init
    out = distill_init(settings_from_args(DistillInitSettings, args))
    print(f"student written to {out} (see {out / INIT_RECORD})")
    return 0


def run_pretrain(args: argparse.Namespace) -> int:
    from bertforge.pretraining.distill import run_distillation
    from bertforge.training.distributed import is_main_process
    result = run_distillation(settings_from_args(DistillConfig, args), hooks=getattr(args, "hooks", None))
    if not is_main_process():
        return 0
    print(f"distilled student: {result.output} (step {result.step}, stopped by {result.stopped_by})")
    for note in result.notes:
        print(note)
    return 0


def run_task(args: argparse.Namespace) -> int:
    from bertforge.tasks.distill import distill_task
    distill_task(settings_from_args(TaskDistillSettings, args), say=print, hooks=getattr(args, "hooks", None))
    return 0

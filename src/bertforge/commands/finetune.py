"""`bertforge finetune`: fine-tune a pre-trained checkpoint on a task and save the best run as a predictor."""
from __future__ import annotations

import argparse

from bertforge.commands import add_common
from bertforge.commands.flags import add_settings_arguments, settings_from_args


def register(sub) -> None:
    from bertforge.tasks.finetune import FinetuneSettings
    p = sub.add_parser("finetune", help="fine-tune on a GLUE/SQuAD/CoNLL/SWAG/custom task",
                       description="Fine-tune with the BERT paper's recipe (AdamW, 10% warmup, linear decay, "
                                   "weight decay 0.01): one run per learning rate and restart, each evaluated after "
                                   "every epoch; keeps the run that scores best on the eval set and writes a "
                                   "predictor folder (model, tokenizer, task.json, metrics.json, curves.png; classification "
                                   "and NER also classification_report.json, confusion_matrix.csv and .png, and the "
                                   "per-class table printed). "
                                   "Running the same command again resumes an interrupted run (with --save-every).")
    add_settings_arguments(p, FinetuneSettings)
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bertforge.tasks.finetune import FinetuneSettings, finetune
    report = finetune(settings_from_args(FinetuneSettings, args), say=print, hooks=getattr(args, "hooks", None))
    shown = {k: v for k, v in report.eval.items() if not isinstance(v, dict)}
    print("eval:", ", ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}" for k, v in shown.items()))
    return 0

"""`bertforge finetune`: fine-tune a pre-trained checkpoint on a task and save the best run as a predictor."""
from __future__ import annotations

import argparse

from bertforge.commands import add_common
from bertforge.commands.data_args import add_data_arguments, data_options_from_args
from bertforge.commands.dataclass_args import add_dataclass_arguments, positive_float, positive_int

def parse_lrs(value: str) -> list[float]:
    """`grid` -> the paper's {5e-5, 4e-5, 3e-5, 2e-5}; otherwise one or more comma-separated rates."""
    from bertforge.tasks.finetune import LR_GRID
    if value.strip().lower() == "grid":
        return list(LR_GRID)
    try:
        return [float(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--lr takes a number, a comma list or 'grid', not {value!r}") from None


def register(sub) -> None:
    p = sub.add_parser("finetune", help="fine-tune on a GLUE/SQuAD/CoNLL/SWAG/custom task",
                       description="Fine-tune with the BERT paper's recipe (AdamW, 10%% warmup, linear decay, "
                                   "weight decay 0.01); keeps the best run on the eval set and writes a predictor "
                                   "folder (model, tokenizer, task.json, metrics.json, curves.png).")
    p.add_argument("--model", required=True, metavar="DIR", help="pre-trained checkpoint folder (HF layout)")
    p.add_argument("--output", required=True, metavar="DIR")
    add_data_arguments(p)
    p.add_argument("--epochs", type=positive_float, default=3.0)
    p.add_argument("--batch-size", type=positive_int, default=32, help="examples per micro-batch and process")
    p.add_argument("--lr", type=parse_lrs, default=[2e-5], metavar="LR|grid",
                   help="learning rate(s): 2e-5, '5e-5,3e-5' or 'grid' (5e-5,4e-5,3e-5,2e-5)")
    p.add_argument("--restarts", type=positive_int, default=1, help="runs per learning rate, each with another seed")
    p.add_argument("--max-seq-length", type=positive_int, default=None, help="default 384 for SQuAD, 128 otherwise")
    p.add_argument("--max-train-samples", type=positive_int, default=None)
    p.add_argument("--max-eval-samples", type=positive_int, default=None)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--warmup", type=float, default=0.1, help="fraction of steps for linear warmup")
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--doc-stride", type=positive_int, default=128, help="SQuAD: tokens between window starts")
    p.add_argument("--max-query-length", type=positive_int, default=64)
    p.add_argument("--max-answer-length", type=positive_int, default=30)
    p.add_argument("--n-best", type=positive_int, default=20)
    p.add_argument("--overwrite", action="store_true",
                   help="start again in an OUTPUT that holds another run (its contents are deleted)")
    from bertforge.training.options import TrainOptions
    add_dataclass_arguments(p, TrainOptions, defaults=TrainOptions(save_every=0, keep_checkpoints=1, keep="best"),
                            include=("device", "precision", "grad_accum", "max_grad_norm", "eval_every", "save_every",
                                     "keep_checkpoints", "keep_checkpoints_at_end", "keep", "patience", "log_every",
                                     "progress", "tensorboard", "dist_timeout"),
                            title="training")
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bertforge.tasks.finetune import FinetuneSettings, finetune
    data_options = data_options_from_args(args)
    settings = FinetuneSettings(
        task=data_options.task, model=args.model, output=args.output, data=data_options.data,
        train_file=data_options.train_file, eval_file=data_options.eval_file, data_options=data_options,
        skip_bad_rows=data_options.skip_bad_rows, epochs=args.epochs, batch_size=args.batch_size, learning_rates=args.lr,
        restarts=args.restarts, max_seq_length=args.max_seq_length, max_train_samples=args.max_train_samples,
        max_eval_samples=args.max_eval_samples, seed=args.seed,
        warmup_fraction=args.warmup, weight_decay=args.weight_decay, doc_stride=args.doc_stride,
        max_query_length=args.max_query_length, max_answer_length=args.max_answer_length, n_best=args.n_best,
        progress=args.progress, device=args.device, precision=args.precision, grad_accum=args.grad_accum,
        max_grad_norm=args.max_grad_norm, eval_every=args.eval_every, save_every=args.save_every,
        keep_checkpoints=args.keep_checkpoints, keep=args.keep,
        keep_checkpoints_at_end=args.keep_checkpoints_at_end, patience=args.patience, log_every=args.log_every,
        tensorboard=args.tensorboard, dist_timeout=args.dist_timeout, overwrite=args.overwrite)
    report = finetune(settings, hooks=getattr(args, "hooks", None))
    shown = {k: v for k, v in report["eval"].items() if not isinstance(v, dict)}
    print("eval:", ", ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}" for k, v in shown.items()))
    return 0

"""`bertforge pretrain`: pre-train a BERT-family model on a prepared corpus (resumable; `torchrun`-ready)."""
from __future__ import annotations

import argparse

from bertforge.commands import add_common
from bertforge.commands.flags import add_settings_arguments, flat_args
from bertforge.training.metrics_log import CURVES, METRICS_LOG


def register(sub) -> None:
    from bertforge.pretraining.pretrain import PretrainConfig
    p = sub.add_parser("pretrain", help="pre-train a BERT on a prepared corpus",
                       description="Pre-train with MLM+NSP (BERT), MLM+SOP (ALBERT), MLM (RoBERTa), LTR, ELECTRA, XLNet's "
                       "permutation LM (plm) or masked diffusion (mdlm; causal-then-masked and hybrid mix LTR and MLM). "
                       "The final model goes to OUTPUT in the Hugging Face layout with its tokenizer; checkpoints to "
                       "OUTPUT/checkpoints/step-N. Running the same command again resumes from the newest complete "
                       "checkpoint. Launch with `torchrun --nproc_per_node N -m bertforge pretrain ...` for "
                       "data-parallel training.")
    add_settings_arguments(p, PretrainConfig)
    add_common(p)
    p.set_defaults(run=run)


def config_from_args(args: argparse.Namespace):
    """The run's settings: what the command line gave, the rest from its --recipe."""
    from bertforge.pretraining.pretrain import PretrainConfig
    return PretrainConfig.from_options(**flat_args(PretrainConfig, args))


def run(args: argparse.Namespace) -> int:
    from bertforge.pretraining.pretrain import run_pretraining
    result = run_pretraining(config_from_args(args), hooks=getattr(args, "hooks", None))
    _report(result)
    return 0


def _report(result) -> None:
    """What a training verb prints at the end (rank 0): where everything went, and what to know."""
    from bertforge.training.distributed import is_main_process
    if not is_main_process():
        return
    out = result.output
    if result.stopped_by == "time-budget":
        print(f"time budget spent after {result.step} steps; saved")
    elif result.stopped_by == "early-stopping":
        print(f"stopped early at step {result.step}")
    print(f"final model and tokenizer: {out}")
    if (out / "checkpoints").is_dir():
        print(f"checkpoints: {out / 'checkpoints'}")
    shown = f"metrics: {out / METRICS_LOG}"
    if (out / CURVES).exists():
        shown += f", curves: {out / CURVES}"
    print(shown)
    if result.final_eval:
        print("eval: " + ", ".join(f"{k} {v:.4f}" for k, v in result.final_eval.items() if isinstance(v, float)))
    for note in result.notes:
        print(note)

"""`bertforge pretrain`: pre-train a BERT-family model on a prepared corpus (resumable; `torchrun`-ready)."""
from __future__ import annotations

import argparse

from bertforge.commands import add_common
from bertforge.commands.dataclass_args import (UNSET, add_dataclass_arguments, non_negative_int, positive_float,
                                               positive_int)

BY_RECIPE = "default: set by --recipe"


def register(sub) -> None:
    from bertforge.training.options import TrainOptions, pretrain_defaults
    from bertforge.training.recipes import DEFAULT_RECIPE, RECIPES
    p = sub.add_parser("pretrain", help="pre-train a BERT on a prepared corpus",
                       description="Pre-train with MLM+NSP (BERT), MLM+SOP (ALBERT), MLM (RoBERTa) or LTR. The final "
                       "model goes to OUTPUT in the Hugging Face layout with its tokenizer; checkpoints to "
                       "OUTPUT/checkpoints/step-N. Running the same command again resumes from the newest complete "
                       "checkpoint. Launch with `torchrun --nproc_per_node N -m bertforge pretrain ...` for "
                       "data-parallel training.")
    p.add_argument("--data", required=True, metavar="DIR", help="a folder written by `bertforge prepare`")
    p.add_argument("--recipe", default=DEFAULT_RECIPE, choices=list(RECIPES),
                   help="; ".join(f"{r.name}: {r.summary}".replace("%", "%%") for r in RECIPES.values())
                   + f". A flag given here wins over the recipe (default: {DEFAULT_RECIPE})")
    p.add_argument("--model", default=UNSET, metavar="PRESET|CONFIG",
                   help="a size (tiny, mini, small, medium, base, large), optionally of a family "
                        "(roberta-mini, albert-base, modernbert-small...), or a config.json (default: tiny; a "
                        "bare size gets the recipe's layout: --recipe fast --model mini is modernbert-mini)")
    p.add_argument("--output", required=True, metavar="DIR")
    p.add_argument("--overwrite", action="store_true",
                   help="start again in an OUTPUT that holds another run (its contents are deleted)")
    p.add_argument("--objective", default=UNSET, choices=["mlm+nsp", "mlm+sop", "mlm", "ltr", "electra"],
                   help="mlm+nsp (BERT), mlm+sop (ALBERT), mlm (RoBERTa), ltr (left to right), electra "
                        "(a small generator fills the masks, the model learns which tokens were replaced) "
                        "(" + BY_RECIPE + ")")
    p.add_argument("--packing", default="full-sentences", choices=["full-sentences", "doc-sentences"],
                   help="how mlm/ltr fill sequences")
    p.add_argument("--vocab", metavar="DIR", help="default: the vocab the corpus was prepared with")
    p.add_argument("--batch-size", type=positive_int, default=32, help="sequences per micro-batch and process")
    p.add_argument("--seq-len-schedule", default="128:1.0", metavar="LEN:FRAC,...",
                   help="sequence-length phases as fractions of the run, e.g. 128:0.9,512:0.1")
    p.add_argument("--eval-batches", type=non_negative_int, default=20,
                   help="held-out batches per evaluation (0: none)")
    p.add_argument("--masking", default="dynamic", choices=["dynamic", "static"])
    p.add_argument("--dupe-factor", type=positive_int, default=10,
                   help="static masking: how many differently masked copies of the corpus (BERT used 10)")
    p.add_argument("--mask-rate", type=float, default=UNSET, help="share of tokens masked (" + BY_RECIPE + ")")
    p.add_argument("--whole-word", action="store_true", help="mask whole words (all their pieces) together")
    p.add_argument("--span-masking", action="store_true",
                   help="mask SpanBERT spans: geometric lengths (p 0.2, at most 10), same --mask-rate budget")
    p.add_argument("--generator-fraction", type=positive_float, default=0.25,
                   help="electra: the generator's width as a fraction of the model's (the paper: 1/4 to 1/2)")
    p.add_argument("--disc-weight", type=positive_float, default=50.0,
                   help="electra: weight of replaced-token detection against the generator's MLM loss")
    p.add_argument("--dropout", type=float, default=UNSET, metavar="P",
                   help="hidden and attention dropout for this run (bert: the model's, 0.1; fast: 0, as in "
                        "Cramming and ModernBERT, which also lets CPU attention use SDPA's fused kernel)")
    p.add_argument("--init-from", metavar="DIR", help="start from these weights instead of a random init")
    p.add_argument("--init", default=UNSET, choices=["model", "bert"],
                   help="random init: the model family's own, or BERT's (normal, std 0.02, on every linear and "
                        "embedding; fast: bert, which leaves the unigram plateau sooner) (" + BY_RECIPE + ")")
    add_dataclass_arguments(p, TrainOptions, defaults=pretrain_defaults(), title="training",
                            deferred={"lr": BY_RECIPE, "warmup_steps": BY_RECIPE + "; fast: 6 %% of --max-steps"})
    add_common(p)
    p.set_defaults(run=run)


def config_from_args(args: argparse.Namespace):
    from dataclasses import fields

    from bertforge.training.options import TrainOptions
    from bertforge.training.pretrain import PretrainConfig
    known = {f.name for f in fields(PretrainConfig)} | {f.name for f in fields(TrainOptions)}
    return PretrainConfig.from_options(**{k: v for k, v in vars(args).items() if k in known})


def run(args: argparse.Namespace) -> int:
    from bertforge.training.pretrain import run_pretraining
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
    shown = f"metrics: {out / 'metrics.jsonl'}"
    if (out / "curves.png").exists():
        shown += f", curves: {out / 'curves.png'}"
    print(shown)
    if result.final_eval:
        print("eval: " + ", ".join(f"{k} {v:.4f}" for k, v in result.final_eval.items() if isinstance(v, float)))
    for note in result.notes:
        print(note)

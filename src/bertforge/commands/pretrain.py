"""`bertforge pretrain`: pre-train a BERT on a prepared corpus (resumable; `torchrun` for several processes)."""
from __future__ import annotations

import argparse

from bertforge.commands import add_common


def register(sub) -> None:
    p = sub.add_parser("pretrain", help="pre-train a BERT on a prepared corpus",
                       description="Pre-train with MLM+NSP (BERT), MLM+SOP (ALBERT), MLM (RoBERTa) or LTR. The final "
                       "model goes to OUTPUT in the Hugging Face layout with its tokenizer; checkpoints to "
                       "OUTPUT/checkpoints/step-N. Running the same command again resumes from the newest complete "
                       "checkpoint. Launch with `torchrun --nproc_per_node N` for data-parallel training.")
    p.add_argument("--data", required=True, metavar="DIR", help="a folder written by `bertforge prepare`")
    p.add_argument("--model", default="tiny", metavar="PRESET|CONFIG",
                   help="a size (tiny, mini, small, medium, base, large), optionally of a family "
                        "(roberta-mini, albert-base, distilbert-small...), or a config.json")
    p.add_argument("--output", required=True, metavar="DIR")
    p.add_argument("--objective", default="mlm+nsp", choices=["mlm+nsp", "mlm+sop", "mlm", "ltr"])
    p.add_argument("--packing", default="full-sentences", choices=["full-sentences", "doc-sentences"],
                   help="how mlm/ltr fill sequences")
    p.add_argument("--vocab", metavar="DIR", help="default: the vocab the corpus was prepared with")
    p.add_argument("--batch-size", type=int, default=32, help="sequences per micro-batch and process")
    p.add_argument("--grad-accum", type=int, default=1, help="micro-batches per optimizer step")
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--warmup-steps", type=int, default=0)
    p.add_argument("--max-steps", type=int, default=None)
    p.add_argument("--seq-len-schedule", default="128:1.0", metavar="LEN:FRAC,...",
                   help="sequence-length phases as fractions of the run, e.g. 128:0.9,512:0.1")
    p.add_argument("--optimizer", default="adamw", choices=["adamw", "lamb"])
    p.add_argument("--time-budget", metavar="DURATION", help="e.g. 30m or 2h: lr decays with time, stop when spent")
    p.add_argument("--save-every", type=int, default=1000, help="checkpoint every N steps")
    p.add_argument("--keep-checkpoints", type=int, default=3)
    p.add_argument("--eval-every", type=int, default=0, help="held-out evaluation every N steps (0: at the end)")
    p.add_argument("--eval-batches", type=int, default=20, help="held-out batches per evaluation (0: none)")
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--masking", default="dynamic", choices=["dynamic", "static"])
    p.add_argument("--dupe-factor", type=int, default=10,
                   help="static masking: how many differently masked copies of the corpus (BERT used 10)")
    p.add_argument("--mask-rate", type=float, default=0.15)
    p.add_argument("--whole-word", action="store_true")
    p.add_argument("--dropout", type=float, default=None, metavar="P",
                   help="hidden and attention dropout for this run (default: the model's, 0.1 for BERT). 0, as in "
                        "Cramming and ModernBERT, also lets CPU attention use SDPA's fused kernel")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--init-from", metavar="DIR", help="start from these weights instead of a random init")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--precision", default="auto", choices=["auto", "bf16", "fp32"])
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bertforge.training.pretrain import PretrainConfig, parse_duration, run_pretraining
    cfg = PretrainConfig(
        data=args.data, output=args.output, model=args.model, objective=args.objective, packing=args.packing,
        vocab=args.vocab, batch_size=args.batch_size, grad_accum=args.grad_accum, lr=args.lr,
        weight_decay=args.weight_decay, warmup_steps=args.warmup_steps, max_steps=args.max_steps,
        seq_len_schedule=args.seq_len_schedule, optimizer=args.optimizer,
        time_budget=parse_duration(args.time_budget), save_every=args.save_every,
        keep_checkpoints=args.keep_checkpoints, eval_every=args.eval_every, eval_batches=args.eval_batches,
        log_every=args.log_every, masking=args.masking, dupe_factor=args.dupe_factor,
        mask_rate=args.mask_rate, whole_word=args.whole_word, dropout=args.dropout,
        seed=args.seed, init_from=args.init_from, device=args.device, precision=args.precision,
        progress=not args.no_progress)
    run_pretraining(cfg)
    return 0

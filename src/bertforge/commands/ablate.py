"""`bertforge ablate TABLE`: reproduce one of the papers' ablation tables at small, equal budgets."""
from __future__ import annotations

import argparse

from bertforge.commands import add_common
from bertforge.commands.options import (add_output_arguments, at_most, duration, existing_dir, non_negative_int,
                                        positive_float, positive_int)
from bertforge.settings import MAX_BATCH, MAX_EPOCHS, MAX_LR, MAX_SAMPLES, MAX_SEED, MAX_STEPS


def register(sub) -> None:
    from bertforge.ablation.tables import TABLES
    p = sub.add_parser("ablate", help="reproduce a paper's ablation table (Markdown + PNG)",
                       description="Pre-train one model per row of the table with the same wall-clock budget, ask "
                       "every row the same held-out questions (MLM, NSP, SOP), fine-tune each on SST-2 and MRPC, "
                       "and write TABLE.md, TABLE.png and results.json to OUTPUT. Finished rows are kept; "
                       "re-running continues. Tables: " + "; ".join(f"{t.name} ({t.paper})" for t in TABLES.values()),
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("table", choices=sorted(TABLES), metavar="TABLE", help="one of: " + ", ".join(TABLES))
    p.add_argument("--data", required=True, type=existing_dir, metavar="DIR",
                   help="a corpus folder written by `bertforge prepare`")
    add_output_arguments(p, help="folder for the table; an earlier run of the same table there is continued")
    p.add_argument("--budget", type=at_most(duration, 86400.0, "24h"), default="10m",
                   help="pre-training wall-clock per row (e.g. 90s, 10m, 1h)")
    p.add_argument("--steps", type=at_most(positive_int, MAX_STEPS), default=None,
                   help="pre-training steps per row instead of a wall-clock budget (fair on a busy machine)")
    p.add_argument("--model", default=None, help="size for every row instead of the table's own (tiny, mini...)")
    p.add_argument("--glue", default=None, metavar="DIR",
                   type=existing_dir,
                   help="folder holding SST-2/ and MRPC/ (e.g. ../shared/data/glue); omit to skip fine-tuning")
    p.add_argument("--tasks", default="sst2,mrpc", help="comma-separated fine-tuning tasks")
    p.add_argument("--finetune-samples", type=at_most(positive_int, MAX_SAMPLES), default=4000,
                   help="train examples per task")
    p.add_argument("--finetune-epochs", type=at_most(positive_float, MAX_EPOCHS), default=2.0,
                   help="epochs of each probe fine-tuning")
    p.add_argument("--finetune-lr", type=at_most(positive_float, MAX_LR), default=1e-4,
                   help="learning rate of each probe fine-tuning")
    p.add_argument("--finetune-seeds", type=at_most(positive_int, 100), default=1,
                   help="fine-tuning runs per task and row (seeds --seed, --seed+1, ...); the table shows medians")
    p.add_argument("--batch-size", type=at_most(positive_int, MAX_BATCH), default=64,
                   help="pre-training batch size of every row")
    p.add_argument("--recipe", choices=("bert", "fast"), default="bert",
                   help="fast: every row in the ModernBERT layout (pre-LN, GeGLU, rotary, no biases; BERT's "
                   "segment embeddings and NSP head kept where a row asks for them), 30 %% masking, dropout 0")
    p.add_argument("--lr", type=at_most(positive_float, MAX_LR), default=None,
                   help="peak lr (default: 1e-3; 2e-3 with --recipe fast)")
    p.add_argument("--warmup-steps", type=at_most(non_negative_int, MAX_STEPS), default=None,
                   help="default: 200; with --recipe fast, 6 %% of --steps (100 under a time budget)")
    p.add_argument("--eval-batches", type=at_most(positive_int, 1_000_000), default=20, help="held-out batches per probe")
    p.add_argument("--seed", type=at_most(non_negative_int, MAX_SEED), default=0, help="seed of every row's pre-training")
    p.add_argument("--rows", default=None, metavar="ROW[,ROW]",
                   help="run only these rows (slugs as in the output folder, e.g. mlm-nsp); other rows finished "
                   "there still appear in the table, so one process per core can each take different rows")
    p.add_argument("--reuse", action="append", default=[], type=existing_dir, metavar="DIR",
                   help="another table's output folder (repeatable): a row finished there with exactly this row's "
                   "pre-training, corpus, probes and fine-tuning is copied instead of run again (e.g. RoBERTa "
                   "Table 2's SEGMENT-PAIR + NSP row is BERT Table 5's MLM + NSP row)")
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from bertforge.ablation.ablate import AblationSettings, run_table
    from bertforge.outputs import claim_output, read_run_config, write_run_config
    from bertforge.pretraining.pretrain import parse_duration
    tasks = tuple(t for t in args.tasks.split(",") if t)
    settings = AblationSettings(
        table=args.table, data=str(args.data), output=args.output, budget=parse_duration(args.budget),
        steps=args.steps, model=args.model, glue=None if args.glue is None else str(args.glue), tasks=tasks,
        finetune_samples=args.finetune_samples, finetune_epochs=args.finetune_epochs, finetune_lr=args.finetune_lr,
        finetune_seeds=args.finetune_seeds,
        batch_size=args.batch_size, lr=args.lr, warmup_steps=args.warmup_steps, eval_batches=args.eval_batches,
        seed=args.seed, recipe=args.recipe,
        rows=tuple(r.strip() for r in args.rows.split(",") if r.strip()) if args.rows else None,
        reuse=tuple(str(d) for d in args.reuse))
    from bertforge.ablation.ablate import select_rows
    from bertforge.ablation.tables import TABLES
    select_rows(TABLES[args.table], settings.rows)  # a misspelt row fails before anything is written
    compared = {k: v for k, v in asdict(settings).items() if k not in ("rows", "reuse")}  # rows: one process each
    output = claim_output(args.output, verb="ablate", overwrite=args.overwrite, resumable=True, settings=compared,
                          inputs=(args.data, args.glue, *args.reuse))
    earlier = read_run_config(output)
    if earlier is not None and earlier.get("table") not in (None, args.table):
        raise ValueError(f"{output} holds the ablation table {earlier['table']!r}, not {args.table!r}; use "
                         "--overwrite, or choose another --output")
    write_run_config(output, "ablate", asdict(settings))
    run_table(settings, say=print)
    return 0

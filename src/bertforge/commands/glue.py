"""`bertforge glue`: fine-tune and score one checkpoint on every GLUE task whose files exist (glue.json, glue.md,
glue.png), or draw several results side by side (`--compare`)."""
from __future__ import annotations

import argparse
from dataclasses import fields

from bertforge.commands import add_common
from bertforge.commands.flags import add_settings_arguments, settings_from_args

OVERRIDES = ("learning_rates", "epochs", "batch_size", "max_seq_length", "max_train_samples", "max_eval_samples",
             "wnli", "batch_order")
RUNNING = ("device", "precision", "save_every", "keep_predictors", "name", "progress", "overwrite", "records")


def register(sub) -> None:
    from bertforge.evaluation.protocols import PROTOCOLS
    from bertforge.evaluation.settings import GlueCompare, GlueSettings
    p = sub.add_parser(
        "glue", help="fine-tune and score a checkpoint on the GLUE benchmark",
        description="Fine-tune a checkpoint on every GLUE task found in --data (glue_data/<TASK>/train.tsv, dev.tsv; "
                    "tasks without files are listed as skipped) under a named protocol, and write glue.json, glue.md "
                    "(the table to paste) and glue.png to --output. Each task x seed x lr runs in its own folder: "
                    "re-running the same command continues where it stopped. Protocols: "
                    + "; ".join(f"{p.name}: {p.description}" for p in PROTOCOLS.values())
                    + ". WNLI is scored as its majority class and kept out of the average (as BERT and Cramming do). "
                    "With --compare A.json B.json ..., draw several results side by side into --output (a PNG).")
    groups = {None: (), "protocol overrides (recorded in glue.json and glue.md)": OVERRIDES, "running": RUNNING}
    for title, names in groups.items():  # one class, its flags shown in three groups
        shown = set(names) if title else {f.name for f in fields(GlueSettings)} - set(OVERRIDES) - set(RUNNING)
        add_settings_arguments(p, GlueSettings, title=title, hide={f.name for f in fields(GlueSettings)} - shown,
                               help={"device": "where the runs train: auto (CUDA when present, the jobs sharing the "
                                               "GPUs), cpu or cuda"})
    add_settings_arguments(p, GlueCompare)
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.compare:
        return _compare(args)
    for flag, name in (("--model", "model"), ("--data", "data")):
        if not getattr(args, name, None):
            raise ValueError(f"{flag} is required (or give --compare GLUE_JSON ...)")
    from dataclasses import replace

    from bertforge.evaluation.glue import GlueSettings, run_glue
    settings = settings_from_args(GlueSettings, args)
    settings = replace(settings, command=settings.command_line())
    from tqdm import tqdm
    try:  # tqdm.write: a line printed while the suite's progress bar is up does not break it
        result = run_glue(settings, say=tqdm.write, hooks=getattr(args, "hooks", None))
    except KeyboardInterrupt:
        print(f"interrupted; run the same command again to continue (finished runs are kept in {args.output})")
        raise
    from bertforge.evaluation.report import summary_table
    print("\n".join(summary_table([result])))
    average = result.average
    over = len(result.average_over)
    print(f"GLUE average {average:.1f} over {over} tasks" if average is not None else "no GLUE average")
    print(f"wrote {args.output}/glue.json, glue.md, glue.png")
    return 0


def _compare(args: argparse.Namespace) -> int:
    from bertforge.evaluation.report import compare
    from bertforge.outputs import claim_output_file
    if getattr(args, "model", None) or getattr(args, "data", None):
        raise ValueError("--compare draws existing glue.json files: give no --model or --data")
    if not args.output.lower().endswith(".png"):
        raise ValueError(f"--output {args.output}: with --compare, expected a .png file name")
    png = claim_output_file(args.output, overwrite=args.overwrite, inputs=tuple(args.compare))
    claim_output_file(png.with_suffix(".md"), overwrite=args.overwrite, inputs=tuple(args.compare))
    png, md, results = compare(args.compare, png)
    from bertforge.evaluation.report import difference_table, summary_table
    print("\n".join(summary_table(results)))
    if len(results) > 1:
        print("\n" + "\n".join(difference_table(results)))
    print(f"wrote {png} and {md}")
    return 0

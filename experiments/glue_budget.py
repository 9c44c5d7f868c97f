"""GLUE at a pre-training budget: bertforge's two recipes against transformers, from scratch, scored by `bertforge glue`.

Each contender is a settings file, `experiments/contenders/NAME.toml` (`--contenders NAME,...`): its table label,
the bertforge command that trains it (`{model}`, `{teacher}` filled in) and how it spends a budget. Each pre-trains
a `mini`-sized encoder (or the file's own student) from scratch on the shared English Wikipedia with the MiniLM
uncased vocabulary, for budgets of 20 CPU-minutes, 1 CPU-hour and 3 CPU-hours (CPU time of one core). The default
three:

* `fast`: `bertforge pretrain --recipe fast --model mini`; `bert`: `bertforge pretrain --recipe bert --model mini`
  (both with their recipe's defaults, batch 32, sequence length 128, seed 0);
* `transformers`: `experiments/hf_pretrain_mlm.py` (`BertForMaskedLM` + `Trainer`, run_mlm's conventions, fused
  AdamW), its peak lr picked by a sweep (`--hf-lrs`, at the `--sweep-budget`, 20 CPU-minutes by default; the lr
  whose run ends with the lowest held-out MLM loss; when the sweep budget is one of `--budgets`, that run is its
  row).

Others: `fast-cpu` (the fast recipe given the budget as CPU time), `causal-then-masked`, `hybrid` (causal or
masked per batch), `mdlm`, `ltr` (other objectives of the fast recipe), `mask-schedule` (its MLM at a falling
mask rate), `tinybert` (TinyBERT's layer-wise distillation from all-MiniLM-L6-v2, `--teacher`, its
forward passes counted in the budget) and `random-init` (no pre-training: the fast recipe's initial model fine-tuned
as it is, one row at budget "none" whatever `--budgets` says; the plot draws it as a line).

A "calibrated" contender's budget is a step count: the budget divided by its CPU time per step, measured side by
side in one process on one thread by `experiments/budget_calibration.py` (OUT/calibration.json; run first if
missing). So a run's result does not depend on how busy the machine is while it runs. A "cpu" contender is given
the budget itself (`--cpu-budget`: the process CPU time of its training loop, a teacher's passes included); its row
reports the steps it made and their CPU cost from its training summary. `--records GROUP` writes the rows as
results-store records (docs/results/GROUP.json) with a table of them. Each run is pinned to one core (`taskset`,
OMP_NUM_THREADS=1), one per core of `--cores` at a time, in this order: the longest bertforge run and the sweep
first, transformers' runs as soon as the sweep has picked its lr, each checkpoint's GLUE suite as soon as its run
is done, the other bertforge runs when a core is free; a run or suite waiting for its input lets the next one
take the core.

Every checkpoint is then asked the same questions: the held-out MLM loss on the corpus's 200 held-out articles
(15 % masking, the same sequences and masks for every model; `recipe_race.evaluate_model`), and GLUE by
`bertforge glue` under one protocol (`--protocol`, default `cpu`; `--glue-args` adds flags); an `ltr` or `mdlm`
checkpoint is also scored by its own objective on the same held-out sequences (`heldout_scores`: the left-to-right
perplexity, MDLM's perplexity bound), recorded beside its row. all-MiniLM-L6-v2 (a
real pre-trained model, far more compute) fine-tuned by the same protocol is the ceiling row; the majority-class
floor (each task's train-set majority class scored on dev: its accuracy and F1, MCC 0, correlations 0) comes
with every glue.json. Results: OUT/results.json, OUT/results.md (the table) and OUT/glue-vs-budget.png ("GLUE
average vs CPU-hours").

`--report` runs nothing and writes the table and the plot of what is finished, naming what is not: so the runs
can be split over several invocations (`--contenders bert --cores 1` beside `--contenders fast --cores 0`) and
any of them, or `--report` afterwards with every contender and budget, writes the whole table.

A published calibration (`experiments/calibrations/`, `--calibration`) gives its table's step counts on any
machine, and `--include docs/results/glue-budget.json` adds that table's rows where this folder has no run of the
same contender, budget and lr: so a run made on another day (or machine) joins the published table and plot.
`--hf-lr` gives transformers' rows an lr without sweeping again (an earlier sweep's pick).

Re-running the command skips what is finished (the corpus, the calibration, each run, each held-out evaluation,
each GLUE suite) and resumes what was interrupted (runs from their checkpoints, GLUE suites unit by unit).

    OMP_NUM_THREADS=1 python experiments/glue_budget.py --out ../runs/budget --glue ../shared/data/glue
    # a smoke test of the whole pipeline (tiny step counts, a tiny GLUE subset):
    python experiments/glue_budget.py --out runs/budget-smoke --max-steps-cap 4 --hf-lrs 5e-4 \\
        --glue-args "--tasks rte,stsb --max-train-samples 16 --max-eval-samples 24"
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
import threading
from typing import Callable

from bertforge.measuring import minilm_folder

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

CONTENDER_DIR = HERE / "contenders"
BUDGETS = {"0": 0, "5m": 5 * 60, "20m": 20 * 60, "1h": 3600, "3h": 3 * 3600}  # CPU-seconds of one core
LABELS = {"0": "none", "5m": "5 CPU-min", "20m": "20 CPU-min", "1h": "1 CPU-h", "3h": "3 CPU-h"}
HELDOUT_DOCUMENTS = 200


@dataclass(frozen=True)
class Contender:
    """One row kind of the table, read from its settings file `experiments/contenders/NAME.toml`.

    `args` are bertforge's arguments (`{model}`, `{teacher}` and `{here}`, the contenders folder, filled in); the
    driver adds the corpus, the output, the budget, the seed and the checkpointing. `budget` "calibrated" runs the
    calibration's step count for the budget (`--max-steps`), "cpu" gives the budget to bertforge itself
    (`--cpu-budget`, process CPU time, a teacher's forward passes included). `heldout` false: the model has no
    trained MLM head to ask the held-out questions of; `glue` false: no GLUE suite and no table row, only the
    run's records (a reference for another row's held-out number). Kind "random-init" is not pre-trained at all: `args`
    (`bertforge pretrain`'s) build the model pre-training would start from, which is fine-tuned as it is (one row,
    whatever the budgets: the baseline the pre-trained rows are measured against)."""

    name: str
    label: str
    kind: str = "bertforge"
    args: tuple[str, ...] = ()
    budget: str = "calibrated"
    heldout: bool = True
    glue: bool = True


KINDS = ("bertforge", "transformers", "random-init")


def load_contenders(folder: Path = CONTENDER_DIR) -> dict[str, Contender]:
    """Every `*.toml` of `folder`, by file name, in the table's order (fast, bert, transformers, then by name)."""
    import tomllib
    known = {f.name for f in fields(Contender)} - {"name"}
    found = {}
    for path in sorted(folder.glob("*.toml")):
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as err:
            raise SystemExit(f"{path}: not a contender's settings ({err})") from None
        unknown = sorted(set(raw) - known)
        if unknown or "label" not in raw:
            raise SystemExit(f"{path}: " + (f"unknown key {unknown[0]!r}; known: {', '.join(sorted(known))}"
                                            if unknown else "needs a label"))
        spec = Contender(name=path.stem, **{**raw, "args": tuple(raw.get("args", ()))})
        if spec.kind not in KINDS or spec.budget not in ("calibrated", "cpu"):
            raise SystemExit(f"{path}: kind is {', '.join(KINDS)}, budget calibrated or cpu; got "
                             f"{spec.kind!r}, {spec.budget!r}")
        if spec.kind != "transformers" and not spec.args:
            raise SystemExit(f"{path}: a bertforge contender needs its args")
        found[spec.name] = spec
    first = [name for name in ("fast", "bert", "transformers") if name in found]
    return {name: found[name] for name in first + sorted(set(found) - set(first))}


CONTENDERS = load_contenders()
DEFAULT_CONTENDERS = ("fast", "bert", "transformers")


# ---- running commands on one core each -----------------------------------------------------------------------------------
def bertforge(*args: str) -> list[str]:
    return [sys.executable, "-m", "bertforge", *args]


def run_logged(cmd: list[str], log: Path, core: int | None = None) -> None:
    """Run `cmd` (pinned to `core` with one thread), appending its output to `log`; raise naming the log."""
    if core is not None:
        cmd = ["taskset", "-c", str(core), *cmd]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a", encoding="utf-8") as f:
        f.write(f"$ {shlex.join(cmd)}\n")
        f.flush()
        code = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env).returncode
    if code:
        raise RuntimeError(f"exit status {code}: {shlex.join(cmd)}; see {log}")


@dataclass
class Job:
    """One pre-training run: a contender at a budget (and, for transformers, a peak lr)."""

    contender: str
    budget: str
    steps: int | None  # None: the contender spends a CPU budget itself (its summary says how many steps it made)
    lr: float | None = None
    sweep: bool = False

    @property
    def name(self) -> str:
        return f"{self.contender}-{self.budget}" + (f"-lr{self.lr:g}" if self.lr is not None else "")


def run_folder(out: Path, job: Job) -> Path:
    return out / "runs" / job.name


def finished(out: Path, job: Job) -> bool:
    folder = run_folder(out, job)
    if CONTENDERS[job.contender].kind == "transformers":
        return (folder / "pretrain_result.json").is_file()
    from bertforge.checkpoint import SAFE_WEIGHTS
    from bertforge.training.run_output import TRAINING_SUMMARY
    if CONTENDERS[job.contender].kind == "random-init":
        return (folder / SAFE_WEIGHTS).is_file()
    return (folder / TRAINING_SUMMARY).is_file() and (folder / SAFE_WEIGHTS).is_file()


def pretrain_command(out: Path, job: Job, args) -> list[str]:
    folder = str(run_folder(out, job))
    spec = CONTENDERS[job.contender]
    if spec.kind == "transformers":
        return [sys.executable, str(HERE / "hf_pretrain_mlm.py"), "--data", str(out / "corpus"), "--output", folder,
                "--max-steps", str(job.steps), "--lr", str(job.lr), "--model", args.model, "--cache",
                str(out / "hf-cache"), "--save-steps", str(args.save_every), "--no-progress"]
    given = [a.format(model=args.model, teacher=args.teacher, here=CONTENDER_DIR) for a in spec.args]
    budget = ["--cpu-budget", job.budget] if job.steps is None else ["--max-steps", str(job.steps)]
    return bertforge(*given, "--data", str(out / "corpus"), "--output", folder, *budget, "--seed", "0",
                     "--save-every", str(args.save_every), "--eval-batches", "0", "--no-progress")


def write_random_init(out: Path, job: Job, args) -> None:
    """The model `bertforge pretrain` with the contender's args starts from (seed 0), saved untrained with its
    tokenizer: what pre-training adds is measured against it."""
    import torch

    from bertforge.atomic import atomic_directory
    from bertforge.cli import build_parser
    from bertforge.commands.pretrain import config_from_args
    from bertforge.pretraining.pretrain import build_model, resolve_vocab
    from bertforge.tokenization import load_tokenizer
    given = [a.format(model=args.model, teacher=args.teacher, here=CONTENDER_DIR) for a in CONTENDERS[job.contender].args]
    cfg = config_from_args(build_parser().parse_args([*given, "--data", str(out / "corpus"), "--output",
                                                      str(run_folder(out, job)), "--max-steps", "1"]))
    tokenizer = load_tokenizer(resolve_vocab(cfg.data, cfg.vocab))
    torch.manual_seed(0)
    model = build_model(cfg, tokenizer, 128)
    with atomic_directory(run_folder(out, job)) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)


@dataclass
class Work:
    """One thing for one core: a pre-training run or a GLUE suite. `ready()` says whether its inputs are there
    (True), not yet (False), or never will be (None: an input failed)."""

    name: str
    run: Callable[[int], None]
    ready: Callable[[], bool | None] = lambda: True
    done: threading.Event = field(default_factory=threading.Event, repr=False)


def schedule(works: list[Work], cores: list[int]) -> dict[str, str]:
    """Run the works one per core, in list order; a work whose inputs are not ready lets the next one take the core.
    Returns the failures (name -> reason); the other works go on."""
    free, pending, failed = list(cores), list(works), {}
    changed = threading.Condition()
    started = time.time()

    def run(work: Work, core: int) -> None:
        try:
            work.run(core)
        except (RuntimeError, OSError, ValueError, KeyError) as err:
            failed[work.name] = str(err)
        finally:
            with changed:
                free.append(core)
                work.done.set()
                left = sum(not w.done.is_set() for w in works)
                print(f"[{time.strftime('%H:%M')}] {'FAILED' if work.name in failed else 'done'} {work.name}; "
                      f"{left} of {len(works)} left, {(time.time() - started) / 3600:.2f} h so far", flush=True)
                changed.notify_all()

    with changed:
        while pending or len(free) < len(cores):
            for work in list(pending):
                if not free:
                    break
                state = work.ready()
                if state is None:
                    pending.remove(work)
                    failed[work.name] = "an input failed"
                    work.done.set()
                elif state:
                    pending.remove(work)
                    threading.Thread(target=run, args=(work, free.pop(0))).start()
            if pending and len(free) == len(cores):  # nothing runs and nothing can start: the inputs never come
                for work in pending:
                    failed[work.name] = "its inputs never came"
                break
            changed.wait(timeout=10)
    return failed


def pretrain_work(out: Path, job: Job, args, ready: Callable[[], bool | None] = lambda: True) -> Work:
    def run(core: int) -> None:
        if not finished(out, job):
            spend = f"{job.steps:,} steps" if job.steps is not None else f"{LABELS[job.budget]} of CPU time"
            print(f"[{time.strftime('%H:%M')}] start {job.name}: {spend} on core {core}", flush=True)
            write_machine(out, job.name)
            if CONTENDERS[job.contender].kind == "random-init":
                write_random_init(out, job, args)
            else:
                run_logged(pretrain_command(out, job, args), out / "logs" / f"{job.name}.log", core)
    return Work(f"pre-train {job.contender} {job.budget}" + (" (lr sweep)" if job.sweep else ""), run, ready)


def machine_path(out: Path, name: str) -> Path:
    return out / "machines" / f"{name}.json"  # beside the run: bertforge refuses a run folder holding foreign files


def write_machine(out: Path, name: str) -> None:
    """Record what a run is made on (its row says so: a published calibration's steps run on any CPU)."""
    from bertforge.atomic import atomic_write_text
    from bertforge.measuring import machine_info
    from budget_calibration import has_avx512
    path = machine_path(out, name)
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        info = {k: v for k, v in machine_info().items() if k != "torch threads"}  # the run's own is one (OMP_NUM_THREADS)
        record = {**info, "avx512": has_avx512(), "started": time.strftime("%Y-%m-%d %H:%M")}
        atomic_write_text(path, json.dumps(record, indent=2) + "\n")


def suite_work(out: Path, job: Job, after: Work, args) -> Work:
    """The held-out questions and the GLUE suite of `job`'s checkpoint, once `after` (its run) is done."""
    def ready() -> bool | None:
        if not after.done.is_set():
            return False
        return True if finished(out, job) else None

    def run(core: int) -> None:
        if CONTENDERS[job.contender].heldout:
            heldout_questions(out, job.name, run_folder(out, job), args.eval_batches)
        own_scores(out, job.name, run_folder(out, job), args.eval_batches)
        if CONTENDERS[job.contender].glue:
            glue(out, job.name, run_folder(out, job), args, core)
    return Work(f"GLUE {job.contender} {job.budget}", run, ready)


def plan_work(out: Path, cal: dict, args) -> tuple[list[Work], list[Job], list[Job]]:
    """The works in the order they take free cores, the jobs of the result rows (transformers' get their lr when
    the sweep is done), and the sweep's jobs."""
    jobs, sweep = plan_jobs(cal, args)
    pretrain = {job.name: pretrain_work(out, job, args) for job in jobs}
    sweep_works = [pretrain_work(out, job, args) for job in sweep]
    hf_rows = [Job("transformers", b, budget_steps(cal, "transformers", b, args.max_steps_cap), args.hf_lr)
               for b in sorted(args.budgets, key=lambda b: -BUDGETS[b])] if "transformers" in args.contenders else []

    def sweep_done() -> bool | None:
        if args.hf_lr is not None:
            return True
        if not all(w.done.is_set() for w in sweep_works):
            return False
        lr = best_lr(out, sweep)
        if lr is None:
            return None
        for job in hf_rows:
            if job.lr is None:
                job.lr = lr
                print(f"transformers: lr {lr:g} has the lowest held-out MLM loss at {LABELS[args.sweep_budget]}",
                      flush=True)
        return True

    hf_works = [pretrain_work(out, job, args, sweep_done) for job in hf_rows]
    first, rest = jobs[:1], jobs[1:]
    works = [pretrain[j.name] for j in first] + sweep_works + hf_works
    works += [suite_work(out, j, pretrain[j.name], args) for j in first]
    works += [suite_work(out, j, w, args) for j, w in zip(hf_rows, hf_works)]
    for job in rest:
        works += [pretrain[job.name], suite_work(out, job, pretrain[job.name], args)]
    return works, jobs + hf_rows, sweep


# ---- the steps of the experiment -----------------------------------------------------------------------------------------
def prepare_corpus(out: Path, args) -> Path:
    corpus = out / "corpus"
    if (corpus / "manifest.json").is_file():
        return corpus
    print(f"preparing {args.corpus} with {args.vocab} ({HELDOUT_DOCUMENTS} documents held out)", flush=True)
    run_logged(bertforge("prepare", "--input", str(args.corpus), "--vocab", str(args.vocab), "--output", str(corpus),
                         "--heldout-documents", str(HELDOUT_DOCUMENTS), "--workers", str(len(args.cores)),
                         "--no-progress", "--overwrite"), out / "logs" / "prepare.log")
    return corpus


def tokenize_for_transformers(out: Path) -> None:
    """hf_pretrain_mlm.py's tokenized blocks, built once before its runs share them."""
    if (out / "hf-cache" / "blocks.json").is_file():
        return
    run_logged([sys.executable, str(HERE / "hf_pretrain_mlm.py"), "--data", str(out / "corpus"), "--output",
                str(out / "hf-cache-run"), "--max-steps", "1", "--cache", str(out / "hf-cache"), "--prepare-only",
                "--no-progress"], out / "logs" / "hf-tokenize.log")


def calibration(out: Path, args) -> dict:
    path = Path(args.calibration) if args.calibration else out / "calibration.json"
    if not path.is_file():
        tokenize_for_transformers(out)
        print(f"calibrating step times on core {args.cores[-1]} (40 steps of each contender, interleaved)", flush=True)
        run_logged([sys.executable, str(HERE / "budget_calibration.py"), "--data", str(out / "corpus"), "--model",
                    args.model, "--hf-cache", str(out / "hf-cache"), "--output", str(path)],
                   out / "logs" / "calibration.log", args.cores[-1])
    return json.loads(path.read_text(encoding="utf-8"))


def budget_steps(cal: dict, contender: str, budget: str, cap: int | None) -> int | None:
    """The calibrated steps of `contender` in `budget` (at most `cap`, for smoke tests): the calibration's own step
    count when it has one (so a published calibration gives its table's steps on any machine), else the whole
    steps of its step time that fit. None for a contender that spends the budget as CPU time itself (or `cap`
    steps in a smoke test)."""
    if CONTENDERS[contender].budget == "cpu":
        return cap
    steps = cal.get("steps", {}).get(contender, {}).get(budget)
    steps = int(steps) if steps is not None else int(BUDGETS[budget] // cal["seconds_per_step"][contender])
    return min(steps, cap) if cap else steps


def spent(cal: dict, job: Job, folder: Path) -> tuple[int, float]:
    """(steps, CPU-seconds per step) of a finished run: the calibration's for a calibrated contender, the run's own
    summary (its step count and the CPU time its loop spent, a teacher's passes included) for a CPU-budget one."""
    if CONTENDERS[job.contender].kind == "random-init":
        return 0, 0.0
    if job.steps is not None and CONTENDERS[job.contender].budget == "calibrated":
        return job.steps, cal["seconds_per_step"][job.contender]
    from bertforge.training.run_output import read_training_summary
    summary = read_training_summary(folder)
    cpu = summary.extra.get("cpu_seconds") if summary else None
    if not isinstance(cpu, (int, float)) or summary.step <= 0:
        raise SystemExit(f"{folder}: its training summary has no CPU time or no steps; was it run with --cpu-budget?")
    return summary.step, cpu / summary.step


def plan_jobs(cal: dict, args) -> tuple[list[Job], list[Job]]:
    """(bertforge's runs, the longest first; transformers' lr sweep at the sweep budget)."""
    jobs = [Job(c, b, budget_steps(cal, c, b, args.max_steps_cap)) for b in sorted(args.budgets, key=lambda b: -BUDGETS[b])
            for c in args.contenders if CONTENDERS[c].kind == "bertforge"]
    jobs += [Job(c, "0", 0) for c in args.contenders if CONTENDERS[c].kind == "random-init"]
    steps = budget_steps(cal, "transformers", args.sweep_budget, args.max_steps_cap)
    sweep = [Job("transformers", args.sweep_budget, steps, lr, sweep=True)
             for lr in args.hf_lrs] if "transformers" in args.contenders and args.hf_lr is None else []
    return jobs, sweep


def best_lr(out: Path, sweep: list[Job]) -> float | None:
    """The swept lr whose run ends with the lowest held-out MLM loss (bertforge's masks, as every model is asked);
    None when no sweep run finished."""
    losses = {job.lr: json.loads((run_folder(out, job) / "pretrain_result.json").read_text())["heldout_mlm_loss"]
              for job in sweep if finished(out, job)}
    return min(losses, key=losses.get) if losses else None


def report_jobs(out: Path, jobs: list[Job], sweep: list[Job]) -> tuple[list[Job], list[str]]:
    """For --report: the jobs whose run and GLUE suite are both finished, and the names of the others. Running
    nothing, so several invocations (one per core, say) can fill one folder and any of them can draw the table."""
    lr = best_lr(out, sweep) if sweep and all(finished(out, job) for job in sweep) else None
    ready, missing = [], []
    for job in jobs:
        if job.contender == "transformers" and job.lr is None:
            if lr is None:
                missing.append(f"transformers-{job.budget} (its lr sweep is not finished)")
                continue
            job.lr = lr
        if finished(out, job) and (suite_finished(out, job.name) or not CONTENDERS[job.contender].glue):
            ready.append(job)
        else:
            missing.append(job.name + (" (its GLUE suite)" if finished(out, job) else ""))
    return ready, missing


def heldout_questions(out: Path, name: str, folder: Path, eval_batches: int) -> dict:
    """recipe_race.py's held-out questions for one checkpoint (cached in OUT/heldout/NAME.json)."""
    path = out / "heldout" / f"{name}.json"
    if path.is_file():
        return json.loads(path.read_text())
    from recipe_race import evaluate_model

    from bertforge.atomic import atomic_write_text
    result = evaluate_model(folder, str(out / "corpus"), eval_batches)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(result, indent=2) + "\n")
    return result


#: objectives whose own held-out number a row reports: the left-to-right perplexity, MDLM's perplexity bound
OWN_SCORES = {"ltr": "perplexity", "mdlm": "perplexity_bound"}


def own_scores(out: Path, name: str, folder: Path, eval_batches: int) -> dict | None:
    """The held-out numbers of a run's own objective (`heldout_scores`, cached in OUT/heldout/NAME-own.json) for
    the objectives of OWN_SCORES: their perplexities are over the same held-out sequences, so comparable; None
    for the others."""
    from bertforge.outputs import read_run_config
    config = read_run_config(folder)
    objective = config.get("objective") if config else None
    if objective not in OWN_SCORES:
        return None
    path = out / "heldout" / f"{name}-own.json"
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    from bertforge.atomic import atomic_write_text
    from bertforge.pretraining.pretrain import heldout_scores
    result = {"objective": objective, **heldout_scores(folder, out / "corpus", objective, eval_batches)}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(result, indent=2) + "\n")
    return result


def suite_path(out: Path, name: str) -> Path:
    from bertforge.evaluation.glue_result import GLUE_JSON
    return out / "glue" / name / GLUE_JSON


def suite_finished(out: Path, name: str) -> bool:
    """Whether NAME's GLUE suite finished with every task (a suite with a failed task is continued)."""
    from bertforge.evaluation.report import load_result
    path = suite_path(out, name)
    return path.is_file() and not load_result(path).failed


def glue(out: Path, name: str, model: Path, args, core: int | None = None) -> dict:
    """`bertforge glue` on `model` under the experiment's protocol (one job on `core`, or one per core of --cores);
    a suite that finished with every task is kept, any other is continued (it skips its finished units)."""
    from bertforge.evaluation.report import load_result
    path = suite_path(out, name)
    if not suite_finished(out, name):
        print(f"[{time.strftime('%H:%M')}] GLUE ({args.protocol}) for {name}", flush=True)
        run_logged(bertforge("glue", "--model", str(model), "--data", str(args.glue), "--output", str(path.parent),
                             "--protocol", args.protocol, "--jobs", "1" if core is not None else str(len(args.cores)),
                             "--name", name, "--no-progress", *shlex.split(args.glue_args)),
                   out / "logs" / f"glue-{name}.log", core)
    return load_result(path).to_dict()


# ---- the results ----------------------------------------------------------------------------------------------------------
def results_table(rows: list[dict], ceiling: dict | None, floor: dict, tasks: list[str]) -> str:
    from bertforge.evaluation.scores import DISPLAY
    head = ["contender", "budget", "steps", "CPU-s/step", "held-out MLM loss", "seeds", *(DISPLAY[t] for t in tasks),
            "GLUE avg"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def scores(result: dict) -> list[str]:
        cells = [f"{result['tasks'][t]['score']:.1f}" if t in result["tasks"] else "—" for t in tasks]
        return cells + [f"**{result['average']:.1f}**" if result.get("average") is not None else "—"]

    for r in rows:
        heldout = f"{r['heldout']['mlm_loss']:.3f}" if r.get("heldout") else "—"
        cost = f"{r['seconds_per_step']:.3f}" if r["steps"] else "—"
        lines.append("| " + " | ".join([CONTENDERS[r["contender"]].label + (f" (lr {r['lr']:g})" if r.get("lr") else "")
                                          + (" *" if r.get("from") else ""),
                                          LABELS[r["budget"]], f"{r['steps']:,}", cost,
                                          heldout, str(row_seeds(r)), *scores(r["glue"])]) + " |")
    if ceiling is not None:
        lines.append("| " + " | ".join(["all-MiniLM-L6-v2 (pre-trained, the ceiling)", "—", "—", "—", "—",
                                          str(glue_seeds(ceiling)), *scores(ceiling)]) + " |")
    lines.append("| " + " | ".join(["majority class (the floor)", "—", "—", "—", "—", "—", *scores(floor)]) + " |")
    sources = sorted({r["from"] for r in rows if r.get("from")})
    if sources:
        lines += ["", "\\* included from: " + "; ".join(sources)]
    return "\n".join(lines) + "\n"


def glue_seeds(result: dict) -> int:
    """The fine-tuning seeds behind a suite's scores (the most runs any task made; 1 for a slimmed old row)."""
    return max([len(e.get("runs") or ()) for e in result.get("tasks", {}).values()] + [1])


def run_name(row: dict) -> str:
    return Job(row["contender"], row["budget"], row["steps"], row.get("lr")).name


def row_order(row: dict) -> tuple:
    """Rows by budget, the largest first, then in the contenders' order and by lr."""
    return -BUDGETS[row["budget"]], list(CONTENDERS).index(row["contender"]), row.get("lr") or 0


def include_rows(rows: list[dict], paths: list[str], cal: dict, protocol: str) -> list[dict]:
    """`rows` and the rows of earlier results.json files (`--include`) that `rows` does not have (same contender,
    budget and lr), so runs made in other folders or on other days join one table. An earlier row must have been
    scored under the same protocol and made the steps this calibration gives its budget; else it is refused."""
    have = {(r["contender"], r["budget"], r.get("lr")) for r in rows}
    merged = list(rows)
    for path in paths:
        try:
            earlier = json.loads(Path(path).read_text(encoding="utf-8"))
            found = earlier["rows"]
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise SystemExit(f"--include {path}: not a glue_budget.py results.json ({err})") from None
        if earlier.get("protocol") != protocol:
            raise SystemExit(f"--include {path}: scored with --protocol {earlier.get('protocol')}, this table with "
                             f"{protocol}")
        for row in found:
            key = (row["contender"], row["budget"], row.get("lr"))
            if key in have:
                continue
            steps = budget_steps(cal, row["contender"], row["budget"], None)
            if steps is not None and row["steps"] != steps:
                raise SystemExit(f"--include {path}: {row['contender']} at {row['budget']} made {row['steps']} steps, "
                                 f"this calibration gives it {steps} (pass the calibration the earlier runs used)")
            merged.append({**row, "from": row.get("from", str(path))})
            have.add(key)
    return sorted(merged, key=row_order)


def record_rows(rows: list[dict], groups: list[str]) -> list[dict]:
    """`rows` and, from the published records groups `groups` (`--include-records`), the rows of runs `rows` lack:
    contender, budget, steps, the GLUE average and its seed range, as much as the table and the plot need (a run
    made in a folder that is gone still joins the plot; its table line stays the group's own)."""
    from bertforge.results_store import read_store
    store = read_store(REPO / "docs" / "results")
    have = {(r["contender"], r["budget"], r.get("lr")) for r in rows}
    merged = list(rows)
    for group in groups:
        for rid, record in sorted(store.records.items()):
            found = re.fullmatch(rf"{re.escape(group)}/([^/]+)/glue", rid)
            contender, _, budget = found.group(1).rpartition("-") if found else ("", "", "")
            if contender not in CONTENDERS or budget not in BUDGETS or (contender, budget, None) in have:
                continue
            steps, cost = (store.records.get(f"{group}/{found.group(1)}/{k}") for k in ("steps", "cpu-s-per-step"))
            over = sorted({i.split("/")[2] for i in store.records if i.startswith(f"{group}/{found.group(1)}/")
                           and i.count("/") == 3})  # {group}/{run}/{task}/{metric}
            merged.append({"contender": contender, "budget": budget, "lr": None, "heldout": None,
                           "steps": int(steps.value) if steps else 0, "seconds_per_step": cost.value if cost else 0.0,
                           "glue": {"average": record.value, "tasks": {}, "average_over": over}, "spread": record.spread,
                           "seeds": record.seeds, "from": f"docs/results/{group}.json"})
            have.add((contender, budget, None))
    return sorted(merged, key=row_order)


def row_seeds(row: dict) -> int:
    return row.get("seeds") or glue_seeds(row["glue"])


def row_range(row: dict) -> tuple[float, float] | None:
    """The lowest and highest seed's GLUE average of a row of several fine-tuning seeds (None for one seed)."""
    if row.get("spread"):
        return tuple(row["spread"])
    per_seed = sorted(seed_averages(row["glue"])) if row["glue"].get("tasks") else []
    return (per_seed[0], per_seed[-1]) if len(per_seed) > 1 else None


def export_record(record: dict) -> dict:
    """The rows of `record` (a results.json) without paths or commands: what a repository can keep and `--include`
    reads elsewhere."""
    def slim_glue(result: dict) -> dict:
        tasks = {t: {"score": e.get("score"), "metrics": e.get("metrics"), "in_average": e.get("in_average", True),
                     "runs": [{k: run.get(k) for k in ("seed", "lr", "score", "metrics", "steps")}
                              for run in e.get("runs", [])]}
                 for t, e in result["tasks"].items()}
        model = {k: v for k, v in (result.get("model") or {}).items() if k != "path"}
        return {"tasks": tasks, "average": result.get("average"), "average_over": result.get("average_over", []),
                "protocol": result.get("protocol"), "model": model, "created": result.get("created"),
                "software": result.get("software")}

    rows = [{**{k: v for k, v in row.items() if k != "glue"}, "glue": slim_glue(row["glue"])} for row in record["rows"]]
    return {"rows": rows, "protocol": record["protocol"], "sweep": record.get("sweep"),
            "hf_lr": record.get("hf_lr"), "calibration_steps": record["calibration"].get("steps"),
            "ceiling": slim_glue(record["ceiling"]) if record.get("ceiling") else None}


def included_ceiling(paths: list[str]) -> dict | None:
    """The ceiling suite an included results file holds (for the plot's line when this folder has none)."""
    for path in paths:
        ceiling = json.loads(Path(path).read_text(encoding="utf-8")).get("ceiling")
        if ceiling and ceiling.get("average") is not None:
            return ceiling
    return None


def check_included_tasks(rows: list[dict], ceiling: dict) -> None:
    """An included row's average must be over this table's tasks (else its GLUE average is another number)."""
    here = sorted(ceiling.get("average_over", []))
    for row in rows:
        if row.get("from") and sorted(row["glue"].get("average_over", [])) != here:
            raise SystemExit(f"--include: {run_name(row)} ({row['from']}) averages over "
                             f"{','.join(sorted(row['glue'].get('average_over', []))) or 'unknown tasks'}, this "
                             f"table over {','.join(here)}")


def floor_result(glue_result: dict) -> dict:
    """The majority-class floor as a glue.json-like result (each task's "majority" entry)."""
    from bertforge.evaluation.scores import glue_average
    tasks = {t: {"score": e["majority"]["score"]} for t, e in glue_result["tasks"].items() if e.get("majority")}
    return {"tasks": tasks, "average": glue_average({t: e["score"] for t, e in tasks.items()})[0]}


def plot(rows: list[dict], ceiling: dict | None, floor: dict, path: Path, args) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    from bertforge.atomic import atomic_path
    fig, ax = plt.subplots(figsize=(7.2, 4.8))
    for n, r in enumerate(r for r in rows if BUDGETS[r["budget"]] == 0 and r["glue"].get("average") is not None):
        ax.axhline(r["glue"]["average"], color="grey", linestyle="-.", linewidth=1,
                   label=f"{CONTENDERS[r['contender']].label.replace('`', '')} ({r['glue']['average']:.1f})")
    rows = [r for r in rows if BUDGETS[r["budget"]] > 0]
    lines = sorted({(list(CONTENDERS).index(r["contender"]), r.get("lr") or 0) for r in rows}, key=lambda k: (k[0], -k[1]))
    for n, (i, lr) in enumerate(lines):  # one line per contender and lr (transformers' rows may have two lrs)
        contender = list(CONTENDERS)[i]
        mine = sorted((BUDGETS[r["budget"]] / 3600, r["glue"]["average"]) for r in rows
                      if r["contender"] == contender and (r.get("lr") or 0) == lr and r["glue"].get("average") is not None)
        seeds = max([row_seeds(r) for r in rows if r["contender"] == contender and (r.get("lr") or 0) == lr])
        shift = 1.0 + 0.04 * (n - len(lines) / 2) if seeds > 1 else 1.0  # seed ranges side by side, not on top
        mine = [(x * shift, y) for x, y in mine]
        if mine:
            ax.plot(*zip(*mine), marker="o", color=f"C{n}",
                    label=CONTENDERS[contender].label.replace("`", "") + (f" (lr {lr:g})" if lr else "")
                    + (f", median of {seeds} seeds" if seeds > 1 else ", 1 seed"))
        for r in rows:  # a median of several fine-tuning seeds: its lowest and highest seed's average
            if r["contender"] == contender and (r.get("lr") or 0) == lr and row_range(r):
                low, high = row_range(r)
                x, y = BUDGETS[r["budget"]] / 3600 * shift, r["glue"]["average"]
                ax.errorbar([x], [y], yerr=[[y - low], [high - y]], color=f"C{n}", capsize=3, linewidth=1)
    if ceiling is not None:
        ax.axhline(ceiling["average"], color="black", linestyle="--", linewidth=1,
                   label=f"all-MiniLM-L6-v2, pre-trained ({ceiling['average']:.1f})")
    ax.axhline(floor["average"], color="grey", linestyle=":", linewidth=1,
               label=f"majority class ({floor['average']:.1f})")
    ax.set_xscale("log")
    budgets = sorted({BUDGETS[r["budget"]] / 3600 for r in rows})
    ax.set_xticks(budgets, [f"{b:.2g}" for b in budgets])
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("pre-training budget (CPU-hours: CPU time of one core)")
    ax.set_ylabel(f"GLUE average (dev, protocol {args.protocol})")
    smoke = f" (smoke test: at most {args.max_steps_cap} steps)" if args.max_steps_cap else ""
    ax.set_title(f"GLUE average vs CPU-hours: {args.model} from scratch on Wikipedia{smoke}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)


RECORD_DATA = ("Wikipedia of ../shared/data (200 articles held out; 640 held-out sequences, the same 15 % masks); GLUE: "
               "the dev sets of ../shared/data/glue")


def seed_averages(result: dict) -> list[float]:
    """The GLUE average of each fine-tuning seed (the i-th run of every task), for the spread of a median."""
    from bertforge.evaluation import scores
    return scores.seed_averages({t: e.get("runs") or [] for t, e in result["tasks"].items()
                                 if e.get("in_average", True)})


def measuring_command(argv: list[str]) -> str:
    """The command that measures the rows: this one without the flags that only report (--report, --records,
    --export, --include), with the script's path relative to the repository."""
    kept, skip = ["python", "experiments/glue_budget.py"], False
    for arg in argv[1:]:
        if skip:
            skip = False
        elif arg in ("--records", "--export", "--include", "--include-records"):
            skip = True
        elif arg != "--report" and not arg.startswith(("--records=", "--export=", "--include=", "--include-records=")):
            kept.append(arg)
    return "OMP_NUM_THREADS=1 " + shlex.join(kept)


def budget_records(rows: list[dict], group: str, tasks: list[str], args) -> tuple[list, dict]:
    """The results-store records of this folder's own rows (not included ones) and the table that shows them:
    per row its steps, CPU-seconds per step, held-out MLM loss, each task's metrics and the GLUE average (the
    median over seeds; its spread the lowest and highest seed's average)."""
    from bertforge.evaluation.scores import DISPLAY, METRICS
    from bertforge.results_store import Record
    from bertforge.tasks.glue_tasks import GLUE
    records, table_rows = [], []
    command = measuring_command(sys.argv)
    for row in rows:
        if row.get("from"):
            continue
        name, glue_result = run_name(row), row["glue"]
        seeds = glue_seeds(glue_result) if glue_result else 1
        label = CONTENDERS[row["contender"]].label
        spent_on = f"after {LABELS[row['budget']]} of " if BUDGETS[row["budget"]] else "of "
        what = f"{spent_on}{label.replace('`', '')} ({args.model})"

        def add(key: str, value: float, unit: str, text: str, digits: int, **extra):
            records.append(Record.measured(f"{group}/{name}/{key}", value, unit, text, RECORD_DATA, digits=digits,
                                           seeds=extra.pop("seeds", 1), command=command, **extra))
            return "{" + f"{group}/{name}/{key}" + "}"

        cells = [label, LABELS[row["budget"]],
                 add("steps", row["steps"], "steps", f"optimizer steps of 32 sequences {what}", 0) .replace("}", "|bare}"),
                 add("cpu-s-per-step", row["seconds_per_step"], "s", f"CPU-seconds per step {what}", 2)
                 .replace("}", "|bare}") if row["steps"] else "—"]
        cells.append(add("mlm-loss", row["heldout"]["mlm_loss"], "", f"held-out MLM loss {what}", 2)
                     if row.get("heldout") else "—")
        if row.get("own"):  # not a column: a number of two rows only, cited beside the table
            key = OWN_SCORES[row["own"]["objective"]]
            add(key.replace("_", "-"), row["own"][key], "", f"held-out {key.replace('_', ' ')} of its own objective "
                f"({row['own']['objective']}, {args.eval_batches} batches of 32) {what}", 1)
        if glue_result is None:
            continue
        for task in tasks:
            entry = glue_result["tasks"].get(task)
            if not entry:
                cells.append("—")
                continue
            parts = [add(f"{task}/{metric}", entry["metrics"][metric], "",
                         f"{DISPLAY[task]} {metric} (dev, median of {seeds} fine-tuning seeds) {what}", 1, seeds=seeds)
                     for metric in METRICS[task] if entry.get("metrics", {}).get(metric) is not None]
            cells.append("/".join(parts) or "—")
        per_seed = seed_averages(glue_result)
        spread = (min(per_seed), max(per_seed)) if len(per_seed) > 1 else None
        cells.append("**" + add("glue", glue_result["average"], "", f"GLUE average ({len(tasks)} tasks, --protocol "
                                f"{args.protocol}, median of {seeds} fine-tuning seeds per task) {what}", 1,
                                seeds=seeds, spread=spread).replace("}", "|full}" if spread else "}") + "**")
        table_rows.append(cells)
    header = ["contender", "budget", "steps of 32", "CPU-s/step", "held-out MLM loss",
              *[GLUE[t].heading for t in tasks], "GLUE avg (median, seed range)"]
    table = {"header": header, "align": ["---", "---"] + ["---:"] * (len(header) - 2),
             "rows": sorted(earlier_rows(group, header, {run_name(r) for r in rows if not r.get("from")}) + table_rows,
                            key=table_order)}
    return records, {group: table}


def row_run(cells: list[str]) -> str:
    """The run a records-table row shows (the run part of its steps record's id)."""
    found = re.search(r"\{[^/{}]+/([^/{}]+)/steps", cells[2])
    return found.group(1) if found else ""


def table_order(cells: list[str]) -> tuple:
    """Rows by budget, the largest first, then in the contenders' order."""
    contender, _, budget = row_run(cells).partition("-lr")[0].rpartition("-")
    order = list(CONTENDERS)
    return -BUDGETS.get(budget, 0), order.index(contender) if contender in order else len(order), row_run(cells)


def earlier_rows(group: str, header: list[str], measured: set[str]) -> list[list[str]]:
    """The published table's rows of runs this folder did not measure (a group gathers the runs of several
    folders and days); a table with other columns is not merged into."""
    from bertforge.results_store import read_store
    published = read_store(REPO / "docs" / "results").tables.get(group)
    if not published or published["header"] != header:
        return []
    return [row for row in published["rows"] if row_run(row) and row_run(row) not in measured]


def main() -> None:
    args = parse_args()
    out = Path(args.out)
    if args.report and not (Path(args.calibration) if args.calibration else out / "calibration.json").is_file():
        raise SystemExit(f"--report: {out} has no calibration.json; run without --report first")
    out.mkdir(parents=True, exist_ok=True)
    prepare_corpus(out, args)
    cal = calibration(out, args)
    if "transformers" in args.contenders:
        tokenize_for_transformers(out)
    works, jobs, sweep = plan_work(out, cal, args)
    missing: list[str] = []
    if args.report:
        jobs, missing = report_jobs(out, jobs, sweep)
    else:
        failures = schedule(works, args.cores)
        if failures:
            raise SystemExit("some runs failed (the others are kept; re-run to retry):\n  " +
                             "\n  ".join(f"{name}: {why}" for name, why in failures.items()))
    rows = []
    for job in jobs:
        folder = run_folder(out, job)
        steps, seconds_per_step = spent(cal, job, folder)
        heldout = heldout_questions(out, job.name, folder, args.eval_batches) if CONTENDERS[job.contender].heldout else None
        rows.append({"contender": job.contender, "budget": job.budget, "steps": steps, "lr": job.lr,
                     "seconds_per_step": seconds_per_step,
                     "machine": json.loads(m.read_text()) if (m := machine_path(out, job.name)).is_file() else None,
                     "heldout": heldout, "own": own_scores(out, job.name, folder, args.eval_batches),
                     "glue": glue(out, job.name, folder, args) if CONTENDERS[job.contender].glue else None})
    unscored = [r for r in rows if r["glue"] is None]  # their records only
    rows = include_rows([r for r in rows if r["glue"] is not None], args.include, cal, args.protocol)
    rows = record_rows(rows, args.include_records)
    included = {run_name(r) for r in rows if r.get("from")}
    missing = [m for m in missing if m.split(" ")[0] not in included]
    ceiling_path = suite_path(out, "all-MiniLM-L6-v2")
    if args.report and not args.no_ceiling and not ceiling_path.is_file():
        raise SystemExit(f"--report: the ceiling's GLUE suite ({ceiling_path}) is not there yet; run without "
                         "--report first (or pass --no-ceiling)")
    ceiling = None if args.no_ceiling else glue(out, "all-MiniLM-L6-v2", Path(args.ceiling), args)
    reference = ceiling or next((r["glue"] for r in rows if not r.get("from")), None)
    if reference is None:
        raise SystemExit("--no-ceiling: no run of this folder is finished to take the tasks and the floor from")
    check_included_tasks(rows, reference)
    floor = floor_result(reference)
    tasks = [t for t in reference["tasks"]]
    from bertforge.atomic import atomic_write_text
    swept = {f"{job.lr:g}": json.loads((run_folder(out, job) / "pretrain_result.json").read_text())["heldout_mlm_loss"]
             for job in sweep if finished(out, job)}
    record = {"rows": rows, "without_glue": unscored, "not_finished": missing,
              "sweep": {"budget": args.sweep_budget, "heldout_mlm_loss": swept}, "hf_lr": args.hf_lr, "ceiling": ceiling,
              "floor": floor, "calibration": cal, "protocol": args.protocol,
              "glue_args": args.glue_args, "max_steps_cap": args.max_steps_cap, "command": shlex.join(sys.argv),
              "included_sweeps": {path: json.loads(Path(path).read_text(encoding="utf-8")).get("sweep")
                                  for path in args.include}}
    atomic_write_text(out / "results.json", json.dumps(record, indent=2) + "\n")
    if args.export:
        atomic_write_text(Path(args.export), json.dumps(export_record(record), indent=1) + "\n")
    if args.records:
        from bertforge.results_store import write_records
        averaged = [t for t in tasks if reference["tasks"][t].get("in_average", True)]
        records, table = budget_records(rows + unscored, args.records, averaged, args)
        print(f"wrote {len(records)} records and table {args.records} to "
              f"{write_records(args.records, records, REPO / 'docs' / 'results', table)}")
    table = results_table(rows, ceiling, floor, tasks)
    atomic_write_text(out / "results.md", table)
    plot(rows, ceiling or included_ceiling(args.include), floor, out / "glue-vs-budget.png", args)
    print(table)
    if missing:
        print("not finished yet (re-run without --report to finish them): " + ", ".join(missing))
    print(f"wrote {out / 'results.md'}, {out / 'results.json'}, {out / 'glue-vs-budget.png'}"
          + (f", {args.export}" if args.export else ""))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    shared = REPO.parent / "shared" / "data"
    parser.add_argument("--out", required=True, help="the experiment's folder (re-run the command to continue)")
    parser.add_argument("--corpus", default=str(shared / "corpus" / "wikipedia-en-2018" / "wiki_en.txt.xz"))
    parser.add_argument("--vocab", default=None, help="tokenizer folder (default: all-MiniLM-L6-v2's, uncased)")
    parser.add_argument("--glue", default=str(shared / "glue"), help="the GLUE folder")
    parser.add_argument("--ceiling", default=None, help="the pre-trained model of the ceiling row (default: MiniLM)")
    parser.add_argument("--no-ceiling", action="store_true",
                        help="no ceiling row (its suite is neither run nor needed); the floor comes from a run's suite")
    parser.add_argument("--model", default="mini", help="the size preset of every contender")
    parser.add_argument("--contenders", default=",".join(DEFAULT_CONTENDERS),
                        help=f"settings files of {CONTENDER_DIR.name}/, by name: {', '.join(CONTENDERS)}")
    parser.add_argument("--teacher", default=None,
                        help="the teacher of distilling contenders (default: all-MiniLM-L6-v2's folder)")
    parser.add_argument("--budgets", default=",".join(BUDGETS), help=f"of {', '.join(BUDGETS)}")
    parser.add_argument("--hf-lrs", default="2.5e-4,5e-4,1e-3,2e-3", help="transformers' peak lrs, swept")
    parser.add_argument("--hf-lr", type=float, default=None,
                        help="transformers' peak lr without a sweep (e.g. what an earlier sweep in another folder picked)")
    parser.add_argument("--sweep-budget", default="20m", choices=list(BUDGETS),
                        help="the budget of transformers' lr sweep runs")
    parser.add_argument("--cores", default="0,1", help="one run per listed core at a time")
    parser.add_argument("--calibration", help="a budget_calibration.py result (default: OUT/calibration.json, "
                                              "measured when missing)")
    parser.add_argument("--protocol", default="cpu", help="the `bertforge glue` protocol of every checkpoint")
    parser.add_argument("--glue-args", default="", help="more `bertforge glue` flags, e.g. \"--seeds 3\"")
    parser.add_argument("--save-every", type=int, default=500, help="checkpoint every N steps (the resume point)")
    parser.add_argument("--eval-batches", type=int, default=20, help="held-out batches of 32 per checkpoint")
    parser.add_argument("--report", action="store_true",
                        help="run nothing: the table, results.json and the plot of the runs whose GLUE suite is "
                             "finished, naming the others")
    parser.add_argument("--include-records", action="append", default=[], metavar="GROUP",
                        help="also draw the rows of this published records group (docs/results/GROUP.json) that this "
                        "folder has no run of: their averages and seed ranges join the plot, their table lines the "
                        "group's table")
    parser.add_argument("--include", action="append", default=[], metavar="RESULTS_JSON",
                        help="rows of an earlier results.json (another folder, another day) to add to the table and "
                             "the plot where this folder has no run of the same contender, budget and lr; repeatable")
    parser.add_argument("--export", metavar="FILE",
                        help="also write the rows without paths or commands (for a repository, and --include)")
    parser.add_argument("--records", metavar="GROUP",
                        help="also write this folder's rows as results-store records (docs/results/GROUP.json) and the "
                             "table GROUP that shows them (a page holds it as <!-- results: GROUP -->)")
    parser.add_argument("--max-steps-cap", type=int, default=None,
                        help="smoke tests only: at most N steps per run (the budgets are then not met)")
    args = parser.parse_args()
    args.contenders = [c for c in args.contenders.split(",") if c]
    args.budgets = [b for b in args.budgets.split(",") if b]
    for flag, values, known in (("--contenders", args.contenders, CONTENDERS), ("--budgets", args.budgets, BUDGETS)):
        unknown = [v for v in values if v not in known]
        if unknown or not values:
            parser.error(f"{flag}: unknown {', '.join(unknown) or 'nothing given'}; choose from {', '.join(known)}")
    try:
        args.hf_lrs = [float(v) for v in args.hf_lrs.split(",") if v]
        args.cores = [int(v) for v in args.cores.split(",") if v]
    except ValueError as err:
        parser.error(f"--hf-lrs / --cores: {err}")
    if not args.hf_lrs or not args.cores:
        parser.error("--hf-lrs and --cores need at least one value")
    if not (args.vocab and args.ceiling and args.teacher):
        try:
            default = str(minilm_folder())
        except FileNotFoundError as err:
            parser.error(f"--vocab/--ceiling/--teacher: {err}")
        args.vocab, args.ceiling, args.teacher = args.vocab or default, args.ceiling or default, args.teacher or default
    for flag, path in (("--corpus", args.corpus), ("--glue", args.glue), ("--vocab", args.vocab),
                       ("--ceiling", args.ceiling)):
        if not Path(path).exists():
            parser.error(f"{flag} {path}: not found")
    return args


if __name__ == "__main__":
    main()

"""Steps per budget for "GLUE at a pre-training budget": the CPU time of each contender's optimizer step, side by side.

A budget of 5 or 20 CPU-minutes, 1 or 3 CPU-hours (CPU time of one core) becomes a step budget per contender, so
that the runs themselves (`experiments/glue_budget.py`) can share a machine without their results depending on
its load. A step is timed here in CPU time of the process (`time.process_time`), not wall-clock: a step that
waits for the core while another job runs is not charged for the wait, so the budgets do not depend on how busy
the machine is. The contenders run in ONE process on ONE thread, taking turns step by step (A B C A B C ..., the
order rotating), after a few warm-up steps each; the median of each contender's steps is its CPU-seconds per
step. (On a busy machine a step still costs somewhat more CPU time than on an idle one, through shared caches
and memory bandwidth; turn-taking spreads that over the contenders alike.)

The contenders, at bertforge's `mini` size, batch 32, sequence length 128, each on its own real batches from the
same corpus (the prepared corpus for bertforge; its raw text, tokenized run_mlm's way, for transformers):

* `fast`: `bertforge pretrain --recipe fast --model mini`; `bert`: `bertforge pretrain --recipe bert --model
  mini`. The step is the engine's own (`bertforge.training.engine`): the pre-training stage `run_pretraining`
  builds (`build_stage`), and the loop body of `fit` — next batch (build + mask), forward, backward, clipping,
  fused AdamW, lr schedule, metrics log.
* `transformers`: `experiments/hf_pretrain_mlm.py` — `BertForMaskedLM` and `Trainer` (fused AdamW, linear
  schedule, clipping 1.0, `DataCollatorForLanguageModeling`). The Trainer runs its own training loop in a
  second thread that a callback holds at the end of every step until its next turn: a timed step is the
  Trainer's whole step (data loader and collator, forward, backward, clipping, optimizer, scheduler, logging).

    OMP_NUM_THREADS=1 taskset -c 1 python experiments/budget_calibration.py --data ../runs/wiki \\
        --steps 40 --output ../runs/budget/calibration.json [--records DIR]
    python experiments/budget_calibration.py --from experiments/calibrations/epyc-avx2-2026-11-25.json \\
        [--data ../runs/wiki] --records DIR

`--records DIR` writes the calibration's published records (group results-glue-budget, ids under
results-glue-budget/steps/: each contender's steps in 5 CPU-minutes and the quartiles of its step times) and the
table that shows them, leaving the group's other records as they are; `--from FILE` writes them from a calibration
this script wrote before (FILE, its --output) instead of measuring (`--data` then only names its corpus).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Sequence

os.environ.setdefault("HF_HUB_OFFLINE", "1")

HERE = Path(__file__).resolve().parent
from bertforge.measuring import (cpu_model, interleave, machine_info, markdown_table, median,  # noqa: E402
                                 portable_command, start_process)
from bertforge.results_store import today  # noqa: E402

CONTENDERS = {"fast": "bertforge --recipe fast", "bert": "bertforge --recipe bert", "transformers": "transformers"}
BUDGETS = {"5m": 5 * 60, "20m": 20 * 60, "1h": 3600, "3h": 3 * 3600}  # CPU-seconds


def steps_for(seconds_per_step: float, budget_seconds: float) -> int:
    """The whole steps that fit in the budget."""
    return int(budget_seconds // seconds_per_step)


def interquartile(samples: Sequence[float]) -> list[float]:
    """[lower quartile, upper quartile] of the step times (the sorted samples at 1/4 and 3/4 of their count)."""
    ordered = sorted(samples)
    return [ordered[len(ordered) // 4], ordered[(3 * len(ordered)) // 4]]


def cpu_timed(step: Callable[[], None]) -> Callable[[], float]:
    """An `interleave` candidate: one call of `step`, timed in CPU-seconds of this process (every thread of it:
    the Trainer steps in its own thread while this one waits without using the CPU)."""
    def run() -> float:
        start = time.process_time()
        step()
        return time.process_time() - start
    return run


# ---- bertforge: the engine's step on the real pre-training stage ------------------------------------------------------
def bertforge_step(recipe: str, data: str, model: str, batch_size: int, workdir: Path) -> Callable[[], float]:
    """One call = one optimizer step of `bertforge pretrain --recipe RECIPE --model MODEL`, by the engine's code."""
    from bertforge.pretraining.pretrain import PretrainConfig, build_stage
    from bertforge.training.engine import Session, Stepper
    out = workdir / recipe
    out.mkdir(parents=True)
    cfg = PretrainConfig.from_options(data=data, output=str(out), recipe=recipe, model=model, batch_size=batch_size,
                                      max_steps=10 ** 6, eval_batches=0, save_every=0, progress=False, device="cpu")
    session = Session("cpu")
    stage, _ = build_stage(cfg, session)
    return Stepper(stage, cfg.train, session, out)  # the body of `engine.fit`'s loop, without its evaluations


# ---- transformers: the Trainer's own loop, one step per turn ----------------------------------------------------------
class SteppedTrainer:
    """`Trainer.train()` in a second thread, held by a callback at the end of every step: each call lets it run
    exactly one more step (from the end of the last one to the end of the next) and waits for it."""

    def __init__(self, trainer) -> None:
        from transformers import TrainerCallback
        self.go, self.done = threading.Semaphore(0), threading.Semaphore(0)
        self.stopping = False
        self.error: BaseException | None = None
        gate = self

        class Gate(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):
                gate.done.release()
                gate.go.acquire()
                if gate.stopping:
                    control.should_training_stop = True

        trainer.add_callback(Gate())
        self.thread = threading.Thread(target=self._train, args=(trainer,), daemon=True)
        self.thread.start()
        self._wait()  # the first step pays for the Trainer's set-up: not a sample

    def _train(self, trainer) -> None:
        try:
            trainer.train()
        except BaseException as err:  # handed to the caller by _wait
            self.error = err
        finally:
            self.done.release()

    def _wait(self) -> None:
        self.done.acquire()
        if self.error is not None:
            raise RuntimeError(f"the Trainer stopped: {self.error!r}") from self.error
        if not self.thread.is_alive():
            raise RuntimeError("the Trainer finished before the calibration did; raise its max_steps")

    def __call__(self) -> None:
        self.go.release()
        self._wait()

    def close(self) -> None:
        self.stopping = True
        self.go.release()
        self.thread.join()


def transformers_step(data: str, model: str, batch_size: int, workdir: Path, cache: Path | None) -> SteppedTrainer:
    import torch
    from transformers import BertForMaskedLM

    import hf_pretrain_mlm as hf
    from bertforge.pretraining.pretrain import resolve_vocab
    args = hf.parse_args(["--data", data, "--output", str(workdir / "transformers"), "--max-steps", str(10 ** 6),
                          "--model", model, "--batch-size", str(batch_size), "--no-progress"])
    tokenizer = hf.load_hf_tokenizer(resolve_vocab(data, None))
    train, _ = hf.build_blocks(Path(data), hf.corpus_path(Path(data), None), tokenizer, args.block_size,
                               cache or workdir / "transformers-data")
    torch.manual_seed(args.seed)
    trainer = hf.build_trainer(args, BertForMaskedLM(hf.hf_config(model, tokenizer)), tokenizer, train,
                               workdir / "transformers", save_strategy="no", disable_tqdm=True)
    return SteppedTrainer(trainer)


# ---- the measurement ------------------------------------------------------------------------------------------------
def calibrate(args) -> dict:
    with tempfile.TemporaryDirectory(prefix="budget-calibration-") as tmp:
        work = Path(tmp)
        steps: dict[str, Callable] = {
            "fast": bertforge_step("fast", args.data, args.model, args.batch_size, work),
            "bert": bertforge_step("bert", args.data, args.model, args.batch_size, work),
            "transformers": transformers_step(args.data, args.model, args.batch_size, work,
                                              Path(args.hf_cache) if args.hf_cache else None),
        }
        try:
            times = interleave({name: cpu_timed(step) for name, step in steps.items()}, args.steps, warmup=args.warmup,
                               log=lambda line: print(line, file=sys.stderr, flush=True))
        finally:
            steps["transformers"].close()
    per_step = {name: median(samples) for name, samples in times.items()}
    return {"seconds_per_step": per_step, "clock": "process CPU time",
            "interquartile": {name: interquartile(samples) for name, samples in times.items()},
            "steps": {name: {b: steps_for(s, sec) for b, sec in BUDGETS.items()} for name, s in per_step.items()},
            "samples": times, "budgets_seconds": BUDGETS, "date": today(),
            "setting": {"model": args.model, "batch_size": args.batch_size, "seq_len": 128, "threads": 1,
                        "steps_timed": args.steps, "warmup": args.warmup, "data": shown_path(args.data)},
            "machine": {**machine_info(), "avx512": has_avx512(), "affinity": sorted(os.sched_getaffinity(0))}}


def shown_path(path: str) -> str:
    """`path` as a record names it (`bertforge.measuring.portable_path`)."""
    from bertforge.measuring import portable_path
    return portable_path(path)


def has_avx512() -> bool:
    try:
        return "avx512" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


def table(result: dict) -> str:
    """The contenders' step times and budgets; the last column is the median over rounds of the transformers
    step's time over this contender's in the same round (the ratio the machine's load does not move)."""
    rows = []
    reference = result["samples"]["transformers"]
    for name, label in CONTENDERS.items():
        s = result["seconds_per_step"][name]
        q1, q3 = result["interquartile"][name]
        ratio = median([t / mine for t, mine in zip(reference, result["samples"][name])])
        rows.append([label, f"{s:.3f}", f"{q1:.3f}-{q3:.3f}", *(f"{result['steps'][name][b]:,}" for b in BUDGETS),
                     f"{ratio:.2f}x"])
    return markdown_table(["contender", "CPU-s/step (median)", "interquartile", "steps in 5 CPU-min",
                           "steps in 20 CPU-min", "steps in 1 CPU-h", "steps in 3 CPU-h",
                           "transformers' step / this step"], rows)


GROUP = "results-glue-budget"
#: contender -> (its part of the record ids, its name in the records' descriptions, its row of the table, its name
#: in the step counts of glue_budget.py's runs, group glue-at-budget)
STEP_ROWS = {"fast": ("bertforge-recipe-fast", "bertforge --recipe fast", "`bertforge --recipe fast`", "fast"),
             "bert": ("bertforge-recipe-bert", "bertforge --recipe bert", "`bertforge --recipe bert`", "bert"),
             "transformers": ("transformers-runmlm-s-way", "transformers (run_mlm's way)",
                              "`transformers` (run_mlm's way)", "transformers-lr5e-4")}
#: the docs' steps table (docs/RESULTS.md): each contender's median step (the glue-at-budget record) with this
#: calibration's quartiles, its steps in 5 CPU-minutes, and the steps its runs made at the longer budgets
STEPS_TABLE = {
    "header": ["contender", "CPU-s/step", "5 CPU-min", "20 CPU-min", "1 CPU-h", "3 CPU-h"],
    "align": ["---", "---:", "---:", "---:", "---:", "---:"],
    "rows": [[row, f"{{glue-at-budget/{name}/cpu-s-per-step|bare}} ({{{GROUP}/steps/{key}/cpu-s-step/2}}-"
                   f"{{{GROUP}/steps/{key}/cpu-s-step/3}})",
              f"{{{GROUP}/steps/{key}/5-cpu-min|bare}}",
              *(f"{{glue-at-budget/{runs}-{budget}/steps|bare}}" for budget in ("20m", "1h", "3h"))]
             for name, (key, _, row, runs) in STEP_ROWS.items()]}


def make_records(result: dict) -> list:
    """The calibration's records: per contender its steps in 5 CPU-minutes and the lower and upper quartiles of
    its step's CPU-seconds; the calibration's command, day and machine, not those of the process writing them."""
    from bertforge.results_store import Record
    setting, machine = result["setting"], result["machine"]
    data = f"{setting['data']}, batch {setting['batch_size']}, sequence length {setting['seq_len']}"
    cpu = f"{machine['cpu']} ({'AVX-512' if machine.get('avx512') else 'no AVX-512'})"
    what = "GLUE at a compute budget: steps per budget (calibration): {}, {}"
    records = []
    for name, (key, label, _, _) in STEP_ROWS.items():
        low, high = result["interquartile"][name]
        for rid, value, unit, text, digits in (
                ("5-cpu-min", result["steps"][name]["5m"], "steps", "5 CPU-min", 0),
                ("cpu-s-step/2", low, "", "CPU-s/step, lower quartile of the timed steps", 2),
                ("cpu-s-step/3", high, "", "CPU-s/step, upper quartile of the timed steps", 2)):
            record = Record.measured(f"{GROUP}/steps/{key}/{rid}", value, unit, what.format(label, text), data,
                                     command=result["command"], digits=digits)
            records.append(dataclasses.replace(record, date=result["date"], cpu=cpu, threads=setting["threads"]))
    return records


def write_calibration_records(result: dict, folder: str) -> Path:
    """The calibration's records into `folder`'s group results-glue-budget: its steps/ records replaced, the
    group's other records (the GLUE runs') left as they are, and the steps table written as the docs show it."""
    from bertforge.results_store import write_records
    return write_records(GROUP, make_records(result), folder, tables={f"{GROUP}-steps": STEPS_TABLE},
                         replace=f"{GROUP}/steps/")


def read_calibration(path: str, corpus: str | None) -> dict:
    """A calibration this script wrote before (its --output), with what its records need and an older file lacks:
    its day (else the date in the file's name), its corpus (else `corpus`) and its command, naming the file."""
    result = json.loads(Path(path).read_text(encoding="utf-8"))
    named = re.search(r"\d{4}-\d{2}-\d{2}", Path(path).name)
    result.setdefault("date", named.group(0) if named else None)
    if result["date"] is None:
        raise SystemExit(f"--from {path}: the calibration has no date (and its file name names none)")
    result["setting"].setdefault("data", shown_path(corpus) if corpus else "a corpus `bertforge prepare` wrote")
    command = result.get("command", "python experiments/budget_calibration.py")
    result["command"] = f"{command} (its output: {shown_path(path)})"
    return result


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", help="the corpus as `bertforge prepare` wrote it (with the MiniLM vocab); "
                        "required unless --from")
    parser.add_argument("--model", default="mini", help="the size preset of all three contenders")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=40, help="timed steps per contender")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps per contender first")
    parser.add_argument("--hf-cache", help="folder of hf_pretrain_mlm.py's tokenized blocks (reused if it has them)")
    parser.add_argument("--output", help="also write the result here (JSON), for glue_budget.py")
    parser.add_argument("--records", metavar="DIR", help=f"also write the published records (group {GROUP}, ids "
                        f"{GROUP}/steps/...) into DIR, e.g. docs/results")
    parser.add_argument("--from", dest="source", metavar="FILE",
                        help="measure nothing: write --records from this calibration (an earlier --output)")
    args = parser.parse_args(argv)
    if args.source:
        if not args.records:
            parser.error("--from writes records: give --records DIR")
        path = write_calibration_records(read_calibration(args.source, args.data), args.records)
        print(f"wrote the calibration's records to {path}")
        return
    if args.data is None:
        parser.error("--data is required (unless --from)")
    if args.steps < 1 or args.warmup < 0 or args.batch_size < 1:
        parser.error("--steps and --batch-size must be at least 1, --warmup at least 0")
    if not (Path(args.data) / "manifest.json").is_file():
        parser.error(f"--data {args.data}: not a folder written by `bertforge prepare` (no manifest.json)")
    start_process(1)
    result = calibrate(args)
    result["command"] = portable_command("experiments/budget_calibration.py",
                                         list(sys.argv[1:] if argv is None else argv))
    print(table(result))
    print(f"\nCPU: {cpu_model()} (avx512: {'yes' if result['machine']['avx512'] else 'no'}); one thread, cores "
          f"{result['machine']['affinity']}; {args.steps} steps each after {args.warmup} warm-up, interleaved, "
          "timed in process CPU time")
    if args.output:
        from bertforge.atomic import atomic_write_text
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(Path(args.output), json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.output}")
    if not all(math.isfinite(s) and s > 0 for s in result["seconds_per_step"].values()):
        raise SystemExit("a contender's step time is not a positive number")
    if args.records:
        print(f"wrote the calibration's records to {write_calibration_records(result, args.records)}")


if __name__ == "__main__":
    main()

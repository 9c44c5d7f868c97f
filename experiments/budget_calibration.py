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
        --steps 40 --output ../runs/budget/calibration.json
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")

HERE = Path(__file__).resolve().parent
from bertforge.measuring import cpu_model, interleave, machine_info, markdown_table, median, start_process  # noqa: E402

CONTENDERS = {"fast": "bertforge --recipe fast", "bert": "bertforge --recipe bert", "transformers": "transformers"}
BUDGETS = {"5m": 5 * 60, "20m": 20 * 60, "1h": 3600, "3h": 3 * 3600}  # CPU-seconds


def steps_for(seconds_per_step: float, budget_seconds: float) -> int:
    """The whole steps that fit in the budget."""
    return int(budget_seconds // seconds_per_step)


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
            "steps": {name: {b: steps_for(s, sec) for b, sec in BUDGETS.items()} for name, s in per_step.items()},
            "samples": times, "budgets_seconds": BUDGETS,
            "setting": {"model": args.model, "batch_size": args.batch_size, "seq_len": 128, "threads": 1,
                        "steps_timed": args.steps, "warmup": args.warmup},
            "machine": {**machine_info(), "avx512": has_avx512(), "affinity": sorted(os.sched_getaffinity(0))}}


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
        samples = sorted(result["samples"][name])
        q1, q3 = samples[len(samples) // 4], samples[(3 * len(samples)) // 4]
        ratio = median([t / mine for t, mine in zip(reference, result["samples"][name])])
        rows.append([label, f"{s:.3f}", f"{q1:.3f}-{q3:.3f}", *(f"{result['steps'][name][b]:,}" for b in BUDGETS),
                     f"{ratio:.2f}x"])
    return markdown_table(["contender", "CPU-s/step (median)", "interquartile", "steps in 5 CPU-min",
                           "steps in 20 CPU-min", "steps in 1 CPU-h", "steps in 3 CPU-h",
                           "transformers' step / this step"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="the corpus as `bertforge prepare` wrote it (with the MiniLM vocab)")
    parser.add_argument("--model", default="mini", help="the size preset of all three contenders")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=40, help="timed steps per contender")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps per contender first")
    parser.add_argument("--hf-cache", help="folder of hf_pretrain_mlm.py's tokenized blocks (reused if it has them)")
    parser.add_argument("--output", help="also write the result here (JSON), for glue_budget.py")
    args = parser.parse_args()
    if args.steps < 1 or args.warmup < 0 or args.batch_size < 1:
        parser.error("--steps and --batch-size must be at least 1, --warmup at least 0")
    if not (Path(args.data) / "manifest.json").is_file():
        parser.error(f"--data {args.data}: not a folder written by `bertforge prepare` (no manifest.json)")
    start_process(1)
    result = calibrate(args)
    result["command"] = " ".join(["python", *sys.argv])
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


if __name__ == "__main__":
    main()

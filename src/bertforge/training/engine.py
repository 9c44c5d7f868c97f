"""The training engine: one loop for pre-training, distillation and fine-tuning.

A `Stage` says what is trained — its model, its batches, its loss, its metrics and its evaluation. The engine
owns everything around that, once: device and precision, DDP under `torchrun`, gradient accumulation, the step
and wall-clock budgets, non-finite steps, atomic checkpoints with exact resume, the best checkpoint and early
stopping, `metrics.jsonl` + `curves.png`, progress, TensorBoard. `fit(stage, options, session)` is the loop:

    while not run.finished():
        stage.set_progress(run.fraction_done())    # e.g. a sequence-length schedule
        loss = run.accumulate_gradients()          # grad_accum micro-batches under autocast, DDP-synced once
        run.update(loss)                           # clip, skip a non-finite step, optimizer + lr schedule
        run.log()                                  # every log_every steps: metrics.jsonl, progress, TensorBoard
        run.maybe_evaluate()                       # every eval_every steps: best checkpoint, early stopping
        run.maybe_checkpoint()                     # every save_every steps: atomic, resumable
    return run.finish()                            # final checkpoint and evaluation, best weights, final save

A run killed at any moment and started again with the same settings continues from its newest complete
checkpoint and ends bitwise equal to one that was never interrupted: a checkpoint holds everything a step
depends on (weights, optimizer, schedule, gradient scaler, every rank's RNG, the stage's data position).
"""
from __future__ import annotations

import contextlib
import math
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from bertforge.allocator import bound_kept_memory
from bertforge.atomic import atomic_directory, atomic_path
from bertforge.device import Precision
from bertforge.outputs import is_finished
from bertforge.settings import SettingError
from bertforge.training import checkpointing as ckpt
from bertforge.training import distributed as dist_
from bertforge.training.clock import RunClock
from bertforge.training.resume import resume
from bertforge.training.run_log import RunLog
from bertforge.training.optim import build_optimizer, build_scheduler, set_beta1, set_budget_lr
from bertforge.training.options import FaultHooks, TrainOptions
from bertforge.training.run_output import read_training_summary, write_training_summary
from bertforge.training.summary import TrainingSummary
from bertforge.training.progress import cpu_share_note, machine_load, progress
from bertforge.training.schedules import SCHEDULES
from bertforge.training.state import EngineState, TrainingState

__all__ = ["FaultHooks", "FitResult", "NonFiniteLossError", "Session", "Stage", "Stepper", "TrainOptions", "fit"]

BEST_DIR = "best"
NO_LIMIT = 10 ** 12
EXPLODED = 100.0  # a final loss this many times the first (and above 10) is a diverged run, not a slow one


class NonFiniteLossError(SettingError, RuntimeError):
    """Too many consecutive steps with a NaN/inf loss or gradient: the run diverged (the message names the
    settings to change)."""


class LostWeightsError(SettingError, RuntimeError):
    """The weights a finished run must hold are gone from OUTPUT (the message names the settings to rerun with)."""




class Stage:
    """What the engine trains. A stage sets `model` (on the session's device), `tokenizer` (saved beside the
    model, may be None) and implements `next_batch` and `loss`; everything else has a default."""

    name = "train"
    model: torch.nn.Module
    tokenizer: Any = None
    find_unused_parameters = False      # DDP: parameters some steps leave without gradient (e.g. an unused head)
    final_checkpoint = True             # a checkpoint at the end too (a re-run then knows the run is done)
    recorded_later: dict[str, Any] = {}  # run_record keys older checkpoints lack, with the value those runs used

    def run_record(self) -> dict[str, Any]:
        """The stage's settings that a resumed run must share (data, objective, model...)."""
        return {}

    def next_batch(self) -> dict[str, Any]:
        raise NotImplementedError

    def loss(self, net: torch.nn.Module, batch: dict[str, Any]) -> Any:
        """Forward one micro-batch through `net` (the model, DDP-wrapped when distributed); an output with `.loss`."""
        raise NotImplementedError

    def add_metrics(self, sums: dict[str, float], out: Any, batch: dict[str, Any]) -> None:
        """Add this micro-batch's counts to `sums` (summed over ranks before `summarize`)."""

    def summarize(self, sums: dict[str, float]) -> dict[str, float]:
        return {}

    def set_progress(self, fraction: float) -> None:
        """Called before every step with the fraction of the run done (steps or time)."""

    def evaluate(self) -> dict[str, float]:
        """Held-out metrics (rank 0 only); {} when the stage has nothing to evaluate."""
        return {}

    def score(self, metrics: dict[str, float]) -> float | None:
        """The number `keep="best"` and `patience` compare (higher is better); None: no such number."""
        return None

    def state_dict(self) -> dict[str, Any]:
        """The stage's position (e.g. epoch and batch index), saved with each checkpoint."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass

    def save(self, folder: Path) -> None:
        """The model (and tokenizer) in the Hugging Face layout; a task stage adds its task.json."""
        self.model.save_pretrained(folder)
        if self.tokenizer is not None:
            self.tokenizer.save_pretrained(folder)

    def load_weights(self, folder: Path) -> None:
        from bertforge.checkpoint import load_hf_state_dict, read_state_dict
        load_hf_state_dict(self.model, read_state_dict(folder)[0], source=folder)

    def postfix(self, values: dict[str, float]) -> dict[str, str]:
        """What the progress bar shows besides the loss."""
        return {}


@dataclass
class FitResult:
    output: Path
    step: int
    stopped_by: str                     # "max-steps", "time-budget", "cpu-budget" or "early-stopping"
    skipped_steps: int
    final_eval: dict[str, float] = field(default_factory=dict)
    best: dict[str, Any] | None = None  # {"step", "score", "metrics"} when the stage scores evaluations
    elapsed: float = 0.0
    tokens_seen: int = 0
    resumed_from: Path | None = None
    notes: list[str] = field(default_factory=list)
    cpu_seconds: float = 0.0            # the training loop's CPU time (all threads, all ranks), over every resume


class Session:
    """One process's place in the run: rank, world size, device and precision (joins the process group under
    torchrun; `timeout` bounds every wait for the other processes, in seconds). The run's device and precision are
    decided here and nowhere else in training."""

    def __init__(self, device: str = "auto", timeout: float = dist_.DEFAULT_TIMEOUT) -> None:
        self.info = dist_.init_distributed(device, timeout)
        self._precisions: dict[str, Precision] = {}

    def precision(self, name: str = "auto") -> Precision:
        """The run's precision for `--precision name` on this process's device: decided once, here, and handed to
        the stage, the engine and the run's final evaluation alike."""
        if name not in self._precisions:
            self._precisions[name] = Precision.resolve(name, self.device)
        return self._precisions[name]

    @property
    def device(self) -> torch.device:
        return self.info.device

    @property
    def is_main(self) -> bool:
        return self.info.is_main

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, kind: Any, error: BaseException | None, trace: Any) -> None:
        try:
            dist_.cleanup(self.info)
        except Exception:
            if error is None:
                raise
        lost = dist_.lost_contact(error, self.info) if error is not None else None
        if lost is not None:  # another rank died or hangs: say so in one line, not in gloo's words
            raise lost from None


def fit(stage: Stage, options: TrainOptions, session: Session, output: str | Path, *,
        hooks: FaultHooks | None = None, say: Callable[[str], None] | None = None) -> FitResult:
    """Train `stage` to the end of its budget in `output` (resuming from its newest checkpoint); see the module.
    An `output` that holds this run finished (`claim_run_output` checked its settings) is not trained again: its
    recorded result is returned."""
    if is_finished(output):
        return _finished_result(Path(output))
    run = _Run(stage, options, session, Path(output), hooks or FaultHooks(), say)
    while not run.finished():
        _step(run)
        run.maybe_evaluate()
        run.maybe_checkpoint()
    return run.finish()


def _step(run: "_Run") -> float:
    """One optimizer step of the loop: gradients accumulated, the update, the log line. Returns the loss."""
    run.stage.set_progress(run.fraction_done())
    loss = run.accumulate_gradients()
    run.update(loss)
    run.log()
    bound_kept_memory()  # steps whose temporaries change shape would otherwise grow the kept heap without end
    return loss


class Stepper:
    """`fit`'s loop one optimizer step per call (returning its loss), without its evaluations, checkpoints or
    progress output: for a script that takes turns between this engine's step and another library's (a
    calibration timing both). `output` receives the run's metrics log."""

    def __init__(self, stage: Stage, options: TrainOptions, session: Session, output: str | Path) -> None:
        self._run = _Run(stage, options, session, Path(output), FaultHooks(), say=lambda line: None)
        self._run.bar.close()
        self._run.bar = progress(None, bar=False, silent=True)

    def __call__(self) -> float:
        return _step(self._run)

    @property
    def steps(self) -> int:
        """Optimizer steps taken so far."""
        return self._run.state.step

    @property
    def stage(self) -> Stage:
        return self._run.stage

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        return self._run.optimizer


def _finished_result(out: Path) -> FitResult:
    """The result a finished run recorded in its training_summary.json."""
    try:
        summary = read_training_summary(out) or TrainingSummary()
    except ValueError as err:
        raise ckpt.CheckpointError(str(err)) from None
    return FitResult(output=out, step=summary.step, stopped_by=summary.stopped_by,
                     skipped_steps=summary.skipped_steps, final_eval=summary.final_eval, best=summary.best,
                     elapsed=float(summary.elapsed_seconds), tokens_seen=summary.tokens_seen,
                     cpu_seconds=_number(summary.extra.get("cpu_seconds")),
                     notes=[f"nothing to train: {out} already holds this finished run"])


# ---- the machinery behind the loop -------------------------------------------------------------------------------
class _ModelSaver:
    """What `checkpointing.save_checkpoint` saves as "the model": whatever the stage saves."""

    def __init__(self, stage: Stage) -> None:
        self.stage = stage

    def save_pretrained(self, folder: str | Path) -> None:
        self.stage.save(Path(folder))


class _Run:
    def __init__(self, stage: Stage, opts: TrainOptions, session: Session, out: Path, hooks: FaultHooks,
                 say: Callable[[str], None] | None) -> None:
        from tqdm.auto import tqdm

        opts.check()
        self.stage, self.opts, self.info, self.out, self.hooks = stage, opts, session.info, out, hooks
        self.main = session.is_main
        self.say = (say or tqdm.write) if self.main else (lambda msg: None)
        self.notes: list[str] = []
        self.max_steps = opts.max_steps if opts.max_steps is not None else NO_LIMIT
        self.device = session.device
        self.precision = session.precision(opts.precision)
        model = stage.model
        self.optimizer = build_optimizer(model, opts.lr, weight_decay=opts.weight_decay, eps=opts.adam_epsilon,
                                         kind=opts.optimizer)
        self.scheduler = build_scheduler(self.optimizer, opts.schedule, opts.warmup_steps, self.max_steps)
        self.scaler = self.precision.grad_scaler()
        self.state = EngineState()
        self.record = {**{k: getattr(opts, k) for k in TrainOptions.RESUMED}, **stage.run_record(),
                       "precision": self.precision.name}
        self.resumed_from, resumed = resume(
            self.out, self.stage, self.info, optimizer=self.optimizer, scheduler=self.scheduler, scaler=self.scaler,
            record=self.record, seed=opts.seed, say=self.say, notes=self.notes)
        if resumed is not None:
            self.state = resumed
        self.net = model
        if self.info.enabled:
            self.net = torch.nn.parallel.DistributedDataParallel(
                model, device_ids=[self.device.index] if self.device.type == "cuda" else None,
                find_unused_parameters=stage.find_unused_parameters)
        self.run_log = RunLog(out, f"{out.name}: {stage.name}", resume_step=self.state.step,
                              tensorboard=opts.tensorboard, main=self.main)
        self.evaluation = _Evaluation(self)
        self.start_step = self.state.step
        self.last_saved = self.state.step if self.resumed_from is not None else -1
        self.save_pending = False
        self.window: dict[str, float] = {}
        self.uncounted_tokens = 0.0  # this rank's tokens since the state last counted them (count_tokens)
        self.clock = RunClock(self.state, opts.budget, self.max_steps, self.info)
        self.window_start = self.clock.started
        self.loss_sum = 0.0
        self.first_loss: float | None = None  # this process's first finite step loss: what "exploded" compares with
        self.grad_norm = 0.0
        self.lr = self.beta1 = 0.0
        self.bar = progress(opts.max_steps, bar=opts.progress, initial=self.start_step, desc=stage.name,
                            silent=not self.main, dynamic_ncols=True)
        model.train()

    # -- the loop's steps ------------------------------------------------------------------------------------------
    def finished(self) -> bool:
        self.clock.tick()
        if self.state.stopped_by == "early-stopping":
            return True
        reason = self.clock.stop_reason()
        if reason is not None:
            self.state.stopped_by = reason
        return reason is not None

    def fraction_done(self) -> float:
        return self.clock.fraction_done()

    def accumulate_gradients(self) -> float:
        """Forward and backward `grad_accum` micro-batches; gradients sync across ranks on the last one only."""
        accum, step = self.opts.grad_accum, self.state.step + 1
        loss_sum = 0.0
        for micro in range(accum):
            batch = self.stage.next_batch()
            last = micro == accum - 1
            with (contextlib.nullcontext() if last or not self.info.enabled else self.net.no_sync()):
                with self.precision.autocast():
                    out = self.stage.loss(self.net, batch)
                    loss = out.loss / accum
                    if self.hooks.nan_at is not None and self.hooks.nan_at(step):
                        loss = loss * float("nan")
                (self.scaler.scale(loss) if self.scaler is not None else loss).backward()
            loss_sum += float(loss.detach())
            self.stage.add_metrics(self.window, out, batch)
            if "attention_mask" in batch:
                tokens = float(batch["attention_mask"].sum())
                self.window["tokens"] = self.window.get("tokens", 0.0) + tokens
                self.uncounted_tokens += tokens
        return loss_sum

    def update(self, loss: float) -> None:
        """Clip, then step — or skip a step whose loss or gradient is not finite (stop after too many)."""
        state, opts = self.state, self.opts
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
        grad_norm = torch.nn.utils.clip_grad_norm_(self.stage.model.parameters(), opts.max_grad_norm)
        if self.clock.budget is not None:  # the lr follows the budget's clock: warmup by steps, then decay with it
            set_budget_lr(self.optimizer, self.scheduler.base_lrs, state, state.step, opts.warmup_steps,
                          self.clock.budget, opts.schedule, spent=self.clock.spent())
        bad = dist_.any_true(not (math.isfinite(loss) and math.isfinite(float(grad_norm))), self.info)
        if self.scaler is not None:
            self.scaler.step(self.optimizer)   # skips by itself on inf/NaN gradients, and lowers the scale
            self.scaler.update()
        elif not bad:
            self.optimizer.step()
        if bad:
            count_bad_step(state, opts.max_bad_steps, self.out, self.say)
        else:
            state.bad_in_row = 0
            self.first_loss = loss if self.first_loss is None else self.first_loss
        self.optimizer.zero_grad(set_to_none=True)
        self.lr = self.optimizer.param_groups[0]["lr"]  # the lr this step used (logged), before the schedule moves
        self.beta1 = self.optimizer.param_groups[0]["betas"][0]
        if self.clock.budget is None:
            self.scheduler.step()
            set_beta1(self.optimizer, opts.schedule, state.step + 1, opts.warmup_steps, self.max_steps)
        state.step += 1
        self.loss_sum, self.grad_norm = loss, float(grad_norm)
        self.bar.update(1)

    def log(self, final: bool = False) -> None:
        """A log line every `log_every` steps, at the last step, and (`final`) for the steps a run ends with."""
        step = self.state.step
        if not final and step % self.opts.log_every and step != self.max_steps:
            return
        keys = sorted(self.window)
        *totals, loss_total = dist_.all_sum([self.window[k] for k in keys] + [self.loss_sum], self.info)
        sums = dict(zip(keys, totals))
        loss = loss_total / self.info.world_size  # the step's loss over every rank's batch, as DDP's gradient
        now = time.perf_counter()
        self.count_tokens()
        values = {**self.stage.summarize(sums), "loss": loss, "lr": self.lr,
                  "grad_norm": self.grad_norm, "skipped": self.state.skipped}
        if SCHEDULES[self.opts.schedule].beta1 is not None:
            values["beta1"] = self.beta1  # the momentum one-cycle moves against the lr
        if sums.get("tokens"):
            values["tokens_per_s"] = sums["tokens"] / max(now - self.window_start, 1e-9)
        if self.main:
            self.run_log.add("train", step, values)
            shown = {"loss": f"{loss:.4f}", **self.stage.postfix(values)}
            if "tokens_per_s" in values:
                shown["tok/s"] = f"{values['tokens_per_s']:.0f}"
            if self.clock.budget is not None:
                shown["left" if self.clock.clock == "time" else "cpu left"] = f"{self.clock.left() / 60:.1f}m"
            self.bar.set_postfix(shown, refresh=False)
            self.run_log.refresh_curves(now)
        self.window, self.window_start = {}, now

    def count_tokens(self) -> None:
        """Add every rank's tokens since the last count to the state: at each log line, checkpoint and the end,
        so a run that saves or ends between log lines counts every token it trained on."""
        (total,) = dist_.all_sum([self.uncounted_tokens], self.info)
        self.state.tokens_seen += int(round(total))
        self.uncounted_tokens = 0.0

    def maybe_evaluate(self) -> None:
        if self.opts.eval_every and self.state.step % self.opts.eval_every == 0:
            self.evaluation.evaluate()

    def maybe_checkpoint(self) -> None:
        # never checkpoint in the middle of a run of non-finite steps: the last good checkpoint must survive
        step = self.state.step
        self.save_pending = self.save_pending or bool(self.opts.save_every and step % self.opts.save_every == 0)
        if self.save_pending and self.state.bad_in_row == 0:
            self.checkpoint()

    def checkpoint(self) -> None:
        self.count_tokens()
        save_checkpoint(self)
        self.last_saved, self.save_pending = self.state.step, False

    # -- the end ---------------------------------------------------------------------------------------------------
    def finish(self) -> FitResult:
        if self.window:  # steps since the last log line (a budget or early stop between two): their line
            self.log(final=True)
        self.bar.close()
        refuse_diverged(self.state, self.loss_sum, self.first_loss, self.stage.model, self.info)
        state, opts = self.state, self.opts
        cpu_seconds, wall_seconds = self.clock.this_process()
        if self.start_step == state.step and self.resumed_from is not None:
            self.notes.append(f"nothing to train: {self.resumed_from} already reached the end")
        if self.last_saved != state.step and (self.stage.final_checkpoint or opts.save_every):
            self.checkpoint()
        if self.evaluation.last_step != state.step:
            self.evaluation.evaluate()
        final_eval, best = self.evaluation.last, state.best
        if self.main:
            final_eval = self.evaluation.keep_final_weights(self.notes)
            self.run_log.draw_final()
            write_summary(self, final_eval)
            self.run_log.close()
            if state.skipped:
                self.notes.append(f"{state.skipped} steps had a non-finite loss and were skipped")
            if state.stopped_by == "time-budget" and self.device.type == "cpu":
                load, cores = machine_load()
                note = cpu_share_note(cpu_seconds, wall_seconds, torch.get_num_threads(), state.step - self.start_step,
                                      load, cores)
                if note:
                    self.notes.append(note)
        dist_.barrier(self.info)
        return FitResult(output=self.out, step=state.step, stopped_by=state.stopped_by,
                         skipped_steps=state.skipped, final_eval=final_eval, best=best,
                         elapsed=state.elapsed, tokens_seen=state.tokens_seen, resumed_from=self.resumed_from,
                         notes=self.notes, cpu_seconds=state.cpu_seconds)


class _Evaluation:
    """A run's evaluations: rank 0 evaluates, a better score saves the best weights (`--keep best`), `patience`
    evaluations without one stop the run, and at the end the kept weights become the run's result."""

    def __init__(self, run: _Run) -> None:
        self.run = run
        self.last: dict[str, float] = {}
        self.last_step = -1

    def evaluate(self) -> dict[str, float]:
        """Rank 0 evaluates; a better score saves the best weights; `patience` evaluations without one stop."""
        run, state = self.run, self.run.state
        step, opts = state.step, run.opts
        result: dict[str, float] = {}
        decision = None
        if run.main:
            result = run.stage.evaluate()
            run.stage.model.train()
            if result:
                run.run_log.add("eval", step, result)
                run.run_log.refresh_curves()
                run.say(f"step {step} eval: " + ", ".join(f"{k} {v:.4f}" for k, v in result.items()
                                                        if isinstance(v, (int, float))))
            score = run.stage.score(result) if result else None
            decision = {"best": state.best, "evals_since_best": state.evals_since_best}
            if score is not None and math.isfinite(score):
                if state.best is None or score > state.best["score"]:
                    decision = {"best": {"step": step, "score": score, "metrics": result}, "evals_since_best": 0}
                    if opts.keep == "best":
                        with atomic_directory(run.out / BEST_DIR) as tmp:
                            run.stage.save(tmp)
                else:
                    decision["evals_since_best"] += 1
        decision = dist_.broadcast_object(decision, run.info)
        state.best, state.evals_since_best = decision["best"], decision["evals_since_best"]
        if opts.patience and state.evals_since_best >= opts.patience:
            state.stopped_by = "early-stopping"
            run.say(f"early stopping at step {step}: {state.evals_since_best} evaluations without a better "
                    f"score than step {state.best['step']}'s {state.best['score']:.4f}")
        dist_.barrier(run.info)
        self.last, self.last_step = result, step
        return result

    def keep_final_weights(self, notes: list[str]) -> dict[str, Any]:
        """Rank 0 at the end: save the run's weights in OUTPUT — the best evaluation's under `--keep best`, else
        the last step's — and return the evaluation that goes with them."""
        run, state = self.run, self.run.state
        best, final_eval = state.best, self.last
        if run.opts.keep == "best" and best is not None and best["step"] != state.step:
            final_eval = best["metrics"]
            notes.append(f"kept the best evaluation's weights (step {best['step']}, score {best['score']:.4f}) rather "
                         "than the last step's")
            if (run.out / BEST_DIR).is_dir():
                run.stage.load_weights(run.out / BEST_DIR)
            elif _finished_before(run.out, state.step, best):
                return final_eval  # a finished run, started again: OUTPUT already holds the best weights
            else:
                raise LostWeightsError("{best} is missing: the best evaluation's weights are lost; rerun with "
                                       "{overwrite}, or with {keep} last", best=run.out / BEST_DIR)
        _save_final(run.stage, run.out)
        return final_eval


def count_bad_step(state: EngineState, max_bad_steps: int, out: Path, say: Callable[[str], None]) -> None:
    """A step whose loss or gradient was not finite was skipped: say so, and stop the run after `max_bad_steps`
    in a row, naming the last good checkpoint."""
    state.skipped += 1
    state.bad_in_row += 1
    say(f"step {state.step + 1}: non-finite loss or gradient, update skipped "
        f"({state.bad_in_row} in a row, {state.skipped} in all)")
    if state.bad_in_row >= max_bad_steps:
        kept = ckpt.latest_checkpoint(out)
        raise NonFiniteLossError(
            "{bad} steps in a row had a non-finite loss or gradient (last at step {step}); the run diverged "
            "and was stopped. The last good checkpoint is {kept}; lower {lr} or raise {warmup_steps}",
            bad=state.bad_in_row, step=state.step + 1, kept=kept if kept is not None else "(none saved yet)")


def write_summary(run: _Run, final_eval: dict[str, Any]) -> None:
    """OUTPUT/training_summary.json of the finished run; then the folded-in best weights' folder goes."""
    state = run.state
    summary = TrainingSummary(step=state.step, stopped_by=state.stopped_by, skipped_steps=state.skipped,
                              elapsed_seconds=round(state.elapsed, 3), tokens_seen=state.tokens_seen,
                              precision=run.precision.name, world_size=run.info.world_size,
                              final_eval=final_eval, best=state.best, extra={"cpu_seconds": round(state.cpu_seconds, 3)})
    write_training_summary(run.out, summary)
    shutil.rmtree(run.out / BEST_DIR, ignore_errors=True)  # after the summary that says it is folded in


def save_checkpoint(run: _Run) -> None:
    """OUTPUT/checkpoints/step-N with everything the next step depends on (every rank's RNG gathered to rank 0),
    written atomically by rank 0."""
    step = run.state.step
    rng = dist_.gather_objects(ckpt.capture_rng(), run.info)
    if run.main:
        run.state.cpu_seconds = run.clock.cpu_spent()  # with this step's: a resume goes on from here
        training_state = TrainingState.of(
            run.state, optimizer=run.optimizer.state_dict(), scheduler=run.scheduler.state_dict(),
            scaler=run.scaler.state_dict() if run.scaler is not None else None, stage=run.stage.state_dict(),
            rng=rng, run=run.record, world_size=run.info.world_size).to_dict()
        inside = run.hooks.inside_save
        ckpt.save_checkpoint(run.out, step, _ModelSaver(run.stage), None, training_state, keep=run.opts.keep_checkpoints,
                             before_commit=(lambda folder: inside(step)) if inside else None)
    dist_.barrier(run.info)


def refuse_diverged(state: EngineState, last: float, first: float | None, model: torch.nn.Module,
                    info: dist_.DistInfo) -> None:
    """A run that ends inside a streak of non-finite steps (fewer than --max-bad-steps, so it was not stopped),
    with non-finite weights, or with a loss `EXPLODED` times its first has diverged: its weights are no model,
    and saving them as the run's result would report a failure as a success."""
    weights = all(bool(torch.isfinite(p).all()) for p in model.parameters())
    exploded = first is not None and math.isfinite(last) and last > max(EXPLODED * first, 10.0)
    if not dist_.any_true(state.bad_in_row > 0 or not weights or exploded, info):
        return
    what = ("its weights hold NaN or infinite values" if not weights else f"the loss rose from {first:.4g} to "
            f"{last:.4g}" if exploded else f"its last {state.bad_in_row} steps had a non-finite loss or gradient")
    raise NonFiniteLossError("the run diverged: {what} (step {step}); its weights were not saved as a result; "
                             "lower {lr}", what=what, step=state.step)


def _finished_before(out: Path, step: int, best: dict[str, Any]) -> bool:
    """Whether OUTPUT's training_summary.json says this very run already ended with these best weights."""
    try:
        summary = read_training_summary(out)
    except ValueError:
        return False
    if summary is None:
        return False
    return summary.step == step and (summary.best or {}).get("step") == best["step"]


def _save_final(stage: Stage, out: Path) -> None:
    """The finished model in OUTPUT itself, each file replaced atomically (a kill leaves old or new)."""
    with _scratch(out) as tmp:
        stage.save(tmp)
        for path in sorted(tmp.rglob("*")):
            if path.is_file():
                with atomic_path(out / path.relative_to(tmp)) as target:
                    shutil.copyfile(path, target)


@contextlib.contextmanager
def _scratch(out: Path) -> Iterator[Path]:
    import tempfile
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out, prefix=".final.") as tmp:
        yield Path(tmp)


def _number(value: Any) -> float:
    """A number a summary may hold (0 when it lacks one, as a summary written before CPU time was recorded)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0

"""The pre-training loop: build, load or resume, loop, stop on budget, log, evaluate, checkpoint.

`run_pretraining(PretrainConfig(...))` is what `bertforge pretrain` calls; `pretrain(data, output, **kw)`
is the same with keyword arguments. The same code runs as one process or under `torchrun` (DDP: each rank
reads a disjoint slice of the data; rank 0 alone writes). A run killed at any moment and started again
with the same arguments continues from its newest complete checkpoint and ends with the same weights,
bit for bit, as a run that was never interrupted: the checkpoint holds everything a step depends on
(weights, optimizer, schedule, every RNG, the data position).
"""
from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from bertforge.atomic import atomic_path, atomic_write_text
from bertforge.checkpoint import load_hf_state_dict, read_state_dict
from bertforge.data import MaskingConfig, PretrainingDataset, load_manifest
from bertforge.data.shards import load_tokenizer
from bertforge.training import checkpointing as ckpt
from bertforge.training import distributed as dist_
from bertforge.training.metrics_log import MetricsLog
from bertforge.training.optim import build_optimizer, linear_warmup_decay, set_budget_lr
from bertforge.training.progress import progress

# Test hook: steps (1-based, "3,4" or "5-" for 5 onwards) whose loss is replaced by NaN before backward.
NAN_STEPS_ENV = "BERTFORGE_TEST_NAN_STEPS"
# Settings that must not change when a run is resumed (the data order or the model would change under it).
RESUME_KEYS = ("objective", "packing", "model", "batch_size", "grad_accum", "seed", "masking", "mask_rate",
               "dupe_factor",
               "whole_word", "seq_len_schedule", "optimizer")


class NonFiniteLossError(RuntimeError):
    """Too many consecutive steps with a NaN/inf loss or gradient: the run diverged."""


@dataclass
class PretrainConfig:
    data: str
    output: str
    model: str = "tiny"                      # preset name, or a config.json (or a folder holding one)
    objective: str = "mlm+nsp"
    packing: str = "full-sentences"
    vocab: str | None = None                 # default: the vocab the corpus was prepared with
    batch_size: int = 32                     # per rank, per micro-batch
    grad_accum: int = 1
    lr: float = 1e-4
    weight_decay: float = 0.01
    warmup_steps: int = 0
    max_steps: int | None = None             # required unless time_budget is given
    seq_len_schedule: str = "128:1.0"        # "128:0.9,512:0.1": phases as fractions of the run
    optimizer: str = "adamw"
    time_budget: float | None = None         # seconds; lr decays with time spent and the run stops at it
    save_every: int = 1000
    keep_checkpoints: int = 3
    eval_every: int = 0                      # 0: evaluate only at the end
    eval_batches: int = 20                   # 0: never evaluate
    log_every: int = 10
    masking: str = "dynamic"
    mask_rate: float = 0.15
    dupe_factor: int = 10                    # static masking: differently masked copies of the corpus
    whole_word: bool = False
    dropout: float | None = None             # hidden + attention dropout; None = the model's own (BERT 0.1)
    seed: int = 0
    init_from: str | None = None
    device: str = "auto"
    precision: str = "auto"                  # auto = bf16 autocast on CUDA, fp32 on CPU
    max_grad_norm: float = 1.0
    max_bad_steps: int = 20
    progress: bool = True
    tensorboard: bool = True                 # only if torch.utils.tensorboard imports


@dataclass
class PretrainResult:
    output: Path
    step: int
    stopped_by: str
    skipped_steps: int
    final_eval: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def pretrain(data: str | Path, output: str | Path, **options: Any) -> PretrainResult:
    """Keyword front end of `run_pretraining`: ``pretrain("data/", "out/", model="mini", max_steps=1000)``."""
    return run_pretraining(PretrainConfig(data=str(data), output=str(output), **options))


# ---- small pieces ------------------------------------------------------------------------------------------------
def parse_duration(text: str | float | int | None) -> float | None:
    """'90', '90s', '30m', '1.5h', '1h30m' -> seconds."""
    if text is None or isinstance(text, (int, float)):
        return None if text is None else float(text)
    text = text.strip().lower()
    if re.fullmatch(r"[\d.]+", text):
        return float(text)
    parts = re.findall(r"([\d.]+)\s*([hms])", text)
    if not parts or "".join(n + u for n, u in parts) != re.sub(r"\s+", "", text):
        raise ValueError(f"cannot read the duration {text!r}; use e.g. 90s, 30m, 1.5h or 1h30m")
    return sum(float(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in parts)


def parse_schedule(text: str) -> list[tuple[int, float]]:
    """'128:0.9,512:0.1' -> [(128, 0.9), (512, 0.1)]; the fractions must add up to 1."""
    phases = []
    for part in str(text).split(","):
        length, _, frac = part.strip().partition(":")
        try:
            phases.append((int(length), float(frac) if frac else 1.0))
        except ValueError:
            raise ValueError(f"cannot read the sequence-length schedule {text!r}; use e.g. 128:0.9,512:0.1") from None
    if abs(sum(f for _, f in phases) - 1.0) > 1e-6 or any(f <= 0 for _, f in phases):
        raise ValueError(f"the fractions of --seq-len-schedule {text!r} must be positive and add up to 1")
    return phases


def seq_len_at(phases: list[tuple[int, float]], progress: float) -> int:
    """The phase's sequence length at `progress` (0..1) through the run."""
    edge = 0.0
    for length, frac in phases:
        edge += frac
        if progress < edge - 1e-12:
            return length
    return phases[-1][0]


def nan_steps() -> set[int] | tuple[int]:
    spec = os.environ.get(NAN_STEPS_ENV, "").strip()
    if not spec:
        return set()
    if spec.endswith("-"):
        return (int(spec[:-1]),)  # open range: from this step on
    return {int(s) for s in spec.split(",") if s}


def _inject_nan(step: int, spec) -> bool:
    return step >= spec[0] if isinstance(spec, tuple) else step in spec


def resolve_vocab(data: str | Path, vocab: str | None) -> str:
    """--vocab, else tokenizer files inside the data folder, else the folder `prepare` recorded in its manifest."""
    from bertforge.tokenization.auto import TOKENIZER_FILES

    def has_tokenizer(folder: Path) -> bool:
        return any((folder / name).is_file() for name, _ in TOKENIZER_FILES)

    if vocab:
        return vocab
    data = Path(data)
    if has_tokenizer(data):
        return str(data)
    source = load_manifest(data).get("vocab", {}).get("source")
    if source and has_tokenizer(Path(source)):
        return source
    raise ValueError(f"{data} does not say which vocab it was prepared with; pass --vocab DIR")


def build_model(cfg: PretrainConfig, tokenizer: Any, max_len: int) -> torch.nn.Module:
    """The family's pre-training class (BERT: MLM+NSP, ALBERT: MLM+SOP, RoBERTa/DistilBERT: MLM)."""
    from bertforge.config import dropout_overrides
    from bertforge.model.auto import family, model_class_for, preset_config, read_model_type
    vocab_size = len(tokenizer.vocab)
    if cfg.dropout is not None and not 0.0 <= cfg.dropout < 1.0:
        raise ValueError(f"--dropout must be in [0, 1), got {cfg.dropout}")
    dropout = dropout_overrides(cfg.dropout)
    if cfg.init_from:
        # the run says itself which heads are new and which of them it trains (see init_note)
        checkpoint_log = logging.getLogger("bertforge.checkpoint")
        level = checkpoint_log.level
        checkpoint_log.setLevel(logging.ERROR)
        try:
            model = model_class_for(cfg.init_from, "pretraining").from_pretrained(cfg.init_from, **dropout)
        finally:
            checkpoint_log.setLevel(level)
    else:
        path = Path(cfg.model)
        if path.is_dir():
            path = path / "config.json"
        if path.suffix == ".json" or path.is_file():
            config = family(read_model_type(path)).config_class.from_json_file(path)
            for name, value in dropout.items():
                setattr(config, name, value)
        else:
            config = preset_config(cfg.model, vocab_size=vocab_size, pad_token_id=tokenizer.pad_token_id, **dropout)
        model = family(config.model_type).model_class("pretraining")(config)
    if model.config.vocab_size < vocab_size:
        raise ValueError(f"the model has {model.config.vocab_size} token embeddings but the vocab has {vocab_size}")
    longest = getattr(model.config, "max_sequence_length", model.config.max_position_embeddings)
    if longest < max_len:
        raise ValueError(f"--seq-len-schedule asks for {max_len} tokens but the model takes at most {longest} "
                         f"({model.config.max_position_embeddings} position embeddings)")
    if cfg.objective in ("mlm+nsp", "mlm+sop") and not hasattr(model, "nsp"):
        raise ValueError(f"objective {cfg.objective} needs a sentence-pair head, which {type(model).__name__} "
                         "lacks; use --objective mlm (or ltr)")
    return model


def init_note(model: torch.nn.Module, cfg: PretrainConfig) -> str:
    """Where --init-from weights came from, and which heads start new: an encoder checkpoint (e.g. a sentence
    encoder) has no MLM head, and --objective mlm/ltr never trains the sentence-pair head."""
    new = getattr(model, "loading_info", {}).get("newly_initialized", [])
    note = f"initialised from {cfg.init_from}"
    sentence = [n for n in new if "seq_relationship" in n or "sop_classifier" in n]
    trained = [n for n in new if n not in sentence or cfg.objective in ("mlm+nsp", "mlm+sop")]
    if trained:
        note += f"; new, trained by this run: {', '.join(trained)}"
    if len(trained) < len(new):
        note += (f"; new and left untrained (--objective {cfg.objective} has no sentence task): "
                 f"{', '.join(n for n in new if n not in trained)}")
    return note


def _autocast(device: torch.device, precision: str):
    if precision == "auto":
        precision = "bf16" if device.type == "cuda" else "fp32"
    if precision == "fp32":
        return contextlib.nullcontext
    if precision != "bf16":
        raise ValueError(f"unknown precision {precision!r}; choose auto, bf16 or fp32")
    return lambda: torch.autocast(device.type, dtype=torch.bfloat16)


def next_batch(dataset: PretrainingDataset) -> dict[str, torch.Tensor]:
    """The next batch, rolling over into the next epoch. The position lives in the dataset, so a fresh
    iterator per batch is correct and survives a change of sequence length."""
    for _ in range(2):
        for batch in dataset:
            return batch
    raise RuntimeError("the training split yields no batches")


def model_inputs(batch: dict[str, torch.Tensor], objective: str, device: torch.device) -> dict[str, Any]:
    inputs = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
    if objective == "ltr":
        inputs["causal"] = True  # labels[i] is already token i + 1
    return inputs


class Counters:
    """Sums for accuracy and mean losses over a stretch of steps (train) or batches (eval)."""

    def __init__(self) -> None:
        self.sums: dict[str, float] = {}

    def add(self, out, batch: dict[str, torch.Tensor]) -> None:
        labels = batch["labels"]
        target = labels[labels != -100]
        n = target.numel()
        s = self.sums
        # MLM-only families (RoBERTa, DistilBERT) return MaskedLMOutput: logits/loss instead
        logits = getattr(out, "prediction_logits", None)
        logits, mlm_loss = (out.logits, out.loss) if logits is None else (logits, out.mlm_loss)
        s["mlm_n"] = s.get("mlm_n", 0.0) + n
        # "the target's logit is the row's max": one max pass, 4x cheaper than argmax over 30k columns on CPU;
        # a tie for the max (argmax would pick the lower index) counts as a hit
        logits = logits.detach()
        hit = logits.gather(-1, target.to(logits.device)[:, None]).squeeze(-1) >= logits.amax(-1)
        s["mlm_correct"] = s.get("mlm_correct", 0.0) + float(hit.sum())
        s["mlm_loss"] = s.get("mlm_loss", 0.0) + float(mlm_loss.detach()) * n
        s["tokens"] = s.get("tokens", 0.0) + float(batch["attention_mask"].sum())
        if "next_sentence_label" in batch:
            nsl = batch["next_sentence_label"]
            s["nsp_n"] = s.get("nsp_n", 0.0) + nsl.numel()
            s["nsp_correct"] = s.get("nsp_correct", 0.0) + float(
                (out.seq_relationship_logits.argmax(-1).cpu() == nsl).sum())
            s["nsp_loss"] = s.get("nsp_loss", 0.0) + float(out.nsp_loss.detach()) * nsl.numel()

    def summary(self, sums: dict[str, float] | None = None) -> dict[str, float]:
        s = sums if sums is not None else self.sums
        out: dict[str, float] = {}
        if s.get("mlm_n"):
            out["mlm_loss"] = s["mlm_loss"] / s["mlm_n"]
            out["mlm_acc"] = s["mlm_correct"] / s["mlm_n"]
        if s.get("nsp_n"):
            out["nsp_loss"] = s["nsp_loss"] / s["nsp_n"]
            out["nsp_acc"] = s["nsp_correct"] / s["nsp_n"]
        return out


@torch.no_grad()
def evaluate(model: torch.nn.Module, dataset: PretrainingDataset, batches: int, device: torch.device,
             objective: str, autocast) -> dict[str, float]:
    """MLM (or LTR) accuracy and perplexity, and NSP/SOP accuracy, on the first `batches` held-out batches.
    The held-out masks are a function of the example, so every evaluation sees the same questions."""
    was_training = model.training
    model.eval()
    dataset.load_state_dict({**dataset.state_dict(), "epoch": 0, "index": 0})
    counters = Counters()
    for i, batch in enumerate(dataset):
        if i >= batches:
            break
        with autocast():
            out = model(**model_inputs(batch, objective, device))
        counters.add(out, batch)
    model.train(was_training)
    result = counters.summary()
    if "mlm_loss" in result:
        result["perplexity"] = math.exp(min(result["mlm_loss"], 50.0))
    return result


def _save_final(model: torch.nn.Module, tokenizer: Any, output: Path) -> None:
    """The finished model in OUTPUT itself (HF layout + tokenizer), each file replaced atomically."""
    model.save_pretrained(output)
    with tempfile.TemporaryDirectory(dir=output, prefix=".tokenizer.") as tmp:
        tokenizer.save_pretrained(tmp)
        for path in Path(tmp).iterdir():
            with atomic_path(output / path.name) as target:
                target.write_bytes(path.read_bytes())


# ---- the loop ----------------------------------------------------------------------------------------------------
def run_pretraining(cfg: PretrainConfig) -> PretrainResult:
    info = dist_.init_distributed(cfg.device)
    try:
        return _run(cfg, info)
    finally:
        dist_.cleanup(info)


def _run(cfg: PretrainConfig, info: dist_.DistInfo) -> PretrainResult:
    from tqdm.auto import tqdm

    out = Path(cfg.output)
    main = info.is_main
    say = (lambda msg: tqdm.write(msg)) if main else (lambda msg: None)
    notes: list[str] = []
    if cfg.max_steps is None and cfg.time_budget is None:
        raise ValueError("give --max-steps, --time-budget or both")
    budget = cfg.time_budget
    max_steps = cfg.max_steps if cfg.max_steps is not None else 10 ** 12
    phases = parse_schedule(cfg.seq_len_schedule)

    # -- build ---------------------------------------------------------------------------------------------------
    tokenizer = load_tokenizer(resolve_vocab(cfg.data, cfg.vocab))
    torch.manual_seed(cfg.seed)
    model = build_model(cfg, tokenizer, max(n for n, _ in phases)).to(info.device)
    masking = MaskingConfig(rate=cfg.mask_rate, whole_word=cfg.whole_word, mode=cfg.masking,
                            dupe_factor=cfg.dupe_factor)
    train_data = PretrainingDataset(cfg.data, tokenizer, objective=cfg.objective, packing=cfg.packing,
                                    max_seq_length=phases[0][0], batch_size=cfg.batch_size, masking=masking,
                                    seed=cfg.seed, rank=info.rank, world_size=info.world_size)
    optimizer = build_optimizer(model, cfg.lr, weight_decay=cfg.weight_decay, kind=cfg.optimizer)
    scheduler = linear_warmup_decay(optimizer, cfg.warmup_steps, max_steps)
    autocast = _autocast(info.device, cfg.precision)

    # -- load: resume from the newest complete checkpoint, if any ------------------------------------------------
    state = {"step": 0, "elapsed": 0.0, "skipped": 0, "bad_in_row": 0, "warmup_ended_at": None, "tokens_seen": 0}
    if main:
        for leftover in ckpt.sweep_partial_saves(out):
            notes.append(f"removed an interrupted checkpoint save: {leftover.name}")
    dist_.barrier(info)
    latest = ckpt.latest_checkpoint(out)
    run_record = {k: getattr(cfg, k) for k in RESUME_KEYS}
    if latest is not None:
        saved = ckpt.load_training_state(latest)
        # a setting added after the run was saved counts as its default
        was = {k: saved["run"].get(k, getattr(PretrainConfig, k, None)) for k in run_record}
        changed = {k: (was[k], v) for k, v in run_record.items() if was[k] != v}
        if changed:
            raise ValueError(f"{out} holds a run with other settings ({', '.join(f'{k}: {a!r} there, {b!r} now' for k, (a, b) in changed.items())}); "
                             "resume with the same settings or choose another --output")
        if saved["world_size"] != info.world_size:
            raise ValueError(f"{latest} was written by {saved['world_size']} processes; resume with the same number")
        hf_state, _ = read_state_dict(latest)
        load_hf_state_dict(model, hf_state, source=latest)
        optimizer.load_state_dict(saved["optimizer"])
        scheduler.load_state_dict(saved["scheduler"])
        train_data.load_state_dict(saved["dataset"])
        ckpt.restore_rng(saved["rng"][info.rank])
        state.update({k: saved.get(k, v) for k, v in state.items()})
        say(f"resuming from {latest} (step {state['step']})")
    else:
        torch.manual_seed(cfg.seed + 1_000_003 * info.rank)  # dropout differs between ranks
        if cfg.init_from:
            notes.append(init_note(model, cfg))
            say(notes[-1])

    net = model
    if info.enabled:
        # mlm/ltr never use the NSP head, so DDP must expect parameters without gradients
        net = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[info.device.index] if info.device.type == "cuda" else None,
            find_unused_parameters=cfg.objective in ("mlm", "ltr"))

    heldout = None
    if cfg.eval_batches > 0 and main:
        try:
            heldout = PretrainingDataset(cfg.data, tokenizer, objective=cfg.objective, packing=cfg.packing,
                                         max_seq_length=phases[0][0], batch_size=cfg.batch_size,
                                         masking=MaskingConfig(rate=cfg.mask_rate, whole_word=cfg.whole_word),
                                         seed=cfg.seed, split="heldout")
        except ValueError as err:
            notes.append(f"held-out evaluation skipped: {err}")
    log = MetricsLog(out / "metrics.jsonl", out / "curves.png", resume_step=state["step"]) if main else None
    writer = None
    if main and cfg.tensorboard:
        try:
            from torch.utils.tensorboard import SummaryWriter
            writer = SummaryWriter(str(out / "tensorboard"))
        except ImportError:
            notes.append("TensorBoard events skipped (install the tensorboard package to get them)")
    if main:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out / "run_config.json", json.dumps(asdict(cfg), indent=2) + "\n")

    def save(step: int) -> None:
        rng = dist_.gather_objects(ckpt.capture_rng(), info)
        if main:
            training_state = {**state, "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                              "dataset": train_data.state_dict(), "rng": rng, "run": run_record,
                              "world_size": info.world_size, "config": asdict(cfg)}
            ckpt.save_checkpoint(out, step, model, tokenizer, training_state, keep=cfg.keep_checkpoints)
        dist_.barrier(info)

    def run_eval(step: int) -> dict[str, float]:
        result = {}
        if heldout is not None:
            heldout.set_max_seq_length(train_data.max_seq_length)
            result = evaluate(model, heldout, cfg.eval_batches, info.device, cfg.objective, autocast)
            log.log(step, "eval", **result)
            if writer is not None:
                for k, v in result.items():
                    writer.add_scalar(f"eval/{k}", v, step)
            log.plot(title=f"{out.name}: {cfg.objective}")
            say(f"step {step} held-out: " + ", ".join(f"{k} {v:.4f}" for k, v in result.items()))
        dist_.barrier(info)
        return result

    # -- loop ----------------------------------------------------------------------------------------------------
    bad_steps = nan_steps()
    start_step, started = state["step"], time.perf_counter()
    elapsed_before = state["elapsed"]
    window, window_start = Counters(), time.perf_counter()
    bar = progress(cfg.max_steps, bar=cfg.progress, initial=start_step, desc="pretrain", silent=not main,
                   dynamic_ncols=True)
    stopped_by, last_eval, last_saved = "max-steps", {}, state["step"] if latest is not None else -1
    save_pending = False
    model.train()
    while True:
        state["elapsed"] = elapsed_before + time.perf_counter() - started
        if budget is not None:
            state["elapsed"] = dist_.broadcast_object(state["elapsed"], info)  # all ranks stop together
        step = state["step"]
        if step >= max_steps:
            break
        if budget is not None and state["elapsed"] >= budget:
            stopped_by = "time-budget"
            break
        done = state["elapsed"] / budget if budget is not None else step / max_steps
        train_data.set_max_seq_length(seq_len_at(phases, done))

        loss_sum = 0.0
        for micro in range(cfg.grad_accum):
            batch = next_batch(train_data)
            sync = micro == cfg.grad_accum - 1 or not info.enabled
            with (contextlib.nullcontext() if sync else net.no_sync()), autocast():
                out_ = net(**model_inputs(batch, cfg.objective, info.device))
                loss = out_.loss / cfg.grad_accum
                if bad_steps and _inject_nan(step + 1, bad_steps):
                    loss = loss * float("nan")
            loss.backward()
            loss_sum += float(loss.detach())
            window.add(out_, batch)
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
        if budget is not None:  # lr follows the wall clock: warmup by steps, then decay with time spent
            set_budget_lr(optimizer, scheduler.base_lrs, state, step, cfg.warmup_steps, budget)
        bad = dist_.any_true(not (math.isfinite(loss_sum) and math.isfinite(float(grad_norm))), info)
        if bad:
            state["skipped"] += 1
            state["bad_in_row"] += 1
            say(f"step {step + 1}: non-finite loss or gradient, update skipped "
                f"({state['bad_in_row']} in a row, {state['skipped']} in all)")
            if state["bad_in_row"] >= cfg.max_bad_steps:
                optimizer.zero_grad(set_to_none=True)
                kept = ckpt.latest_checkpoint(out)
                raise NonFiniteLossError(
                    f"{state['bad_in_row']} steps in a row had a non-finite loss or gradient (last at step {step + 1});"
                    f" the run diverged and was stopped. The last good checkpoint is "
                    f"{kept if kept is not None else '(none saved yet)'}; lower --lr or raise --warmup-steps")
        else:
            optimizer.step()
            state["bad_in_row"] = 0
        optimizer.zero_grad(set_to_none=True)
        if budget is None:
            scheduler.step()
        state["step"] = step = step + 1
        bar.update(1)

        # -- log -------------------------------------------------------------------------------------------------
        if step % cfg.log_every == 0 or step == max_steps:
            sums = dict(zip(window.sums, dist_.all_sum(list(window.sums.values()), info)))
            now = time.perf_counter()
            state["tokens_seen"] += int(sums.get("tokens", 0))
            values = {**window.summary(sums), "loss": loss_sum, "lr": optimizer.param_groups[0]["lr"],
                      "grad_norm": float(grad_norm), "tokens_per_s": sums.get("tokens", 0) / max(now - window_start, 1e-9),
                      "seq_len": train_data.max_seq_length, "skipped": state["skipped"]}
            if main:
                log.log(step, "train", **values)
                if writer is not None:
                    for k, v in values.items():
                        writer.add_scalar(f"train/{k}", v, step)
                shown = {"loss": f"{loss_sum:.3f}", "mlm_acc": f"{values.get('mlm_acc', 0):.3f}"}
                if "nsp_acc" in values:
                    shown[cfg.objective[-3:] + "_acc"] = f"{values['nsp_acc']:.3f}"
                shown["tok/s"] = f"{values['tokens_per_s']:.0f}"
                if budget is not None:
                    shown["left"] = f"{max(0.0, budget - state['elapsed']) / 60:.1f}m"
                bar.set_postfix(shown, refresh=False)
            window, window_start = Counters(), now

        # -- evaluate, checkpoint --------------------------------------------------------------------------------
        if cfg.eval_every and step % cfg.eval_every == 0:
            last_eval = run_eval(step)
        # never checkpoint in the middle of a run of non-finite steps: the last good checkpoint must survive
        save_pending = save_pending or bool(cfg.save_every and step % cfg.save_every == 0)
        if save_pending and state["bad_in_row"] == 0:
            save(step)
            last_saved, save_pending = step, False
    bar.close()

    # -- finish: final checkpoint (so a re-run knows it is done), final model in OUTPUT ----------------------------
    if start_step == state["step"] and latest is not None:
        notes.append(f"nothing to train: {latest} already reached the end; the final model was written again")
    if last_saved != state["step"]:
        save(state["step"])
    if cfg.eval_batches > 0 and (not cfg.eval_every or state["step"] % cfg.eval_every or not last_eval):
        last_eval = run_eval(state["step"])
    if main:
        _save_final(model, tokenizer, out)
        summary = {"step": state["step"], "stopped_by": stopped_by, "skipped_steps": state["skipped"],
                   "elapsed_seconds": round(state["elapsed"], 3), "tokens_seen": state["tokens_seen"],
                   "final_eval": last_eval}
        atomic_write_text(out / "training_summary.json", json.dumps(summary, indent=2) + "\n")
        if writer is not None:
            writer.close()
        if stopped_by == "time-budget":
            print(f"time budget of {budget:.0f}s spent after {state['step']} steps; saved")
        if state["skipped"]:
            notes.append(f"{state['skipped']} steps had a non-finite loss and were skipped")
        print(f"final model and tokenizer: {out}")
        print(f"checkpoints: {out / ckpt.CHECKPOINTS} (newest {ckpt.latest_checkpoint(out).name})")
        print(f"metrics: {out / 'metrics.jsonl'}" + (f", curves: {out / 'curves.png'}" if (out / 'curves.png').exists()
                                                    else ""))
        for note in notes:
            print(note)
    dist_.barrier(info)
    return PretrainResult(output=out, step=state["step"], stopped_by=stopped_by, skipped_steps=state["skipped"],
                          final_eval=last_eval, notes=notes)

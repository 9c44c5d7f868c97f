"""Knowledge distillation (Hinton et al., 2015; DistilBERT, Sanh et al., 2019): a small student from a teacher.

* `init_student`: the teacher's config with every other layer, no segments and no pooler, initialised from
  the teacher's weights and saved as a DistilBERT checkpoint (loads in `transformers`).
* `distill`: pre-training distillation on a prepared corpus with DistilBERT's triple loss (soft targets at
  temperature T on the masked positions, MLM, cosine between last hidden states). It is built from the
  pre-training loop's parts: optimizer and schedule, atomic checkpoints with exact resume, metrics log and
  curves, held-out evaluation, a time budget.
* `distill_task`: a fine-tuned teacher labels (many) unlabeled texts with soft targets, the student learns to
  mimic them, and the result is a predictor folder; `distill_report.json` compares teacher and student
  (dev metric, parameters, measured examples/s).
"""
from __future__ import annotations

import json
import math
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from bertforge.atomic import atomic_write_text
from bertforge.checkpoint import load_hf_state_dict, read_state_dict, resolve_folder
from bertforge.data import MaskingConfig, PretrainingDataset
from bertforge.data.shards import load_tokenizer
from bertforge.model.distilbert import LAYER_NORM_EPS, DistilBertConfig, DistilBertForMaskedLM
from bertforge.training import checkpointing as ckpt
from bertforge.training.metrics_log import MetricsLog
from bertforge.training.optim import build_optimizer, linear_warmup_decay, set_budget_lr
from bertforge.training.progress import progress

INIT_RECORD = "distill_init.json"
SUMMARY_FILE = "distill_summary.json"
REPORT_FILE = "distill_report.json"
# settings a resumed pre-training distillation must share with the run it continues
RESUME_KEYS = ("batch_size", "seed", "mask_rate", "max_seq_length", "temperature", "alpha_ce", "alpha_mlm",
               "alpha_cos", "lr", "warmup_steps", "max_steps")


# ---- (a) a student from the teacher ---------------------------------------------------------------------------
def load_masked_lm(path: str | Path):
    """A BERT-family checkpoint with its MLM head; (model, whether the folder really had the head)."""
    from bertforge.model.auto import model_class_for
    folder = resolve_folder(path)
    model = model_class_for(folder, "masked_lm").from_pretrained(folder)
    has_head = not any(n.startswith(("cls.", "vocab_", "lm_head.", "predictions."))
                       for n in model.loading_info.get("newly_initialized", []))
    return model, has_head


def student_config(teacher_config, n_layers: int) -> DistilBertConfig:
    """The teacher's shape with `n_layers` layers, as a DistilBERT config (no segments, fixed LN eps)."""
    if teacher_config.layer_norm_eps != LAYER_NORM_EPS:
        raise ValueError(f"the teacher's layer_norm_eps is {teacher_config.layer_norm_eps}; a DistilBERT student "
                         f"has {LAYER_NORM_EPS} fixed, so its copied layers would compute something else")
    c = teacher_config
    return DistilBertConfig(
        vocab_size=c.vocab_size, hidden_size=c.hidden_size, num_hidden_layers=n_layers,
        num_attention_heads=c.num_attention_heads, intermediate_size=c.intermediate_size, hidden_act=c.hidden_act,
        hidden_dropout_prob=c.hidden_dropout_prob, attention_probs_dropout_prob=c.attention_probs_dropout_prob,
        max_position_embeddings=c.max_position_embeddings, initializer_range=c.initializer_range,
        pad_token_id=c.pad_token_id, sinusoidal_pos_embds=getattr(c, "sinusoidal_pos_embds", False))


@torch.no_grad()
def copy_teacher_weights(teacher, student, layers: Sequence[int], copy_head: bool = True) -> None:
    """Embeddings, the chosen layers in order, and (if asked) the MLM head, from teacher to student.

    The teacher's segment-0 embedding is folded into the word embeddings rather than dropped: every token of
    a single-segment input then embeds exactly as in the teacher, and since the MLM decoder is tied, every
    logit of a row moves by the same h . t0, which softmax ignores: the student starts with the teacher's
    predictions wherever it keeps the teacher's layers. Dropping it would shift every input vector instead.
    """
    t, s = teacher.bert.embeddings, student.bert.embeddings
    word = t.word_embeddings.weight.clone()
    if t.token_type_embeddings is not None:
        word += t.token_type_embeddings.weight[0]
    s.word_embeddings.weight.copy_(word)
    s.position_embeddings.weight.copy_(t.position_embeddings.weight)
    s.norm.load_state_dict(t.norm.state_dict())
    for i, j in enumerate(layers):
        student.bert.encoder.layers[i].load_state_dict(teacher.bert.encoder.layers[j].state_dict())
    if copy_head:
        student.mlm.load_state_dict(teacher.mlm.state_dict())


def init_student(teacher_dir: str | Path, output_dir: str | Path, layers: Optional[Sequence[int]] = None) -> Path:
    """Write a DistilBERT student of `teacher_dir` to `output_dir`: teacher layers 0, 2, 4, ... (or `layers`).

    The teacher is a BERT or DistilBERT checkpoint (pre-trained, or a fine-tuned predictor folder: its task
    head is left out). Its MLM head is copied when it has one; otherwise the student's is new (the record in
    `distill_init.json` says which).
    """
    from bertforge.model.auto import read_model_type
    folder = resolve_folder(teacher_dir)
    kind = read_model_type(folder)
    if kind not in ("bert", "distilbert"):
        raise ValueError(f"{folder}: a {kind} teacher; init_student takes BERT or DistilBERT teachers (positions "
                         "0, 1, 2, ... and a post-LN encoder, which a DistilBERT student shares)")
    teacher, has_head = load_masked_lm(folder)
    n = teacher.config.num_hidden_layers
    chosen = list(range(0, n, 2)) if layers is None else [int(i) for i in layers]
    if not chosen or any(not 0 <= i < n for i in chosen):
        raise ValueError(f"student layers {chosen} must be a non-empty list of teacher layers 0..{n - 1}")
    student = DistilBertForMaskedLM(student_config(teacher.config, len(chosen)))
    copy_teacher_weights(teacher, student, chosen, copy_head=has_head)
    out = Path(output_dir)
    student.save_pretrained(out)
    load_tokenizer(folder).save_pretrained(out)
    record = {"teacher": str(teacher_dir), "teacher_layers": n, "student_layers": chosen,
              "token_type_embeddings": "segment 0 folded into word_embeddings" if teacher.config.type_vocab_size
              else "none in the teacher", "mlm_head": "copied" if has_head else "new (the teacher has none)",
              "parameters": {"teacher": teacher.num_parameters(), "student": student.num_parameters()}}
    atomic_write_text(out / INIT_RECORD, json.dumps(record, indent=2) + "\n")
    return out


# ---- (b) pre-training distillation ----------------------------------------------------------------------------
def distillation_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, labels: torch.Tensor,
                      student_hidden: Optional[torch.Tensor], teacher_hidden: Optional[torch.Tensor], *,
                      temperature: float, alpha_ce: float, alpha_mlm: float, alpha_cos: float) -> dict[str, torch.Tensor]:
    """DistilBERT's triple loss. Logits are [n_masked, vocab] on the masked positions (same rows for both),
    `labels` [n_masked] their targets, hidden states [n_real_tokens, hidden] (None: no cosine term).

    The soft-target term is KL(teacher_T || student_T) per masked token, times T^2 so its gradients keep
    their scale as T changes (Hinton et al.); it differs from the cross-entropy by the teacher's entropy, a
    constant, so it is 0 when the student matches.
    """
    s, t = student_logits.float(), teacher_logits.float()
    zero = s.sum() * 0.0
    if s.shape[0]:
        T = float(temperature)
        ce = F.kl_div(F.log_softmax(s / T, -1), F.log_softmax(t / T, -1), log_target=True,
                      reduction="batchmean") * T * T
        mlm = F.cross_entropy(s, labels)
    else:
        ce = mlm = zero
    cos = zero
    if student_hidden is not None and teacher_hidden is not None:
        cos = (1.0 - F.cosine_similarity(student_hidden.float(), teacher_hidden.float(), dim=-1)).mean()
    loss = alpha_ce * ce + alpha_mlm * mlm + alpha_cos * cos
    return {"loss": loss, "loss_ce": ce, "loss_mlm": mlm, "loss_cos": cos}


@dataclass
class DistillConfig:
    teacher: str
    student: str                           # the initial student (e.g. from init_student)
    data: str                              # a folder written by `bertforge prepare`
    output: str
    temperature: float = 2.0
    alpha_ce: float = 5.0                  # DistilBERT's weights
    alpha_mlm: float = 2.0
    alpha_cos: float = 1.0
    vocab: str | None = None               # default: the vocab the corpus was prepared with
    batch_size: int = 32
    lr: float = 5e-4
    weight_decay: float = 0.01
    warmup_steps: int = 0
    max_steps: int | None = None
    time_budget: float | None = None       # seconds
    max_seq_length: int = 128
    mask_rate: float = 0.15
    save_every: int = 1000
    keep_checkpoints: int = 3
    log_every: int = 10
    eval_batches: int = 20                 # held-out batches at the end (0: none)
    seed: int = 0
    device: str = "auto"
    max_grad_norm: float = 5.0
    max_bad_steps: int = 20
    progress: bool = True


@dataclass
class DistillResult:
    output: Path
    step: int
    stopped_by: str
    final_eval: dict[str, float] = field(default_factory=dict)
    teacher_eval: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def distill(teacher: str | Path, student: str | Path, data: str | Path, output: str | Path,
            **options: Any) -> DistillResult:
    """Keyword front end: ``distill("teacher/", "student/", "data/", "out/", max_steps=1000)``."""
    return run_distillation(DistillConfig(teacher=str(teacher), student=str(student), data=str(data),
                                          output=str(output), **options))


def _check_pair(teacher, student, tokenizer, cfg: DistillConfig, teacher_has_head: bool) -> None:
    if cfg.alpha_ce > 0 and not teacher_has_head:
        raise ValueError(f"{cfg.teacher} has no MLM head, so it has no soft targets to teach; use a teacher "
                         "with one, or --alpha-ce 0")
    if teacher.config.vocab_size != student.config.vocab_size:
        raise ValueError(f"teacher ({cfg.teacher}) and student ({cfg.student}) have different vocabularies "
                         f"({teacher.config.vocab_size} vs {student.config.vocab_size} tokens)")
    if len(tokenizer.vocab) > student.config.vocab_size:
        raise ValueError(f"the data's vocab has {len(tokenizer.vocab)} tokens, the student only "
                         f"{student.config.vocab_size}")
    if cfg.alpha_cos > 0 and teacher.config.hidden_size != student.config.hidden_size:
        raise ValueError(f"the cosine loss needs equal hidden sizes (teacher {teacher.config.hidden_size}, student "
                         f"{student.config.hidden_size}); use --alpha-cos 0")
    if cfg.temperature <= 0:
        raise ValueError(f"--temperature must be positive, got {cfg.temperature}")


def distill_step(teacher, student, batch: dict[str, torch.Tensor], cfg: DistillConfig,
                 device: torch.device) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
    """Forward both models on one MLM batch: (losses, student logits on masked rows, their labels)."""
    inputs = {k: batch[k].to(device) for k in ("input_ids", "attention_mask")}  # no segments for the student
    labels = batch["labels"].to(device)
    positions = labels != -100
    real = inputs["attention_mask"].bool()
    hidden = cfg.alpha_cos > 0
    with torch.no_grad():
        t = teacher(**inputs, prediction_positions=positions, output_hidden_states=hidden)
    s = student(**inputs, prediction_positions=positions, output_hidden_states=hidden)
    losses = distillation_loss(s.logits, t.logits, labels[positions],
                               s.hidden_states[-1][real] if hidden else None,
                               t.hidden_states[-1][real] if hidden else None, temperature=cfg.temperature,
                               alpha_ce=cfg.alpha_ce, alpha_mlm=cfg.alpha_mlm, alpha_cos=cfg.alpha_cos)
    return losses, s.logits, labels[positions]


def _device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def run_distillation(cfg: DistillConfig) -> DistillResult:
    """The loop: resume if OUTPUT holds checkpoints, train to max_steps / time budget, save, evaluate."""
    import contextlib

    from tqdm.auto import tqdm

    from bertforge.training.pretrain import (NonFiniteLossError, _save_final, evaluate, next_batch,
                                             resolve_vocab)

    if cfg.max_steps is None and cfg.time_budget is None:
        raise ValueError("give --max-steps, --time-budget or both")
    out, notes = Path(cfg.output), []
    device = _device(cfg.device)
    budget = cfg.time_budget
    max_steps = cfg.max_steps if cfg.max_steps is not None else 10 ** 12

    tokenizer = load_tokenizer(resolve_vocab(cfg.data, cfg.vocab))
    torch.manual_seed(cfg.seed)
    teacher, teacher_has_head = load_masked_lm(cfg.teacher)
    student, _ = load_masked_lm(cfg.student)
    _check_pair(teacher, student, tokenizer, cfg, teacher_has_head)
    teacher, student = teacher.to(device).eval(), student.to(device)
    masking = MaskingConfig(rate=cfg.mask_rate, mode="dynamic")
    train_data = PretrainingDataset(cfg.data, tokenizer, objective="mlm", max_seq_length=cfg.max_seq_length,
                                    batch_size=cfg.batch_size, masking=masking, seed=cfg.seed)
    optimizer = build_optimizer(student, cfg.lr, weight_decay=cfg.weight_decay)
    scheduler = linear_warmup_decay(optimizer, cfg.warmup_steps, max_steps)

    state = {"step": 0, "elapsed": 0.0, "skipped": 0, "bad_in_row": 0, "warmup_ended_at": None}
    for leftover in ckpt.sweep_partial_saves(out):
        notes.append(f"removed an interrupted checkpoint save: {leftover.name}")
    latest = ckpt.latest_checkpoint(out)
    record = {k: getattr(cfg, k) for k in RESUME_KEYS}
    if latest is not None:
        saved = ckpt.load_training_state(latest)
        changed = {k: (saved["run"].get(k), v) for k, v in record.items() if saved["run"].get(k) != v}
        if changed:
            raise ValueError(f"{out} holds a distillation run with other settings ("
                             + ", ".join(f"{k}: {a!r} there, {b!r} now" for k, (a, b) in changed.items())
                             + "); resume with the same settings or choose another --output")
        load_hf_state_dict(student, read_state_dict(latest)[0], source=latest)
        optimizer.load_state_dict(saved["optimizer"])
        scheduler.load_state_dict(saved["scheduler"])
        train_data.load_state_dict(saved["dataset"])
        ckpt.restore_rng(saved["rng"])
        state.update({k: saved.get(k, v) for k, v in state.items()})
        tqdm.write(f"resuming from {latest} (step {state['step']})")
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "run_config.json", json.dumps(asdict(cfg), indent=2) + "\n")
    log = MetricsLog(out / "metrics.jsonl", out / "curves.png", resume_step=state["step"])

    def save(step: int) -> None:
        training_state = {**state, "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                          "dataset": train_data.state_dict(), "rng": ckpt.capture_rng(), "run": record,
                          "config": asdict(cfg)}
        ckpt.save_checkpoint(out, step, student, tokenizer, training_state, keep=cfg.keep_checkpoints)

    start_step, started, elapsed_before = state["step"], time.perf_counter(), state["elapsed"]
    sums: dict[str, float] = {}
    window_start = time.perf_counter()
    bar = progress(cfg.max_steps, bar=cfg.progress, initial=start_step, desc="distill", dynamic_ncols=True)
    stopped_by, last_saved = "max-steps", state["step"] if latest is not None else -1
    student.train()
    while True:
        state["elapsed"] = elapsed_before + time.perf_counter() - started
        step = state["step"]
        if step >= max_steps:
            break
        if budget is not None and state["elapsed"] >= budget:
            stopped_by = "time-budget"
            break
        batch = next_batch(train_data)
        losses, logits, targets = distill_step(teacher, student, batch, cfg, device)
        losses["loss"].backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(student.parameters(), cfg.max_grad_norm)
        if budget is not None:  # as in pre-training: warmup by steps, then decay with the time spent
            set_budget_lr(optimizer, scheduler.base_lrs, state, step, cfg.warmup_steps, budget)
        if math.isfinite(float(losses["loss"].detach())) and math.isfinite(float(grad_norm)):
            optimizer.step()
            state["bad_in_row"] = 0
        else:
            state["skipped"] += 1
            state["bad_in_row"] += 1
            if state["bad_in_row"] >= cfg.max_bad_steps:
                raise NonFiniteLossError(f"{state['bad_in_row']} distillation steps in a row had a non-finite loss "
                                         f"(last at step {step + 1}); lower --lr or --temperature")
        optimizer.zero_grad(set_to_none=True)
        if budget is None:
            scheduler.step()
        state["step"] = step = step + 1
        bar.update(1)

        n = float(targets.numel())
        for k, v in losses.items():
            sums[k] = sums.get(k, 0.0) + float(v.detach())
        sums["steps"] = sums.get("steps", 0.0) + 1
        sums["correct"] = sums.get("correct", 0.0) + float((logits.argmax(-1) == targets).sum())
        sums["n"] = sums.get("n", 0.0) + n
        sums["tokens"] = sums.get("tokens", 0.0) + float(batch["attention_mask"].sum())
        if step % cfg.log_every == 0 or step == max_steps:
            now = time.perf_counter()
            values = {k: sums[k] / sums["steps"] for k in losses}
            values.update(mlm_acc=sums["correct"] / max(sums["n"], 1.0), lr=optimizer.param_groups[0]["lr"],
                          grad_norm=float(grad_norm), tokens_per_s=sums["tokens"] / max(now - window_start, 1e-9))
            log.log(step, "train", **values)
            bar.set_postfix({"loss": f"{values['loss']:.3f}", "ce": f"{values['loss_ce']:.3f}",
                             "mlm_acc": f"{values['mlm_acc']:.3f}"}, refresh=False)
            sums, window_start = {}, now
        if cfg.save_every and step % cfg.save_every == 0 and state["bad_in_row"] == 0:
            save(step)
            last_saved = step
    bar.close()

    if last_saved != state["step"]:
        save(state["step"])
    final_eval: dict[str, float] = {}
    teacher_eval: dict[str, float] = {}
    if cfg.eval_batches > 0:
        try:
            heldout = PretrainingDataset(cfg.data, tokenizer, objective="mlm", max_seq_length=cfg.max_seq_length,
                                         batch_size=cfg.batch_size, masking=MaskingConfig(rate=cfg.mask_rate),
                                         seed=cfg.seed, split="heldout")
        except ValueError as err:
            notes.append(f"held-out evaluation skipped: {err}")
        else:
            final_eval = evaluate(student, heldout, cfg.eval_batches, device, "mlm", contextlib.nullcontext)
            teacher_eval = evaluate(teacher, heldout, cfg.eval_batches, device, "mlm", contextlib.nullcontext)
            log.log(state["step"], "eval", **final_eval)
            tqdm.write("held-out: student " + ", ".join(f"{k} {v:.4f}" for k, v in final_eval.items())
                       + "; teacher " + ", ".join(f"{k} {v:.4f}" for k, v in teacher_eval.items()))
    log.plot(title=f"{out.name}: distillation")
    _save_final(student, tokenizer, out)
    summary = {"step": state["step"], "stopped_by": stopped_by, "skipped_steps": state["skipped"],
               "elapsed_seconds": round(state["elapsed"], 3), "final_eval": final_eval, "teacher_eval": teacher_eval,
               "parameters": {"teacher": teacher.num_parameters(), "student": student.num_parameters()}}
    atomic_write_text(out / SUMMARY_FILE, json.dumps(summary, indent=2) + "\n")
    if start_step == state["step"] and latest is not None:
        notes.append(f"nothing to train: {latest} already reached the end; the final model was written again")
    return DistillResult(out, state["step"], stopped_by, final_eval, teacher_eval, notes)


# ---- (c) task distillation for serving ------------------------------------------------------------------------
@dataclass
class TaskDistillSettings:
    teacher: str                            # a predictor folder (`bertforge finetune` output)
    student: str                            # a checkpoint folder, e.g. from `init_student`
    # .txt files (one text per line, TAB before a pair) or .tsv/.csv/.jsonl with a text column (labels ignored)
    unlabeled: Sequence[str]
    output: str
    task: str | None = None                 # default: the teacher's
    data: str | None = None                 # the task's folder: labelled train set and dev set
    train_file: str | None = None
    eval_file: str | None = None
    temperature: float = 2.0
    alpha_hard: float = 0.0                 # weight of cross-entropy on gold labels of the train set
    include_train: bool = True              # the labelled train texts join the transfer set too
    epochs: float = 2.0
    batch_size: int = 32
    eval_batch_size: int = 64
    lr: float = 1e-4
    weight_decay: float = 0.01
    warmup_fraction: float = 0.1
    max_unlabeled: int | None = None
    max_train_samples: int | None = None    # default: the teacher's (from its metrics.json)
    max_eval_samples: int | None = None
    seed: int | None = None                 # default: the teacher's
    timing_rounds: int = 3
    progress: bool = True


def read_texts(paths: Sequence[str | Path]) -> list[Any]:
    """Unlabeled TextExamples from .txt files (one per line; `text<TAB>pair`) or table files (labels dropped)."""
    from bertforge.tasks.readers import TextExample, read_classification
    examples: list[Any] = []
    for p in paths:
        path = Path(p)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such unlabeled-text file")
        name = path.name.removesuffix(".gz")
        if name.endswith(".txt"):
            from bertforge.textio import open_text
            with open_text(path) as handle:
                rows = [(i, line.rstrip("\n").split("\t", 1)) for i, line in enumerate(handle, 1) if line.strip()]
            found = [TextExample(f"{path.name}-{i}", parts[0], parts[1] if len(parts) > 1 else None, None, i)
                     for i, parts in rows]
        else:
            try:
                result = read_classification(path, skip_bad_rows=True)
            except ValueError as err:
                raise ValueError(f"{path}: cannot read texts from it ({err}); use a .txt file with one text per "
                                 "line, or a .tsv/.csv/.jsonl file with a 'text' or 'sentence' column") from None
            found = [TextExample(ex.guid, ex.text, ex.text_pair, None, ex.line) for ex in result.examples]
        if not found:
            raise ValueError(f"{path}: holds no texts")
        examples.extend(found)
    return examples


def task_distillation_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, hard_labels: torch.Tensor,
                           temperature: float, alpha_hard: float, regression: bool) -> dict[str, torch.Tensor]:
    """Soft term: KL(teacher_T || student_T) x T^2 (regression: MSE to the teacher's score). Hard term, on rows
    with a gold label (>= 0, or finite for regression), weighted by `alpha_hard`."""
    s, t = student_logits.float(), teacher_logits.float()
    if regression:
        soft = F.mse_loss(s.reshape(-1), t.reshape(-1))
        gold = torch.isfinite(hard_labels)
        hard = F.mse_loss(s.reshape(-1)[gold], hard_labels[gold].float()) if bool(gold.any()) else s.sum() * 0
    else:
        T = float(temperature)
        soft = F.kl_div(F.log_softmax(s / T, -1), F.log_softmax(t / T, -1), log_target=True,
                        reduction="batchmean") * T * T
        gold = hard_labels >= 0
        hard = F.cross_entropy(s[gold], hard_labels[gold].long()) if bool(gold.any()) else s.sum() * 0
    loss = soft + alpha_hard * hard if alpha_hard else soft
    return {"loss": loss, "loss_soft": soft, "loss_hard": hard}


def _teacher_finetune_settings(folder: Path) -> dict[str, Any]:
    """The settings `bertforge finetune` recorded in the teacher's metrics.json (train subset size, seed)."""
    try:
        return json.loads((folder / "metrics.json").read_text(encoding="utf-8")).get("settings", {}) or {}
    except (OSError, json.JSONDecodeError, AttributeError):
        return {}


def measure_throughput(predictors: dict[str, Any], inputs: list[Any], rounds: int = 3,
                       batch_size: int = 64) -> dict[str, list[float]]:
    """Examples/s of each predictor on the same inputs, interleaved round by round so that load changes on
    a shared machine hit all of them alike; one warm-up call each first."""
    for p in predictors.values():
        p.predict(inputs[:batch_size], batch_size=batch_size)
    rates: dict[str, list[float]] = {name: [] for name in predictors}
    for _ in range(max(1, rounds)):
        for name, p in predictors.items():
            p.predict(inputs, batch_size=batch_size)
            rates[name].append(p.timing["examples_per_second"])
    return rates


@dataclass
class TransferSet:
    """What the student learns from: unlabeled texts, then (optionally) the train texts, all without labels."""

    examples: list[Any]
    hard: torch.Tensor          # gold label per example; -1 (NaN for regression) where there is none
    n_unlabeled: int
    dev: list[Any]
    note: str | None


def build_transfer_set(settings: TaskDistillSettings, spec, labels: Sequence[str] | None, seed: int,
                       max_train: int | None) -> TransferSet:
    """Unlabeled texts minus any train/dev text (never train on dev), a seeded sample of them, plus the
    labelled train subset (by default the teacher's own: same size and seed as its fine-tuning)."""
    from bertforge.tasks.task_data import load_task_data, subset
    from bertforge.tasks.readers import TextExample
    regression = spec.head == "regression"
    train, dev, note = [], [], None
    if settings.data or settings.train_file or settings.eval_file:
        need_train = settings.include_train or settings.alpha_hard > 0
        data = load_task_data(spec, settings.data, settings.train_file, settings.eval_file, need_train=need_train)
        train = subset(data.train, max_train, seed) if need_train else []
        dev = subset(next(iter(data.evals.values())), settings.max_eval_samples, None)
        note = data.note or None
    seen = {(ex.text, ex.text_pair) for ex in list(train) + list(dev)}
    unlabeled = []
    for ex in read_texts(settings.unlabeled):
        if (ex.text, ex.text_pair) not in seen:
            seen.add((ex.text, ex.text_pair))
            unlabeled.append(ex)
    unlabeled = subset(unlabeled, settings.max_unlabeled, seed)
    used_train = list(train) if settings.include_train else []
    if not unlabeled and not used_train:
        raise ValueError(f"no texts to distill on: {', '.join(map(str, settings.unlabeled))} held only texts of the "
                         "train/dev sets")
    label2id = {name: i for i, name in enumerate(labels or [])}
    gold = [float(ex.label) if regression else label2id[str(ex.label)] for ex in used_train]
    missing = float("nan") if regression else -1
    hard = torch.tensor([missing] * len(unlabeled) + gold, dtype=torch.float if regression else torch.long)
    examples = [TextExample(ex.guid, ex.text, ex.text_pair, None, ex.line) for ex in unlabeled + used_train]
    return TransferSet(examples, hard, len(unlabeled), dev, note)


def train_student(settings: TaskDistillSettings, spec, ft, labels: Sequence[str] | None, features: list[Any],
                  soft: torch.Tensor, transfer: TransferSet, pad_id: int, out: Path):
    """The fine-tuning recipe (AdamW, warmup, linear decay) on the distillation loss; dev eval after each
    epoch. Returns (student, RunResult)."""
    from bertforge.tasks.features import iterate_batches
    from bertforge.tasks.evaluation import evaluate_examples, main_value
    from bertforge.tasks.finetune import RunResult, build_model
    torch.manual_seed(ft.seed)
    student = build_model(spec, settings.student, labels)
    student_tokenizer = load_tokenizer(settings.student)
    optimizer = build_optimizer(student, settings.lr, weight_decay=settings.weight_decay)
    total = max(1, math.ceil(math.ceil(len(features) / settings.batch_size) * settings.epochs))
    scheduler = linear_warmup_decay(optimizer, int(settings.warmup_fraction * total), total)
    log = MetricsLog(out / "metrics.jsonl", out / "curves.png", resume_step=0)
    step, epoch, started, running, dev_metrics = 0, 0, time.perf_counter(), {}, {}
    regression = spec.head == "regression"
    bar = progress(total, bar=settings.progress, desc=f"distill {spec.name}", leave=False)
    student.train()
    while step < total:
        for idx, batch in iterate_batches(features, settings.batch_size, shuffle=True, seed=ft.seed + epoch,
                                          pad_id=pad_id):
            logits = student(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                             token_type_ids=batch["token_type_ids"]).logits
            losses = task_distillation_loss(logits, soft[idx], transfer.hard[idx], settings.temperature,
                                            settings.alpha_hard, regression)
            losses["loss"].backward()
            torch.nn.utils.clip_grad_norm_(student.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            bar.update(1)
            for k, v in losses.items():
                running[k] = running.get(k, 0.0) + float(v.detach())
            running["n"] = running.get("n", 0) + 1
            if step % 10 == 0 or step == total:
                log.log(step, "train", lr=scheduler.get_last_lr()[0],
                        **{k: v / running["n"] for k, v in running.items() if k != "n"})
                bar.set_postfix(loss=f"{running['loss'] / running['n']:.4f}", refresh=False)
                running = {}
            if step >= total:
                break
        epoch += 1
        if transfer.dev:
            dev_metrics, _ = evaluate_examples(student, student_tokenizer, spec, transfer.dev, ft, labels)
            log.log(step, "eval", **{k: v for k, v in dev_metrics.items() if isinstance(v, (int, float))
                                     and k not in ("n_examples", "eval_seconds", "examples_per_second")})
            student.train()
    bar.close()
    log.plot(title=f"{spec.name}: task distillation")
    value = main_value(spec, dev_metrics) if dev_metrics else float("nan")
    run = RunResult("distill", settings.lr, ft.seed, dev_metrics, value, round(time.perf_counter() - started, 2),
                    step, log.png_path if log.png_path.exists() else None)
    return student.eval(), run


def compare(rows: dict[str, Any], spec, dev: list[Any], labels: Sequence[str] | None,
            rounds: int, batch_size: int) -> dict[str, Any]:
    """Dev metric, size and measured examples/s of each predictor (same inputs, interleaved timing)."""
    from bertforge.tasks.evaluation import evaluate_examples
    report: dict[str, Any] = {}
    for name, p in rows.items():
        config = p.model.config
        row: dict[str, Any] = {"path": str(p.path), "model_type": config.model_type,
                               "parameters": p.model.num_parameters(), "layers": config.num_hidden_layers,
                               "hidden_size": config.hidden_size}
        if dev:
            metrics, _ = evaluate_examples(p.model, p.tokenizer, spec, dev, p.settings, labels)
            row[spec.main_metric] = metrics[spec.main_metric]
            row["dev"] = {k: v for k, v in metrics.items() if k not in ("eval_seconds", "examples_per_second")}
        report[name] = row
    if dev:
        inputs = [ex.text if ex.text_pair is None else (ex.text, ex.text_pair) for ex in dev]
        for name, values in measure_throughput(rows, inputs, rounds, batch_size).items():
            report[name]["examples_per_second"] = round(statistics.median(values), 2)
            report[name]["examples_per_second_rounds"] = values
    return report


def distill_task(settings: TaskDistillSettings, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Teacher soft targets on the transfer set -> student training -> predictor folder + distill_report.json."""
    from bertforge.tasks.evaluation import encode, run_model
    from bertforge.tasks.finetune import FinetuneSettings, save_predictor
    from bertforge.tasks.task_data import TaskData
    from bertforge.tasks.predictor import Predictor
    from bertforge.tasks.registry import get_task

    teacher_dir = resolve_folder(settings.teacher)
    teacher = Predictor.load(teacher_dir)
    spec, labels = teacher.spec, teacher.labels  # the teacher's label order is what its logits mean
    if settings.task and get_task(settings.task).name != spec.name:
        raise ValueError(f"{teacher_dir} was fine-tuned on {spec.name}, not {settings.task}")
    if spec.head not in ("sequence_classification", "regression"):
        raise ValueError(f"task distillation handles sentence(-pair) classification and regression; {spec.name} "
                         f"has a {spec.head} head")
    resolve_folder(settings.student)
    previous = _teacher_finetune_settings(teacher_dir)
    seed = settings.seed if settings.seed is not None else int(previous.get("seed", 42))
    max_train = settings.max_train_samples if settings.max_train_samples is not None else \
        previous.get("max_train_samples")
    out = Path(settings.output)
    out.mkdir(parents=True, exist_ok=True)
    transfer = build_transfer_set(settings, spec, labels, seed, max_train)
    ft = FinetuneSettings(task=spec.name, model=str(settings.student), output=str(out),
                          max_seq_length=teacher.settings.seq_length(spec), batch_size=settings.batch_size,
                          eval_batch_size=settings.eval_batch_size, seed=seed, progress=False)
    say(f"{spec.name}: transfer set of {len(transfer.examples)} texts ({transfer.n_unlabeled} unlabeled, "
        f"{len(transfer.examples) - transfer.n_unlabeled} from the train set), {len(transfer.dev)} dev examples")

    start = time.perf_counter()
    try:
        features = encode(spec, teacher.tokenizer, transfer.examples, ft, None, training=False)
    except ValueError as err:
        raise ValueError(f"{', '.join(map(str, settings.unlabeled))}: {err} (a sentence-pair task needs "
                         "text<TAB>pair lines)") from None
    soft = torch.from_numpy(np.stack(run_model(teacher.model, features, settings.eval_batch_size,
                                               teacher.tokenizer.pad_token_id))).float()
    labelling_seconds = time.perf_counter() - start
    say(f"teacher labelled {len(features)} texts in {labelling_seconds:.1f}s")

    student_tokenizer = load_tokenizer(settings.student)
    if student_tokenizer.vocab != teacher.tokenizer.vocab:
        features = encode(spec, student_tokenizer, transfer.examples, ft, None, training=False)
    student, run = train_student(settings, spec, ft, labels, features, soft, transfer,
                                 student_tokenizer.pad_token_id, out)
    save_predictor(out, student, student_tokenizer, spec, ft, TaskData([], {}, labels, transfer.note or ""), run)

    report: dict[str, Any] = {"task": spec.name, "main_metric": spec.main_metric, "note": transfer.note,
                              "threads": torch.get_num_threads()}
    report.update(compare({"teacher": teacher, "student": Predictor.load(out)}, spec, transfer.dev, labels,
                          settings.timing_rounds, settings.eval_batch_size))
    report["size_ratio"] = round(report["student"]["parameters"] / report["teacher"]["parameters"], 4)
    if transfer.dev:
        report["speedup"] = round(report["student"]["examples_per_second"]
                                  / max(report["teacher"]["examples_per_second"], 1e-9), 3)
    report["transfer_set"] = {"unlabeled": transfer.n_unlabeled,
                              "from_train": len(transfer.examples) - transfer.n_unlabeled,
                              "files": [str(p) for p in settings.unlabeled],
                              "teacher_labelling_seconds": round(labelling_seconds, 2)}
    report["training"] = {"steps": run.steps, "epochs": settings.epochs, "seconds": run.seconds}
    report["settings"] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(settings).items()}
    atomic_write_text(out / REPORT_FILE, json.dumps(report, indent=2, default=str) + "\n")
    if transfer.dev:
        t, s, metric = report["teacher"], report["student"], spec.main_metric
        say(f"dev {metric}: teacher {t[metric]:.4f}, student {s[metric]:.4f}; examples/s: teacher "
            f"{t['examples_per_second']:.1f}, student {s['examples_per_second']:.1f} ({report['speedup']:.2f}x); "
            f"parameters {t['parameters']:,} -> {s['parameters']:,}")
    say(f"saved predictor to {out}")
    return report

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
import statistics
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from bertforge.atomic import atomic_write_text
from bertforge.checkpoint import resolve_folder
from bertforge.data import MaskingConfig, PretrainingDataset
from bertforge.data.shards import load_tokenizer
from bertforge.device import Precision
from bertforge.model.distilbert import LAYER_NORM_EPS, DistilBertConfig, DistilBertForMaskedLM
from bertforge.training.engine import FaultHooks, Session, fit
from bertforge.training.pretrain import CorpusStage
from bertforge.training.options import TrainOptions, distill_defaults, task_distill_defaults
from bertforge.outputs import fresh_output, is_finished
from bertforge.settings import flat_keywords, flatten, part, setting, settings_record
from bertforge.training.run_output import claim_run_output

INIT_RECORD = "distill_init.json"
SUMMARY_FILE = "distill_summary.json"
REPORT_FILE = "distill_report.json"


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


def init_student(teacher_dir: str | Path, output_dir: str | Path, layers: Optional[Sequence[int]] = None, *,
                 overwrite: bool = False) -> Path:
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
    settings = {"teacher": str(teacher_dir), "layers": chosen}
    with fresh_output(output_dir, verb="distill-init", overwrite=overwrite, settings=settings,
                      inputs=(teacher_dir,)) as out:
        student.save_pretrained(out)
        load_tokenizer(folder).save_pretrained(out)
        _write_init_record(out, teacher_dir, teacher, student, n, chosen, has_head)
    return out


def _write_init_record(out: Path, teacher_dir: str | Path, teacher, student, n: int, chosen: list[int],
                       has_head: bool) -> None:
    record = {"teacher": str(teacher_dir), "teacher_layers": n, "student_layers": chosen,
              "token_type_embeddings": "segment 0 folded into word_embeddings" if teacher.config.type_vocab_size
              else "none in the teacher", "mlm_head": "copied" if has_head else "new (the teacher has none)",
              "parameters": {"teacher": teacher.num_parameters(), "student": student.num_parameters()}}
    atomic_write_text(out / INIT_RECORD, json.dumps(record, indent=2) + "\n")


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


@flat_keywords
@dataclass
class DistillConfig:
    """A pre-training distillation run: teacher, initial student, corpus, DistilBERT's loss weights, and the
    engine's settings (`train`; also given by their own names, `max_steps=...`)."""

    teacher: str = setting(help="checkpoint with an MLM head", metavar="DIR")
    student: str = setting(help="initial student (e.g. from `distill init`)", metavar="DIR")
    data: str = setting(help="a folder written by `bertforge prepare`", metavar="DIR")
    output: str = setting(help="folder for the student and its checkpoints", metavar="DIR")
    temperature: float = setting(2.0, "softmax temperature of the soft targets")
    alpha_ce: float = setting(5.0, "weight of the soft-target loss (DistilBERT's 5)")
    alpha_mlm: float = setting(2.0, "weight of the masked-LM loss (DistilBERT's 2)")
    alpha_cos: float = setting(1.0, "weight of the cosine loss between last hidden states (DistilBERT's 1)")
    vocab: str | None = setting(None, "tokenizer folder (default: the vocab the corpus was prepared with)",
                                metavar="DIR")
    batch_size: int = setting(32, "sequences per micro-batch and process", positive=True)
    max_seq_length: int = setting(128, "tokens per sequence", positive=True)
    mask_rate: float = setting(0.15, "share of tokens masked")
    eval_batches: int = setting(20, "held-out batches evaluated at the end (0: none)", non_negative=True)
    overwrite: bool = setting(False, "start again in an OUTPUT that holds another run (its contents are deleted)")
    train: TrainOptions = part(TrainOptions, distill_defaults, title="training")


@dataclass
class DistillResult:
    output: Path
    step: int
    stopped_by: str
    final_eval: dict[str, float] = field(default_factory=dict)
    teacher_eval: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def distill(teacher: str | Path, student: str | Path, data: str | Path, output: str | Path, *,
            hooks: FaultHooks | None = None, **options: Any) -> DistillResult:
    """Keyword front end: ``distill("teacher/", "student/", "data/", "out/", max_steps=1000)``."""
    return run_distillation(DistillConfig(teacher=str(teacher), student=str(student), data=str(data),
                                          output=str(output), **options), hooks=hooks)


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


@dataclass
class StepOutput:
    loss: torch.Tensor
    parts: dict[str, torch.Tensor]
    logits: torch.Tensor | None = None
    targets: torch.Tensor | None = None


class DistillStage(CorpusStage):
    """Pre-training distillation: the student learns the teacher's masked-token distribution on a corpus."""

    name = "distill"

    def __init__(self, cfg: DistillConfig, teacher, student, tokenizer, train_data: PretrainingDataset,
                 heldout: PretrainingDataset | None, precision: Precision) -> None:
        self.cfg, self.teacher, self.model, self.tokenizer = cfg, teacher, student, tokenizer
        self.train_data, self.heldout, self.precision = train_data, heldout, precision
        self.device = next(student.parameters()).device

    def run_record(self) -> dict[str, Any]:
        from bertforge.training.pretrain import data_fingerprint
        c = self.cfg
        return {"teacher": c.teacher, "student": c.student, "data": data_fingerprint(c.data),
                "batch_size": c.batch_size, "max_seq_length": c.max_seq_length, "mask_rate": c.mask_rate,
                "temperature": c.temperature, "alpha_ce": c.alpha_ce, "alpha_mlm": c.alpha_mlm,
                "alpha_cos": c.alpha_cos}

    def loss(self, net, batch: dict[str, torch.Tensor]) -> StepOutput:
        losses, logits, targets = distill_step(self.teacher, net, batch, self.cfg, self.device)
        return StepOutput(losses["loss"], losses, logits, targets)

    def add_metrics(self, sums: dict[str, float], out: StepOutput, batch: dict[str, torch.Tensor]) -> None:
        for k, v in out.parts.items():
            sums[k] = sums.get(k, 0.0) + float(v.detach())
        sums["micro_batches"] = sums.get("micro_batches", 0.0) + 1
        sums["correct"] = sums.get("correct", 0.0) + float((out.logits.detach().argmax(-1) == out.targets).sum())
        sums["n"] = sums.get("n", 0.0) + float(out.targets.numel())

    def summarize(self, sums: dict[str, float]) -> dict[str, float]:
        if not sums.get("micro_batches"):
            return {}
        values = {k: sums[k] / sums["micro_batches"] for k in ("loss_ce", "loss_mlm", "loss_cos") if k in sums}
        values["mlm_acc"] = sums["correct"] / max(sums["n"], 1.0)
        return values

    def evaluate(self) -> dict[str, float]:
        from bertforge.training.pretrain import evaluate
        if self.heldout is None:
            return {}
        return evaluate(self.model, self.heldout, self.cfg.eval_batches, self.device, "mlm", self.precision.autocast)

    def postfix(self, values: dict[str, float]) -> dict[str, str]:
        return {"ce": f"{values.get('loss_ce', 0.0):.3f}", "mlm_acc": f"{values.get('mlm_acc', 0.0):.3f}"}


def run_distillation(cfg: DistillConfig, hooks: FaultHooks | None = None) -> DistillResult:
    """Resume if OUTPUT holds checkpoints, train to max_steps / time budget, save, evaluate student and teacher."""
    from bertforge.training.pretrain import evaluate, resolve_vocab

    opts = cfg.train
    opts.check()
    inputs = (cfg.teacher, cfg.student, cfg.data, cfg.vocab)
    with Session(opts.device, opts.dist_timeout) as session, \
            claim_run_output(cfg.output, "distill-pretrain", cfg, session, overwrite=cfg.overwrite, inputs=inputs,
                             keep_checkpoints=opts.keep_checkpoints_at_end) as out:
        device = session.device
        tokenizer = load_tokenizer(resolve_vocab(cfg.data, cfg.vocab))
        torch.manual_seed(opts.seed)
        teacher, teacher_has_head = load_masked_lm(cfg.teacher)
        student, _ = load_masked_lm(cfg.student)
        _check_pair(teacher, student, tokenizer, cfg, teacher_has_head)
        teacher, student = teacher.to(device).eval(), student.to(device)
        info = session.info
        train_data = PretrainingDataset(cfg.data, tokenizer, objective="mlm", max_seq_length=cfg.max_seq_length,
                                        batch_size=cfg.batch_size, masking=MaskingConfig(rate=cfg.mask_rate,
                                                                                         mode="dynamic"),
                                        seed=opts.seed, rank=info.rank, world_size=info.world_size)
        notes: list[str] = []
        heldout = None
        if cfg.eval_batches > 0 and session.is_main:
            try:
                heldout = PretrainingDataset(cfg.data, tokenizer, objective="mlm", max_seq_length=cfg.max_seq_length,
                                             batch_size=cfg.batch_size, masking=MaskingConfig(rate=cfg.mask_rate),
                                             seed=opts.seed, split="heldout")
            except ValueError as err:
                notes.append(f"held-out evaluation skipped: {err}")
        precision = Precision.resolve(opts.precision, device)
        stage = DistillStage(cfg, teacher, student, tokenizer, train_data, heldout, precision)
        result = fit(stage, opts, session, out, hooks=hooks)
        teacher_eval: dict[str, float] = {}
        if heldout is not None:
            teacher_eval = evaluate(teacher, heldout, cfg.eval_batches, device, "mlm", precision.autocast)
        if session.is_main:
            summary = {"step": result.step, "stopped_by": result.stopped_by, "skipped_steps": result.skipped_steps,
                       "elapsed_seconds": round(result.elapsed, 3), "final_eval": result.final_eval,
                       "teacher_eval": teacher_eval,
                       "parameters": {"teacher": teacher.num_parameters(), "student": student.num_parameters()}}
            atomic_write_text(out / SUMMARY_FILE, json.dumps(summary, indent=2) + "\n")
    return DistillResult(out, result.step, result.stopped_by, result.final_eval, teacher_eval,
                         notes + result.notes)


# ---- (c) task distillation for serving ------------------------------------------------------------------------
@flat_keywords
@dataclass
class TaskDistillSettings:
    """A task distillation run: teacher predictor, student checkpoint, the texts the teacher labels, and the
    engine's settings for the student's training (`train`; also given by their own names, `lr=...`)."""

    teacher: str = setting(help="a `bertforge finetune` output folder", metavar="PREDICTOR")
    student: str = setting(help="student checkpoint (e.g. `distill init`)", metavar="DIR")
    unlabeled: Sequence[str] = setting(help=".txt (one text per line, TAB before a pair) or .tsv/.csv/.jsonl with a "
                                       "text column (labels ignored)", metavar="FILE", nargs="+")
    output: str = setting(help="folder for the student predictor and distill_report.json", metavar="DIR")
    train: TrainOptions = part(
        TrainOptions, task_distill_defaults, title="training",
        # the run's steps follow from --epochs and its warmup from --warmup; its seed is --seed (or the teacher's)
        hide=("max_steps", "time_budget", "warmup_steps", "seed"),
        help={"eval_every": "evaluate every N steps (0: after every epoch)",
              "save_every": "checkpoint every N steps, so that a killed run resumes there (0: no checkpoints; a "
                            "killed run starts again)"})
    task: str | None = setting(None, "the task (default: the teacher's)")
    data: str | None = setting(None, "the task's folder (train set and dev set)", metavar="DIR")
    train_file: str | None = setting(None, "labelled train file (overrides --data)", flag="--train", metavar="FILE")
    eval_file: str | None = setting(None, "dev file (overrides --data)", flag="--eval", metavar="FILE")
    temperature: float = setting(2.0, "softmax temperature of the soft targets", positive=True)
    alpha_hard: float = setting(0.0, "weight of gold-label cross-entropy on the train set")
    include_train: bool = setting(True, "leave the train set out of the transfer set", flag="--no-train-texts")
    epochs: float = setting(2.0, "passes over the transfer set", positive=True)
    batch_size: int = setting(32, "examples per micro-batch and process", positive=True)
    eval_batch_size: int = setting(64, "examples per batch when the teacher labels and when timing", positive=True)
    warmup_fraction: float = setting(0.1, "fraction of the steps for linear lr warmup", flag="--warmup",
                                     kind="probability")
    max_unlabeled: int | None = setting(None, "a seeded sample of this many texts", positive=True)
    max_train_samples: int | None = setting(None, "train-set examples in the transfer set (default: the teacher's)",
                                            positive=True)
    max_eval_samples: int | None = setting(None, "evaluate on the first N dev examples", positive=True)
    seed: int | None = setting(None, "random seed (default: the teacher's)")
    timing_rounds: int = setting(3, "interleaved throughput rounds per model", positive=True)
    overwrite: bool = setting(False, "start again in an OUTPUT that holds another run (its contents are deleted)")


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
    """The settings `bertforge finetune` recorded in the teacher's metrics.json (train subset size, seed), by
    their own names."""
    try:
        return flatten(json.loads((folder / "metrics.json").read_text(encoding="utf-8")).get("settings", {}) or {})
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


def task_distill_stage(soft: torch.Tensor, hard: torch.Tensor, temperature: float, alpha_hard: float):
    """A fine-tuning stage whose loss is the distillation loss against the teacher's soft targets."""
    from bertforge.tasks.finetune import FinetuneStage

    class TaskDistillStage(FinetuneStage):
        name = "distill-task"

        def run_record(self) -> dict[str, Any]:
            return {**super().run_record(), "temperature": temperature, "alpha_hard": alpha_hard,
                    "transfer_set": len(soft)}

        def loss(self, net, batch: dict[str, Any]) -> StepOutput:
            idx = batch["idx"]
            logits = net(input_ids=batch["input_ids"].to(self.device),
                         attention_mask=batch["attention_mask"].to(self.device),
                         token_type_ids=batch["token_type_ids"].to(self.device)).logits
            losses = task_distillation_loss(logits, soft[idx].to(self.device), hard[idx].to(self.device),
                                            temperature, alpha_hard, self.spec.head == "regression")
            return StepOutput(losses["loss"], losses)

        def add_metrics(self, sums: dict[str, float], out: StepOutput, batch: dict[str, Any]) -> None:
            for k, v in out.parts.items():
                sums[k] = sums.get(k, 0.0) + float(v.detach())
            sums["micro_batches"] = sums.get("micro_batches", 0.0) + 1

        def summarize(self, sums: dict[str, float]) -> dict[str, float]:
            n = sums.get("micro_batches", 0.0)
            return {k: sums[k] / n for k in ("loss_soft", "loss_hard") if k in sums} if n else {}

    return TaskDistillStage


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


def distill_task(settings: TaskDistillSettings, say: Callable[[str], None] = print,
                 hooks: FaultHooks | None = None) -> dict[str, Any]:
    """Teacher soft targets on the transfer set -> student training -> predictor folder + distill_report.json."""
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
    inputs = (settings.teacher, settings.student, *settings.unlabeled, settings.data, settings.train_file,
              settings.eval_file)
    train = settings.train
    with Session(train.device, train.dist_timeout) as session, \
            claim_run_output(settings.output, "distill-task", settings, session, overwrite=settings.overwrite,
                             inputs=inputs, keep_checkpoints=train.keep_checkpoints_at_end) as out:
        if is_finished(out):
            say(f"{out} already holds this finished distill-task run; nothing to do")
            return json.loads((out / REPORT_FILE).read_text(encoding="utf-8")) if session.is_main else {}
        return _distill_task(settings, say, session, out, teacher, spec, labels, seed, max_train, hooks)


def _distill_task(settings: TaskDistillSettings, say: Callable[[str], None], session: Session, out: Path, teacher,
                  spec, labels: Sequence[str] | None, seed: int, max_train: int | None,
                  hooks: FaultHooks | None = None) -> dict[str, Any]:
    from bertforge.tasks.evaluation import encode, run_model
    from bertforge.tasks.finetune import FinetuneSettings, train_run
    from bertforge.tasks.predictor import Predictor
    from bertforge.tasks.task_data import DataOptions, TaskData

    transfer = build_transfer_set(settings, spec, labels, seed, max_train)
    ft = FinetuneSettings(model=str(settings.student), output=str(out), data_options=DataOptions(task=spec.name),
                          train=replace(settings.train, seed=seed), max_seq_length=teacher.settings.seq_length(spec),
                          batch_size=settings.batch_size, eval_batch_size=settings.eval_batch_size,
                          epochs=settings.epochs, warmup_fraction=settings.warmup_fraction)
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
    data = TaskData([], {"eval": transfer.dev} if transfer.dev else {}, labels, transfer.note or "")
    make_stage = task_distill_stage(soft, transfer.hard, settings.temperature, settings.alpha_hard)
    run = train_run(spec, student_tokenizer, data, features, ft, settings.train.lr, seed, out, session, hooks=hooks,
                    make_stage=make_stage)
    if not session.is_main:
        return {}

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
    report["settings"] = settings_record(settings)
    atomic_write_text(out / REPORT_FILE, json.dumps(report, indent=2, default=str) + "\n")
    if transfer.dev:
        t, s, metric = report["teacher"], report["student"], spec.main_metric
        say(f"dev {metric}: teacher {t[metric]:.4f}, student {s[metric]:.4f}; examples/s: teacher "
            f"{t['examples_per_second']:.1f}, student {s['examples_per_second']:.1f} ({report['speedup']:.2f}x); "
            f"parameters {t['parameters']:,} -> {s['parameters']:,}")
    say(f"saved predictor to {out}")
    return report

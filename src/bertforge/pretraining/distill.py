"""Knowledge distillation (Hinton et al., 2015; DistilBERT, Sanh et al., 2019): a small student from a teacher.

* `init_student`: the teacher's config with every other layer, no segments and no pooler, initialised from
  the teacher's weights and saved as a DistilBERT checkpoint (loads in `transformers`).
* `distill`: pre-training distillation on a prepared corpus with DistilBERT's triple loss (soft targets at
  temperature T on the masked positions, MLM, cosine between last hidden states). It is built from the
  pre-training loop's parts: optimizer and schedule, atomic checkpoints with exact resume, metrics log and
  curves, held-out evaluation, a time budget. `loss="tinybert"` trains with TinyBERT's layer-wise losses
  instead (`pretraining/tinybert.py`): any smaller BERT-family student, hidden size free.

Task distillation (a fine-tuned teacher's soft targets on unlabeled texts) is `bertforge.tasks.distill`.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Optional, Sequence

import torch
import torch.nn.functional as F

from bertforge.atomic import atomic_write_text
from bertforge.checkpoint import newly_initialized, resolve_folder
from bertforge.data import MaskingConfig, PretrainingDataset
from bertforge.data.shards import load_tokenizer
from bertforge.device import Precision
from bertforge.model.distilbert import LAYER_NORM_EPS, DistilBertConfig, DistilBertForMaskedLM
from bertforge.training.engine import FaultHooks, FitResult, Session
from bertforge.pretraining.pretrain import CorpusStage
from bertforge.pretraining.tinybert import StepOutput
from bertforge.training.options import TrainOptions, distill_defaults
from bertforge.outputs import fresh_output
from bertforge.settings import MAX_BATCH, MAX_LENGTH, SettingError, check_settings, flat_keywords, part, setting
from bertforge.training.run import Built, train
from bertforge.training.summary import NUMBER, JsonRecord, key

INIT_RECORD = "distill_init.json"
SUMMARY_FILE = "distill_summary.json"


@dataclass(kw_only=True)
class DistillReport(JsonRecord):
    """distill_summary.json: how the distillation run ended, the student's and the teacher's held-out MLM scores
    and both models' sizes."""

    FILE: ClassVar[str] = SUMMARY_FILE
    step: int = key(int)
    stopped_by: str = key(str)
    skipped_steps: int = key(int, 0)
    elapsed_seconds: float = key(NUMBER, 0.0)
    final_eval: dict[str, Any] = key(dict, factory=dict)
    teacher_eval: dict[str, Any] = key(dict, factory=dict)
    parameters: dict[str, Any] = key(dict, factory=dict)  # {"teacher": int, "student": int}
    extra: dict[str, Any] = field(default_factory=dict, compare=False)


# ---- (a) a student from the teacher ---------------------------------------------------------------------------
def load_masked_lm(path: str | Path):
    """A BERT-family checkpoint with its MLM head; (model, whether the folder really had the head)."""
    from bertforge.model.auto import model_class_for
    folder = resolve_folder(path)
    model = model_class_for(folder, "masked_lm").from_pretrained(folder)
    has_head = not any(n.startswith(("cls.", "vocab_", "lm_head.", "predictions."))
                       for n in newly_initialized(model))
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


def _layer_list(text: str) -> list[int]:
    """'0,2,4' -> [0, 2, 4]."""
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"expected comma-separated layer numbers such as 0,2,4, not {text!r}") from None


@dataclass
class DistillInitSettings:
    """`bertforge distill init`: a DistilBERT student from every other layer (or `layers`) of a teacher."""

    teacher: str = setting(help="BERT or DistilBERT checkpoint folder", metavar="DIR")
    output: str = setting(help="folder for the student (new or empty, unless --overwrite)", metavar="DIR")
    layers: Sequence[int] | None = setting(None, "teacher layers to keep (default 0,2,4,...)", parse=_layer_list,
                                           minimum=0, maximum=1_000, metavar="I,J,...")
    overwrite: bool = setting(False, "empty an existing, non-empty --output folder first (default: refuse it)")


def distill_init(settings: DistillInitSettings) -> Path:
    """`bertforge distill init`: the settings checked, then `init_student`."""
    check_settings(settings)
    return init_student(settings.teacher, settings.output, settings.layers, overwrite=settings.overwrite)


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
    from bertforge.data.identity import check_input_content, record_input_content
    content = check_input_content(output_dir, "distill-init", (teacher_dir,), overwrite)
    with fresh_output(output_dir, verb="distill-init", overwrite=overwrite, settings=settings,
                      inputs=(teacher_dir,)) as out:
        record_input_content(out, content)
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
    student: str = setting(help="initial student folder (e.g. from `distill init`), or a fresh one: a named size "
                           "(tiny, mini, small...) or a config.json", metavar="DIR")
    data: str = setting(help="a folder written by `bertforge prepare`", metavar="DIR")
    output: str = setting(help="folder for the student and its checkpoints", metavar="DIR")
    loss: str = setting("distilbert", "distilbert: soft targets + MLM + cosine; tinybert: embedding, hidden-state "
                        "and attention-score MSE, then soft targets (TinyBERT)", choices=("distilbert", "tinybert"))
    tinybert_intermediate_fraction: float = setting(
        0.5, "--loss tinybert: share of the run (steps or time) on the intermediate layers before the "
        "prediction-layer stage", minimum=0.0, maximum=1.0)
    temperature: float = setting(2.0, "softmax temperature of the soft targets (TinyBERT's paper: 1)", minimum=0.0,
                                 maximum=100.0)
    alpha_ce: float = setting(5.0, "weight of the soft-target loss (DistilBERT's 5)", minimum=0.0, maximum=1_000.0)
    alpha_mlm: float = setting(2.0, "weight of the masked-LM loss (DistilBERT's 2)", minimum=0.0, maximum=1_000.0)
    alpha_cos: float = setting(1.0, "weight of the cosine loss between last hidden states (DistilBERT's 1)",
                               minimum=0.0, maximum=1_000.0)
    vocab: str | None = setting(None, "tokenizer folder (default: the vocab the corpus was prepared with)",
                                metavar="DIR")
    batch_size: int = setting(32, "sequences per micro-batch and process", positive=True, maximum=MAX_BATCH)
    max_seq_length: int = setting(128, "tokens per sequence", positive=True, maximum=MAX_LENGTH)
    mask_rate: float = setting(0.15, "share of tokens masked", minimum=0.0, maximum=1.0)
    eval_batches: int = setting(20, "held-out batches evaluated at the end (0: none)", non_negative=True, maximum=1_000_000)
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


def load_student(spec: str, tokenizer) -> torch.nn.Module:
    """The initial student: a checkpoint folder, or a fresh BERT-family model with an MLM head of a named size
    (`mini`, `bert-small`, `roberta-tiny`...) or of a config.json, sized to the data's vocabulary."""
    from bertforge.config import ConfigError
    from bertforge.model.auto import family, preset_config, read_model_type
    path = Path(spec)
    if path.is_dir():
        return load_masked_lm(path)[0]
    if path.suffix == ".json" and path.is_file():
        config = family(read_model_type(path)).config_class.from_json_file(path)
        config.vocab_size, config.pad_token_id = len(tokenizer.vocab), tokenizer.pad_token_id
    else:
        try:
            config = preset_config(spec, vocab_size=len(tokenizer.vocab), pad_token_id=tokenizer.pad_token_id)
        except (ConfigError, KeyError, ValueError) as err:
            raise SettingError("{student} must be a student folder, a config.json or a named size such as mini; "
                               "{got!r} is none ({why})", owner=DistillConfig, got=spec, why=err) from None
    return family(config.model_type).model_class("masked_lm")(config)


def _check_pair(teacher, student, tokenizer, cfg: DistillConfig, teacher_has_head: bool) -> None:
    if teacher.config.vocab_size != student.config.vocab_size:
        raise SettingError("{teacher} and {student} have different vocabularies ({t} vs {s} tokens)",
                           owner=DistillConfig, t=teacher.config.vocab_size, s=student.config.vocab_size)
    if cfg.loss == "tinybert":
        from bertforge.pretraining.tinybert import check_tinybert_pair
        check_tinybert_pair(teacher, student, teacher_has_head, cfg, DistillConfig)
    elif cfg.alpha_ce > 0 and not teacher_has_head:
        raise SettingError("{path} has no MLM head, so it has no soft targets to teach; use a teacher with one, or "
                           "{alpha_ce} 0", owner=DistillConfig, path=cfg.teacher)
    if len(tokenizer.vocab) > student.config.vocab_size:
        raise ValueError(f"the data's vocab has {len(tokenizer.vocab)} tokens, the student only "
                         f"{student.config.vocab_size}")
    if cfg.loss == "tinybert":
        return
    if cfg.alpha_cos > 0 and teacher.config.hidden_size != student.config.hidden_size:
        raise SettingError("the cosine loss needs equal hidden sizes (teacher {teacher}, student {student}); use "
                           "{alpha_cos} 0", owner=DistillConfig, teacher=teacher.config.hidden_size,
                           student=student.config.hidden_size)
    if cfg.temperature <= 0:
        raise SettingError("{temperature} must be positive, got {got}", owner=DistillConfig, got=cfg.temperature)


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


class DistillStage(CorpusStage):
    """Pre-training distillation: the student learns the teacher's masked-token distribution on a corpus."""

    name = "distill"
    recorded_later = {"loss": "distilbert"}  # runs from before --loss

    def __init__(self, cfg: DistillConfig, teacher, student, tokenizer, train_data: PretrainingDataset,
                 heldout: PretrainingDataset | None, precision: Precision) -> None:
        self.cfg, self.teacher, self.model, self.tokenizer = cfg, teacher, student, tokenizer
        self.train_data, self.heldout, self.precision = train_data, heldout, precision
        self.device = next(student.parameters()).device

    def run_record(self) -> dict[str, Any]:
        from bertforge.pretraining.pretrain import data_fingerprint
        c = self.cfg
        return {"teacher": c.teacher, "student": c.student, "data": data_fingerprint(c.data), "loss": c.loss,
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
        from bertforge.pretraining.pretrain import evaluate
        if self.heldout is None:
            return {}
        return evaluate(self.model, self.heldout, self.cfg.eval_batches, self.device, "mlm", self.precision.autocast)

    def postfix(self, values: dict[str, float]) -> dict[str, str]:
        return {"ce": f"{values.get('loss_ce', 0.0):.3f}", "mlm_acc": f"{values.get('mlm_acc', 0.0):.3f}"}


def run_distillation(cfg: DistillConfig, hooks: FaultHooks | None = None) -> DistillResult:
    """Resume if OUTPUT holds checkpoints, train to max_steps / time budget, save, evaluate student and teacher."""
    from bertforge.pretraining.pretrain import evaluate, resolve_vocab

    opts = cfg.train
    opts.check()
    student_path = cfg.student if Path(cfg.student).exists() else None  # None: a named size
    inputs = (cfg.teacher, student_path, cfg.data, resolve_vocab(cfg.data, cfg.vocab))  # resolved before the claim
    teacher_eval: dict[str, float] = {}

    def build(session: Session, out: Path) -> Built:
        device = session.device
        tokenizer = load_tokenizer(resolve_vocab(cfg.data, cfg.vocab))
        torch.manual_seed(opts.seed)
        teacher, teacher_has_head = load_masked_lm(cfg.teacher)
        student = load_student(cfg.student, tokenizer)
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
        precision = session.precision(opts.precision)
        if cfg.loss == "tinybert":
            from bertforge.pretraining.tinybert import TinyBertStage
            stage: CorpusStage = TinyBertStage(cfg, teacher, student, tokenizer, train_data, heldout, precision)
        else:
            stage = DistillStage(cfg, teacher, student, tokenizer, train_data, heldout, precision)

        def finish(result: FitResult) -> None:
            if heldout is not None:
                teacher_eval.update(evaluate(teacher, heldout, cfg.eval_batches, device, "mlm", precision.autocast))
            if session.is_main:
                DistillReport(step=result.step, stopped_by=result.stopped_by, skipped_steps=result.skipped_steps,
                              elapsed_seconds=round(result.elapsed, 3), final_eval=result.final_eval,
                              teacher_eval=teacher_eval,
                              parameters={"teacher": teacher.num_parameters(), "student": student.num_parameters()},
                              ).to_json(out / SUMMARY_FILE)
        return Built(stage, notes=notes, finish=finish)

    result = train(cfg, build, verb="distill-pretrain", inputs=inputs, hooks=hooks)
    return DistillResult(Path(cfg.output), result.step, result.stopped_by, result.final_eval, teacher_eval,
                         result.notes)

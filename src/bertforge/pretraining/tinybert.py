"""TinyBERT's pre-training distillation (Jiao et al., 2020): `bertforge distill pretrain --loss tinybert`.

The student learns the teacher layer by layer, in the paper's two stages, switched by the engine's progress
(`Stage.set_progress`, steps or time budget alike):

* intermediate layers, for the first `--tinybert-intermediate-fraction` of the run: with the uniform mapping
  g(m) = m * N // M (student layer m of M reads teacher layer g(m) of N; 0, the embeddings, reads 0), the sum of
  the embedding MSE, the hidden-state MSEs and the attention-score MSEs. Student states go through one learned
  linear projection W_h (student hidden -> teacher hidden), shared by embeddings and layers as in the authors'
  code; it is trained with the student, kept in the engine's resumable state (so a resume is exact), and never
  written to the student's folder. Attention scores are the unnormalised q k^T / sqrt(d) before mask and softmax,
  compared on real (query, key) pairs only and averaged over heads; both models run the padded attention path
  for that (`SelfAttention.keep_scores`), so the heads must match in number.
* prediction layer, for the rest: soft cross-entropy between the teacher's and the student's MLM distributions at
  temperature T on the masked positions (the paper's form, without Hinton's T^2).

The teacher runs in eval mode without gradients inside the stage's loss, so its forward passes count in the
time budget like the student's.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from bertforge.pretraining.pretrain import CorpusStage
from bertforge.settings import SettingError

PARTS = ("loss_emb", "loss_hidden", "loss_attn", "loss_pred")


@dataclass
class StepOutput:
    """One distillation step's loss, its named parts, and the logits/targets the accuracy metrics read."""
    loss: torch.Tensor
    parts: dict[str, torch.Tensor]
    logits: torch.Tensor | None = None
    targets: torch.Tensor | None = None


def layer_map(student_layers: int, teacher_layers: int) -> list[int]:
    """TinyBERT's uniform mapping: the teacher layer (1-based, as in `hidden_states`) of student layers 1..M."""
    return [m * teacher_layers // student_layers for m in range(1, student_layers + 1)]


def attention_score_loss(student: Sequence[torch.Tensor], teacher: Sequence[torch.Tensor],
                         attention_mask: torch.Tensor) -> torch.Tensor:
    """Sum over mapped layers of the MSE between [batch, heads, seq, seq] scores on pairs of real tokens,
    averaged over heads (and pairs)."""
    real = attention_mask.bool()
    pairs = (real[:, None, :, None] & real[:, None, None, :]).float()  # [batch, 1, seq, seq]
    count = pairs.sum() * student[0].shape[1]
    total = student[0].new_zeros(()).float()
    for s, t in zip(student, teacher):
        total = total + ((s.float() - t.float()) ** 2 * pairs).sum() / count
    return total


def hidden_state_losses(student: Sequence[torch.Tensor], teacher: Sequence[torch.Tensor],
                        attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(embedding MSE, summed hidden-state MSE) on real tokens; `student` is already projected to the teacher's
    width, and `teacher` holds the mapped states in the same order (embeddings first)."""
    real = attention_mask.bool()
    mse = [F.mse_loss(s[real].float(), t[real].float()) for s, t in zip(student, teacher)]
    return mse[0], sum(mse[1:], mse[0] * 0.0)


def soft_cross_entropy(student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """-sum softmax(t / T) log softmax(s / T), averaged over rows (0 rows: 0)."""
    if not student_logits.shape[0]:
        return student_logits.sum() * 0.0
    T = float(temperature)
    target = F.softmax(teacher_logits.float() / T, -1)
    return -(target * F.log_softmax(student_logits.float() / T, -1)).sum(-1).mean()


def _attention_modules(model) -> list[nn.Module]:
    return [layer.attention for layer in model.bert.encoder.layers]


def intermediate_outputs(model, input_ids: torch.Tensor, attention_mask: torch.Tensor
                         ) -> tuple[tuple[torch.Tensor, ...], list[torch.Tensor]]:
    """(hidden states: embeddings then every layer, [batch, seq, H]; each layer's [batch, heads, seq, seq] scores)."""
    modules = _attention_modules(model)
    for m in modules:
        m.keep_scores = True
    try:
        out = model.bert(input_ids, attention_mask=attention_mask, output_hidden_states=True, unpad=False)
        scores = [m.scores for m in modules]
    finally:
        for m in modules:
            m.keep_scores, m.scores = False, None
    return out.hidden_states, scores


class TinyBertStudent(nn.Module):
    """The trained parameters: the student and W_h. One forward does all the work that needs gradients, so DDP
    sees every parameter used (or, stage by stage, unused: `find_unused_parameters`)."""

    def __init__(self, student, teacher_hidden: int) -> None:
        super().__init__()
        self.student = student
        self.projection = nn.Linear(student.config.hidden_size, teacher_hidden)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, positions: torch.Tensor | None = None,
                intermediate: bool = True) -> Any:
        if not intermediate:
            return self.student(input_ids, attention_mask=attention_mask, prediction_positions=positions).logits
        hidden, scores = intermediate_outputs(self.student, input_ids, attention_mask)
        return [self.projection(h) for h in hidden], scores


def check_tinybert_pair(teacher, student, teacher_has_head: bool, cfg, owner: type) -> None:
    """Refuse pairs TinyBERT's losses cannot compare, naming the flag."""
    t, s = teacher.config, student.config
    if cfg.tinybert_intermediate_fraction < 1.0 and not teacher_has_head:
        raise SettingError("{teacher} has no MLM head, so the prediction-layer stage has no soft targets; use a "
                           "teacher with one, or {tinybert_intermediate_fraction} 1", owner=owner)
    for model, flag in ((teacher, "teacher"), (student, "student")):
        if not hasattr(model, "bert") or not hasattr(model.bert.encoder, "layers") or \
                len(model.bert.encoder.layers) != model.config.num_hidden_layers or \
                getattr(model.config, "sliding_windows", None) is not None or \
                getattr(model.config, "block_sparse", None) is not None:
            raise SettingError("{%s} must be a BERT-family model with one module per layer and full attention "
                               "for {loss} tinybert" % flag, owner=owner)
    if s.num_hidden_layers > t.num_hidden_layers:
        raise SettingError("{student} has {s} layers, more than the teacher's {t}; TinyBERT maps each student "
                           "layer to a deeper teacher one", owner=owner, s=s.num_hidden_layers, t=t.num_hidden_layers)
    if s.num_attention_heads != t.num_attention_heads:
        raise SettingError("{student} has {s} attention heads, the teacher {t}; TinyBERT's attention loss compares "
                           "head by head", owner=owner, s=s.num_attention_heads, t=t.num_attention_heads)
    if cfg.temperature <= 0:
        raise SettingError("{temperature} must be positive, got {got}", owner=owner, got=cfg.temperature)


class TinyBertStage(CorpusStage):
    """Pre-training distillation with TinyBERT's layer-wise losses, then its prediction-layer loss."""

    name = "tinybert"
    find_unused_parameters = True  # the MLM head in the first stage, W_h in the second

    def __init__(self, cfg, teacher, student, tokenizer, train_data, heldout, precision) -> None:
        """`cfg` is a `DistillConfig` (its temperature and tinybert_intermediate_fraction are read here)."""
        self.cfg, self.teacher, self.tokenizer = cfg, teacher, tokenizer
        self.train_data, self.heldout, self.precision = train_data, heldout, precision
        self.device = next(student.parameters()).device
        self.model = TinyBertStudent(student, teacher.config.hidden_size).to(self.device)
        self.mapping = layer_map(student.config.num_hidden_layers, teacher.config.num_hidden_layers)
        self.intermediate = cfg.tinybert_intermediate_fraction > 0

    def run_record(self) -> dict[str, Any]:
        from bertforge.pretraining.pretrain import data_fingerprint
        c = self.cfg
        return {"teacher": c.teacher, "student": c.student, "data": data_fingerprint(c.data), "loss": c.loss,
                "batch_size": c.batch_size, "max_seq_length": c.max_seq_length, "mask_rate": c.mask_rate,
                "temperature": c.temperature, "tinybert_intermediate_fraction": c.tinybert_intermediate_fraction}

    def set_progress(self, fraction: float) -> None:
        self.intermediate = fraction < self.cfg.tinybert_intermediate_fraction

    def loss(self, net, batch: dict[str, torch.Tensor]) -> StepOutput:
        ids, mask = batch["input_ids"].to(self.device), batch["attention_mask"].to(self.device)
        if self.intermediate:
            with torch.no_grad():
                t_hidden, t_scores = intermediate_outputs(self.teacher, ids, mask)
            s_hidden, s_scores = net(ids, mask, intermediate=True)
            emb, hid = hidden_state_losses(s_hidden, [t_hidden[0]] + [t_hidden[g] for g in self.mapping], mask)
            attn = attention_score_loss(s_scores, [t_scores[g - 1] for g in self.mapping], mask)
            parts = {"loss_emb": emb, "loss_hidden": hid, "loss_attn": attn}
            return StepOutput(emb + hid + attn, parts)
        labels = batch["labels"].to(self.device)
        positions = labels != -100
        with torch.no_grad():
            t_logits = self.teacher(ids, attention_mask=mask, prediction_positions=positions).logits
        logits = net(ids, mask, positions, intermediate=False)
        pred = soft_cross_entropy(logits, t_logits, self.cfg.temperature)
        return StepOutput(pred, {"loss_pred": pred}, logits, labels[positions])

    def add_metrics(self, sums: dict[str, float], out: StepOutput, batch: dict[str, torch.Tensor]) -> None:
        for k, v in out.parts.items():
            sums[k] = sums.get(k, 0.0) + float(v.detach())
            sums[k + ":n"] = sums.get(k + ":n", 0.0) + 1
        if out.logits is not None:
            sums["correct"] = sums.get("correct", 0.0) + float((out.logits.detach().argmax(-1) == out.targets).sum())
            sums["n"] = sums.get("n", 0.0) + float(out.targets.numel())

    def summarize(self, sums: dict[str, float]) -> dict[str, float]:
        values = {k: sums[k] / sums[k + ":n"] for k in PARTS if sums.get(k + ":n")}
        if sums.get("n"):
            values["mlm_acc"] = sums["correct"] / sums["n"]
        return values

    def postfix(self, values: dict[str, float]) -> dict[str, str]:
        shown = {k[5:]: f"{values[k]:.3f}" for k in PARTS if k in values}
        return shown or {"stage": "intermediate" if self.intermediate else "prediction"}

    def evaluate(self) -> dict[str, float]:
        from bertforge.pretraining.pretrain import evaluate
        if self.heldout is None:
            return {}
        return evaluate(self.model.student, self.heldout, self.cfg.eval_batches, self.device, "mlm",
                        self.precision.autocast)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "projection": {k: v.detach().clone()
                                                       for k, v in self.model.projection.state_dict().items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        state = dict(state)
        projection = state.pop("projection", None)
        if projection is None:
            raise ValueError("the checkpoint's stage state has no TinyBERT projection; it is not a TinyBERT run")
        self.model.projection.load_state_dict(projection)
        super().load_state_dict(state)

    def save(self, folder: Path) -> None:
        self.model.student.save_pretrained(folder)
        if self.tokenizer is not None:
            self.tokenizer.save_pretrained(folder)

    def load_weights(self, folder: Path) -> None:
        from bertforge.checkpoint import load_hf_state_dict, read_state_dict
        load_hf_state_dict(self.model.student, read_state_dict(folder)[0], source=folder)

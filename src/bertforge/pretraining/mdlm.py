"""The steps of the objectives that read the corpus's unmasked left-to-right rows and corrupt them per batch:
`mdlm` (masked diffusion, data/diffusion.py), `causal-then-masked` and `hybrid` (causal or MLM batches).

Every draw is keyed on (seed, rank, epoch, position, sequence length) of the corpus batch, as PLM's orders
are, so a resumed run rebuilds exactly the batches it would have trained on, and held-out evaluation (whose
dataset restarts each time) asks the same questions every time. Held-out batches of the mixed objectives are
always masked ones at `--mask-rate`: the objective the run ends on, and the score its checkpoints are kept by.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from bertforge.data.diffusion import diffusion_mask, low_discrepancy_times
from bertforge.data.hashing import combine, hash_uniform
from bertforge.data.masking import mask_tokens
from bertforge.data.objectives import Objective

__all__ = ["CorruptingStep", "DiffusionOutput", "batch_key"]

_MDLM, _MIX, _MIX_MASK = 0xD1F0, 0xD1F1, 0xD1F2
_INPUTS = ("input_ids", "token_type_ids", "attention_mask", "labels")


@dataclass
class DiffusionOutput:
    """The MDLM step's output: `loss` is the NELBO per token (trained), `mlm_loss` the plain cross-entropy of
    the masked tokens and `prediction_logits` their logits [N, V] (what the MLM metrics read)."""
    loss: torch.Tensor
    prediction_logits: torch.Tensor
    mlm_loss: torch.Tensor
    nelbo: torch.Tensor
    nelbo_tokens: int


def batch_key(dataset: Any, tag: int, rank: bool = True) -> int:
    """The key of the batch `dataset` (a `PretrainingDataset`) has just served; without `rank`, every rank's
    batch of one step shares it (the ranks move through their epochs in lockstep)."""
    return int(combine(dataset.seed, tag, dataset.rank if rank else 0, dataset.epoch, dataset.index,
                       dataset.max_seq_length))


def _candidates(batch: dict[str, torch.Tensor], dataset: Any) -> tuple[np.ndarray, np.ndarray]:
    ids = batch["input_ids"].numpy()
    return ids, batch["attention_mask"].numpy().astype(bool) & ~dataset.tables.is_special[ids]


def mdlm_batch(batch: dict[str, torch.Tensor], dataset: Any) -> dict[str, torch.Tensor]:
    """A corpus row batch -> an MDLM batch: t per row, the masked inputs and labels, the 1/t weight of each
    label and the count of tokens that could be masked (the NELBO's per-token denominator)."""
    ids, candidate = _candidates(batch, dataset)
    key = batch_key(dataset, _MDLM)
    t = low_discrepancy_times(key, ids.shape[0])
    inputs, labels = diffusion_mask(ids, candidate, t, key, dataset.tables.mask_id)
    weight = np.where(labels != -100, 1.0 / t[:, None], 0.0).astype(np.float32)
    return {**batch, "input_ids": torch.from_numpy(inputs), "labels": torch.from_numpy(labels),
            "diffusion_weight": torch.from_numpy(weight), "diffusion_t": torch.from_numpy(t),
            "diffusion_tokens": torch.tensor(int(candidate.sum()))}


def mdlm_loss(logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(NELBO per token, plain CE) from the logits of the masked tokens [N, V], in row-major order."""
    labels = batch["labels"].to(logits.device)
    picked = labels != -100
    ce = F.cross_entropy(logits.float(), labels[picked], reduction="none")
    weight = batch["diffusion_weight"].to(logits.device)[picked]
    return (ce * weight).sum() / int(batch["diffusion_tokens"]), ce.mean()


class CorruptingStep:
    """Batches and forward pass of `mdlm`, `causal-then-masked` and `hybrid`. `progress` and `rate` are set
    by the stage before each step (the run's fraction done and the scheduled mask rate)."""

    def __init__(self, objective: Objective, causal_fraction: float, rate: float) -> None:
        self.objective, self.causal_fraction, self.rate, self.progress = objective, causal_fraction, rate, 0.0

    def causal(self, dataset: Any) -> bool:
        """Is this step's batch a left-to-right one? "phase": the first `causal_fraction` of the run; "batch":
        a draw per step, the same on every rank."""
        if self.objective.mix == "phase":
            return self.progress < self.causal_fraction
        return bool(hash_uniform(np.uint64(batch_key(dataset, _MIX, rank=False)), 0) < self.causal_fraction)

    def __call__(self, batch: dict[str, torch.Tensor], dataset: Any, heldout: bool = False) -> dict[str, torch.Tensor]:
        if self.objective.diffusion:
            return mdlm_batch(batch, dataset)
        if not heldout and self.causal(dataset):
            return {**batch, "causal": torch.tensor(1)}
        ids = batch["input_ids"].numpy()
        lengths = batch["attention_mask"].numpy().sum(1)
        masking = replace(dataset.masking, rate=self.rate)
        keys = combine(batch_key(dataset, _MIX_MASK), np.arange(ids.shape[0]))
        inputs, labels = mask_tokens(ids, lengths, keys, masking, masking.predictions_for(dataset.max_seq_length),
                                     dataset.tables)
        return {**batch, "input_ids": torch.from_numpy(inputs), "labels": torch.from_numpy(labels)}

    def forward(self, net: torch.nn.Module, batch: dict[str, torch.Tensor], device: torch.device) -> Any:
        inputs: dict[str, Any] = {name: batch[name].to(device, non_blocking=True) for name in _INPUTS}
        if "causal" in batch:
            inputs["causal"] = True  # an ltr batch: labels[i] is already token i + 1
        out = net(**inputs)
        if not self.objective.diffusion:
            return out
        logits = getattr(out, "prediction_logits", None)
        logits = out.logits if logits is None else logits
        nelbo, ce = mdlm_loss(logits, batch)
        return DiffusionOutput(loss=nelbo, prediction_logits=logits, mlm_loss=ce, nelbo=nelbo.detach(),
                               nelbo_tokens=int(batch["diffusion_tokens"]))

"""The permutation language-modelling step (XLNet): corpus batches -> PLM batches -> two-stream loss.

A batch's orders and spans are drawn from (seed, epoch, position, rank) of the corpus batch it is built
from, so a resumed run rebuilds exactly the batches it would have trained on, and held-out evaluation, which
starts its dataset from the beginning each time, asks the same questions every time.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from bertforge.data.hashing import combine
from bertforge.data.permutation import PermutationConfig, permutation_batch
from bertforge.model.outputs import MaskedLMOutput

__all__ = ["PLM_INPUTS", "plm_batch", "plm_forward"]

_PLM = 0x9E4A
# what the model reads: `target_positions` (the fast query stream) rather than the one-hot `target_mapping`
PLM_INPUTS = ("input_ids", "token_type_ids", "attention_mask", "perm_mask", "target_positions", "labels")


def plm_batch(batch: dict[str, torch.Tensor], dataset: Any, cfg: PermutationConfig) -> dict[str, torch.Tensor]:
    """The PLM batch of a corpus `batch` that `dataset` (a `PretrainingDataset`) has just served."""
    key = int(combine(dataset.seed, _PLM, dataset.rank, dataset.epoch, dataset.index, dataset.max_seq_length))
    tok = dataset.tokenizer
    return permutation_batch(batch, cfg, np.random.default_rng(key), cls_id=tok.cls_token_id,
                             sep_id=tok.sep_token_id, pad_id=tok.pad_token_id)


def plm_forward(net: torch.nn.Module, batch: dict[str, torch.Tensor], device: torch.device) -> MaskedLMOutput:
    """The loss of an `XLNetLMHeadModel` (or a DDP wrapper of one) on a PLM batch, and the logits of the real
    predictions only ([N, V], the rows whose label is not -100), as the MLM metrics read them. A batch with
    `memory_ids` (the previous segment) has them encoded first, without gradient, into the memory the
    predicted segment attends to."""
    inputs: dict[str, Any] = {name: batch[name].to(device, non_blocking=True) for name in PLM_INPUTS}
    if "memory_ids" in batch and batch["memory_ids"].shape[1]:
        encoder = getattr(net, "module", net).bert  # the memory is no loss's: past DDP, no gradient to reduce
        with torch.no_grad():
            inputs["mems"] = encoder(batch["memory_ids"].to(device), use_mems=True).mems
    out = net(**inputs)
    return MaskedLMOutput(loss=out.loss, logits=out.logits[inputs["labels"] != -100])

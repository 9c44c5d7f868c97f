"""Typed model outputs: dataclasses you can read by name (`out.last_hidden_state`) or, like HF, by index."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Optional

import torch


class ModelOutput:
    """Mixin: index by position (over the fields that are set, as HF does) or by name."""

    def to_tuple(self) -> tuple[Any, ...]:
        return tuple(getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None)

    def __getitem__(self, key: int | str) -> Any:
        if isinstance(key, str):
            return getattr(self, key)
        return self.to_tuple()[key]


@dataclass
class BertModelOutput(ModelOutput):
    last_hidden_state: torch.Tensor
    pooler_output: Optional[torch.Tensor] = None
    # embeddings + every layer, each [batch, seq, hidden], when `output_hidden_states=True`
    hidden_states: Optional[tuple[torch.Tensor, ...]] = None


@dataclass
class MaskedLMOutput(ModelOutput):
    loss: Optional[torch.Tensor] = None
    # [batch, seq, vocab] when no positions were chosen; [n_predicted, vocab] (rows in the order of
    # `prediction_positions.nonzero()`) when labels or positions restrict the decoder to the masked tokens.
    logits: Optional[torch.Tensor] = None
    hidden_states: Optional[tuple[torch.Tensor, ...]] = None


@dataclass
class BertForPreTrainingOutput(ModelOutput):
    loss: Optional[torch.Tensor] = None
    prediction_logits: Optional[torch.Tensor] = None  # same layout rule as MaskedLMOutput.logits
    seq_relationship_logits: Optional[torch.Tensor] = None
    mlm_loss: Optional[torch.Tensor] = None
    nsp_loss: Optional[torch.Tensor] = None
    hidden_states: Optional[tuple[torch.Tensor, ...]] = None


@dataclass
class TaskOutput(ModelOutput):
    loss: Optional[torch.Tensor] = None
    # [batch, labels] (sequence), [batch, seq, labels] (token; zeros at padding), [batch, choices] (multiple choice)
    logits: Optional[torch.Tensor] = None
    hidden_states: Optional[tuple[torch.Tensor, ...]] = None


@dataclass
class QuestionAnsweringOutput(ModelOutput):
    loss: Optional[torch.Tensor] = None
    # [batch, seq]; padded positions hold a large negative number so a softmax never picks them
    start_logits: Optional[torch.Tensor] = None
    end_logits: Optional[torch.Tensor] = None
    hidden_states: Optional[tuple[torch.Tensor, ...]] = None

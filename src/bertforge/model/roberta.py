"""RoBERTa (Liu et al., 2019) as a configuration of the BERT classes.

The network is BERT's; what differs is data, not architecture: one segment type, positions numbered from
``pad_token_id + 1`` (so padding has a position of its own), a 514-row position table, LayerNorm eps 1e-5,
and Hugging Face's checkpoint names (``roberta.*``, ``lm_head.*``). The one head with another shape is
sequence classification, which reads the ``<s>`` token through ``classifier.dense`` + tanh +
``classifier.out_proj`` instead of BERT's pooler.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar, Optional

import torch
from torch import nn

from bertforge.checkpoint import BERT_NAMES
from bertforge.config import BertConfig
from bertforge.model.auto import Family
from bertforge.model.bert import BertForMaskedLM, BertModel
from bertforge.model.feed_forward import activation
from bertforge.model.task_heads import (BertForMultipleChoice, BertForQuestionAnswering,
                                        BertForSequenceClassification, BertForTokenClassification)


@dataclass
class RobertaConfig(BertConfig):
    """`BertConfig` with the defaults of HF's `RobertaConfig` (roberta-base's shape and special ids)."""

    vocab_size: int = 50265
    max_position_embeddings: int = 514
    type_vocab_size: int = 1
    layer_norm_eps: float = 1e-5
    pad_token_id: int = 1
    bos_token_id: int = 0
    eos_token_id: int = 2

    model_type: ClassVar[str] = "roberta"

    @property
    def max_sequence_length(self) -> int:
        """Longest input: position ids start after the padding index (512 for the 514-row table)."""
        return self.max_position_embeddings - self.pad_token_id - 1


# The encoder's names are BERT's under `roberta.`; the MLM head is `lm_head.*`.
ROBERTA_NAMES = dataclasses.replace(
    BERT_NAMES,
    head_prefixes=("lm_head.", "classifier.", "qa_outputs.", "pooler."),
    tied=("lm_head.decoder.weight", "lm_head.decoder.bias"),
)


class RobertaModel(BertModel):
    """BERT's encoder with RoBERTa's position numbering."""

    config_class = RobertaConfig
    name_map = ROBERTA_NAMES
    hf_base_prefix = "roberta"

    def default_position_ids(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor]) -> torch.Tensor:
        """HF's rule: non-pad tokens count up from ``pad + 1``, pad tokens sit at ``pad``. Like HF, it reads
        `input_ids`, not the attention mask, so ids and outputs match HF's for any input."""
        pad = self.config.pad_token_id
        limit = self.config.max_position_embeddings - pad - 1
        if input_ids.shape[1] > limit:
            raise ValueError(f"sequence length {input_ids.shape[1]} exceeds the {limit} positions RoBERTa has "
                             f"(max_position_embeddings {self.config.max_position_embeddings} - padding_idx "
                             f"{pad} - 1); truncate the input")
        real = (input_ids != pad).long()
        return torch.cumsum(real, dim=1) * real + pad


class _RobertaHeads:
    """What every RoBERTa head class adds to its BERT class: the config, names, and RoBERTa's encoder."""

    config_class = RobertaConfig
    name_map = ROBERTA_NAMES
    hf_base_prefix = "roberta"
    base_model_class = RobertaModel


class RobertaForMaskedLM(_RobertaHeads, BertForMaskedLM):
    """Encoder + `lm_head` (dense, gelu, layer_norm, decoder tied to the word embeddings)."""

    head_names = {"mlm.transform": "lm_head.dense", "mlm.norm": "lm_head.layer_norm", "mlm.bias": "lm_head.bias"}

    def __init__(self, config: RobertaConfig) -> None:
        super().__init__(config)
        self.mlm.act = activation("gelu")  # HF's RoBERTa head uses gelu whatever `hidden_act` says


class RobertaClassificationHead(nn.Module):
    """HF's RoBERTa head: dropout -> dense -> tanh -> dropout -> out_proj, on the `<s>` token (a family with
    another activation, ELECTRA, sets `activation`)."""

    activation = staticmethod(torch.tanh)

    def __init__(self, config: RobertaConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        p = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
        self.dropout = nn.Dropout(p)
        self.out_proj = nn.Linear(config.hidden_size, config.num_labels)

    def forward(self, first_token: torch.Tensor) -> torch.Tensor:
        return self.out_proj(self.dropout(self.activation(self.dense(first_token))))


class RobertaForSequenceClassification(_RobertaHeads, BertForSequenceClassification):
    """BERT's class with no pooler: its "pooled" vector is the raw `<s>` state, which the classifier
    (after BERT's dropout) turns into logits exactly as HF's `RobertaClassificationHead` does."""

    def __init__(self, config: RobertaConfig) -> None:
        super().__init__(config)
        self.bert.pooler = nn.Identity()
        self.classifier = RobertaClassificationHead(config)
        self.init_weights()


class RobertaForTokenClassification(_RobertaHeads, BertForTokenClassification):
    pass


class RobertaForQuestionAnswering(_RobertaHeads, BertForQuestionAnswering):
    pass


class RobertaForMultipleChoice(_RobertaHeads, BertForMultipleChoice):
    pass


# the bare encoder keeps its pooler (HF's RobertaModel has one); role "pretraining" is MLM only, no NSP
FAMILY = Family(config_class=RobertaConfig, classes={
    "base": RobertaModel, "masked_lm": RobertaForMaskedLM, "pretraining": RobertaForMaskedLM,
    "sequence_classification": RobertaForSequenceClassification,
    "token_classification": RobertaForTokenClassification,
    "question_answering": RobertaForQuestionAnswering, "multiple_choice": RobertaForMultipleChoice})

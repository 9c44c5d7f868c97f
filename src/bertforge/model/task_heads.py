"""Fine-tuning heads: sequence classification/regression, token classification, span QA, multiple choice.

Parameter names match `transformers` (`bert.*`, `classifier.*`, `qa_outputs.*`), so fine-tuned
checkpoints move both ways. Each head reads only the packed rows it needs ([CLS] rows, or real tokens)
from `BertModel.encode`, so padding never reaches a head's matmul.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from bertforge.config import BertConfig
from bertforge.model.bert import BertModel, BertPreTrainedModel
from bertforge.model.outputs import QuestionAnsweringOutput, TaskOutput
from bertforge.model.packing import PackedBatch


def _dropout(config: BertConfig) -> nn.Dropout:
    p = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
    return nn.Dropout(p)


def _hidden(batch, collect) -> Optional[tuple[torch.Tensor, ...]]:
    return tuple(batch.unpack(h) for h in collect) if collect is not None else None


def sequence_loss(logits: torch.Tensor, labels: torch.Tensor, config: BertConfig) -> torch.Tensor:
    """HF's rule: one output -> regression (MSE); integer labels -> CE; float multi-hot -> BCE."""
    problem = config.problem_type
    if problem is None:
        if config.num_labels == 1:
            problem = "regression"
        elif labels.dtype in (torch.long, torch.int):
            problem = "single_label_classification"
        else:
            problem = "multi_label_classification"
    if problem == "regression":
        return F.mse_loss(logits.float().squeeze(-1), labels.float().reshape(-1)) if config.num_labels == 1 \
            else F.mse_loss(logits.float(), labels.float())
    if problem == "single_label_classification":
        return F.cross_entropy(logits.float().reshape(-1, config.num_labels), labels.reshape(-1))
    return F.binary_cross_entropy_with_logits(logits.float(), labels.float())


class BertForSequenceClassification(BertPreTrainedModel):
    """Pooled [CLS] -> dropout -> `classifier`. `num_labels == 1` is regression (STS-B) with MSE loss."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config)
        self.num_labels = config.num_labels
        self.bert = self.build_encoder(add_pooling_layer=True)
        self.dropout = _dropout(config)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.init_weights()

    def _flop_heads(self) -> set[str]:
        return {"pooler"}

    last_layer_reads = "first"

    def pool(self, first: torch.Tensor) -> torch.Tensor:
        """The sequence's vector from its first token's state: BERT's pooler (a family may pool differently)."""
        return self.bert.pooler(first)

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                token_type_ids: Optional[torch.Tensor] = None, position_ids: Optional[torch.Tensor] = None,
                labels: Optional[torch.Tensor] = None, output_hidden_states: bool = False) -> TaskOutput:
        x, batch, collect = self.bert.encode(input_ids, attention_mask, token_type_ids, position_ids,
                                             output_hidden_states=output_hidden_states,
                                             rows=PackedBatch.first_token_rows)
        logits = self.classifier(self.dropout(self.pool(x)))
        loss = sequence_loss(logits, labels, self.config) if labels is not None else None
        return TaskOutput(loss=loss, logits=logits, hidden_states=_hidden(batch, collect))


class BertForTokenClassification(BertPreTrainedModel):
    """`classifier` on every real token (NER). Labels of -100 (later sub-tokens, [CLS], [SEP]) are ignored."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config)
        self.num_labels = config.num_labels
        self.bert = self.build_encoder(add_pooling_layer=False)
        self.dropout = _dropout(config)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.init_weights()

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                token_type_ids: Optional[torch.Tensor] = None, position_ids: Optional[torch.Tensor] = None,
                labels: Optional[torch.Tensor] = None, output_hidden_states: bool = False) -> TaskOutput:
        x, batch, collect = self.bert.encode(input_ids, attention_mask, token_type_ids, position_ids,
                                             output_hidden_states=output_hidden_states)
        packed_logits = self.classifier(self.dropout(x))  # real tokens only
        logits = batch.unpack(packed_logits)
        loss = None
        if labels is not None:
            packed_labels = batch.pack(labels)
            loss = F.cross_entropy(packed_logits.float(), packed_labels, ignore_index=-100)
        return TaskOutput(loss=loss, logits=logits, hidden_states=_hidden(batch, collect))


class BertForQuestionAnswering(BertPreTrainedModel):
    """`qa_outputs` gives a start and an end logit per token; loss = mean of the two cross-entropies.

    Start/end positions outside the sequence (e.g. an answer cut off by a window) are ignored, as in HF.
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config)
        self.bert = self.build_encoder(add_pooling_layer=False)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        self.init_weights()

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                token_type_ids: Optional[torch.Tensor] = None, position_ids: Optional[torch.Tensor] = None,
                start_positions: Optional[torch.Tensor] = None, end_positions: Optional[torch.Tensor] = None,
                output_hidden_states: bool = False) -> QuestionAnsweringOutput:
        x, batch, collect = self.bert.encode(input_ids, attention_mask, token_type_ids, position_ids,
                                             output_hidden_states=output_hidden_states)
        logits = batch.unpack(self.qa_outputs(x).float())  # [B, L, 2]
        if attention_mask is not None:
            logits = logits.masked_fill(~attention_mask.bool()[..., None], torch.finfo(logits.dtype).min / 2)
        start_logits, end_logits = logits[..., 0], logits[..., 1]
        loss = span_loss(start_logits, end_logits, start_positions, end_positions)
        return QuestionAnsweringOutput(loss=loss, start_logits=start_logits, end_logits=end_logits,
                                       hidden_states=_hidden(batch, collect))


def span_loss(start_logits: torch.Tensor, end_logits: torch.Tensor, start_positions: Optional[torch.Tensor],
              end_positions: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """The mean of the start and end cross-entropies (None without both positions); positions outside the
    sequence are ignored, as in HF."""
    if start_positions is None or end_positions is None:
        return None
    L = start_logits.shape[1]
    start = start_positions.reshape(-1).clamp(0, L)
    end = end_positions.reshape(-1).clamp(0, L)
    return (F.cross_entropy(start_logits, start, ignore_index=L) + F.cross_entropy(end_logits, end, ignore_index=L)) / 2


class BertForMultipleChoice(BertPreTrainedModel):
    """Inputs [batch, choices, seq]: each (context, choice) pair gets a pooled-[CLS] score; softmax over choices."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config)
        self.bert = self.build_encoder(add_pooling_layer=True)
        self.dropout = _dropout(config)
        self.classifier = nn.Linear(config.hidden_size, 1)
        self.init_weights()

    def _flop_heads(self) -> set[str]:
        return {"pooler"}

    last_layer_reads = "first"

    def pool(self, first: torch.Tensor) -> torch.Tensor:
        """The sequence's vector from its first token's state: BERT's pooler (a family may pool differently)."""
        return self.bert.pooler(first)

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                token_type_ids: Optional[torch.Tensor] = None, position_ids: Optional[torch.Tensor] = None,
                labels: Optional[torch.Tensor] = None, output_hidden_states: bool = False) -> TaskOutput:
        (B, C), (ids, mask, types, positions) = choice_rows(input_ids, attention_mask, token_type_ids, position_ids)
        x, batch, collect = self.bert.encode(ids, mask, types, positions, output_hidden_states=output_hidden_states,
                                             rows=PackedBatch.first_token_rows)
        logits = self.classifier(self.dropout(self.pool(x))).reshape(B, C)
        return TaskOutput(loss=choice_loss(logits, labels), logits=logits, hidden_states=_hidden(batch, collect))


def choice_rows(input_ids: torch.Tensor, *others: Optional[torch.Tensor]
                ) -> tuple[tuple[int, int], list[Optional[torch.Tensor]]]:
    """Multiple choice's inputs [batch, choices, seq] as rows [batch * choices, seq] (None stays None), with
    (batch, choices) to fold the scores back: every family scores each (context, choice) row alike."""
    if input_ids.dim() != 3:
        raise ValueError(f"input_ids must be [batch, choices, seq], got shape {tuple(input_ids.shape)}")
    B, C, L = input_ids.shape
    return (B, C), [t.reshape(B * C, L) if t is not None else None for t in (input_ids, *others)]


def choice_loss(logits: torch.Tensor, labels: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """Cross-entropy over each row's choices [batch, choices], in fp32 (None without labels)."""
    return F.cross_entropy(logits.float(), labels.reshape(-1)) if labels is not None else None


def _bert_family():
    from bertforge.model.auto import Family
    from bertforge.model.bert import BertForMaskedLM, BertForPreTraining
    return Family(config_class=BertConfig, classes={
        "base": BertModel, "masked_lm": BertForMaskedLM, "pretraining": BertForPreTraining,
        "sequence_classification": BertForSequenceClassification,
        "token_classification": BertForTokenClassification,
        "question_answering": BertForQuestionAnswering, "multiple_choice": BertForMultipleChoice})


FAMILY = _bert_family()

"""BigBird (Zaheer et al., 2020) as a configuration of the BERT classes.

The network is BERT's with block-sparse attention in every layer (`attention_type="block_sparse"`: a window of
three blocks, two global blocks and random blocks, the ITC layout; `model/block_sparse.py`), or BERT's own
attention (`"original_full"`). What else is BigBird's own is small: Hugging Face's config names and defaults, a
pooler named `bert.pooler` (a bare linear + tanh) that every head class carries, and a classification head
that reads the first token through dense + `hidden_act` + `out_proj`. The embeddings drop out before their
LayerNorm in transformers and after it here: the same in evaluation, a different dropout when training.

The span head is BigBird's own too: a feed-forward block before the logits, and the question's tokens masked out
of the answer. Not here: the pre-training head with NSP; `rescale_embeddings` and `use_bias=false` are refused
rather than ignored.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, Optional

import torch
from torch import nn

from bertforge.checkpoint import BERT_NAMES
from bertforge.config import PRESETS, BertConfig, ConfigError
from bertforge.model.auto import Family
from bertforge.model.bert import BertForMaskedLM, BertModel
from bertforge.model.feed_forward import activation
from bertforge.model.roberta import RobertaClassificationHead
from bertforge.model.layer import layer_norm
from bertforge.model.outputs import QuestionAnsweringOutput
from bertforge.model.task_heads import (BertForMultipleChoice, BertForQuestionAnswering,
                                        BertForSequenceClassification, BertForTokenClassification, span_loss)

ATTENTION_TYPES = ("block_sparse", "original_full")


@dataclass
class BigBirdConfig(BertConfig):
    """`BertConfig` with the defaults and fields of HF's `BigBirdConfig` (google/bigbird-roberta-base's shape)."""

    vocab_size: int = 50358
    hidden_act: str = "gelu_new"
    max_position_embeddings: int = 4096
    bos_token_id: int = 1
    eos_token_id: int = 2
    sep_token_id: int = 66
    attention_type: str = "block_sparse"
    use_bias: bool = True
    rescale_embeddings: bool = False
    block_size: int = 64
    num_random_blocks: int = 3

    model_type: ClassVar[str] = "big_bird"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.attention_type not in ATTENTION_TYPES:
            raise ConfigError(f"config field 'attention_type' is {self.attention_type!r}; choose one of "
                              f"{', '.join(ATTENTION_TYPES)}")
        for name in ("block_size", "num_random_blocks"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1 or value > 1 << 16:
                raise ConfigError(f"config field '{name}' must be a whole number from 1 to 65,536, got {value!r}")
        if self.use_bias is not True:
            raise ConfigError("config field 'use_bias' is false; bertforge's BigBird has biased Q/K/V projections")
        if self.rescale_embeddings is not False:
            raise ConfigError("config field 'rescale_embeddings' is true; bertforge's BigBird does not rescale them")
        if self.local_attention is not None or self.relative_bias or self.rotary:
            raise ConfigError("BigBird's layers attend through 'attention_type'; it takes no 'local_attention', "
                              "rotary or relative positions")

    @property
    def block_sparse(self) -> tuple[int, int] | None:
        return (self.block_size, self.num_random_blocks) if self.attention_type == "block_sparse" else None

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> "BigBirdConfig":
        """A named size (`tiny` ... `large`, BERT's shapes) with BigBird-base's vocabulary and 4,096 positions;
        blocks of 64 (base, large) or 32 (the small sizes)."""
        if name not in PRESETS:
            raise ConfigError(f"unknown BigBird preset {name!r}; choose one of {', '.join(PRESETS)}")
        layers, hidden, heads = PRESETS[name]
        fields: dict[str, Any] = dict(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                                      intermediate_size=4 * hidden, block_size=64 if name in ("base", "large") else 32)
        fields.update(overrides)
        return cls(**fields)


# BERT's names under `bert.`, except the pooler, a bare linear in HF's BigBird; the span head is `qa_classifier.*`
BIG_BIRD_NAMES = dataclasses.replace(
    BERT_NAMES, rules=[(r"pooler\.dense\.(weight|bias)", r"pooler.\1"), *BERT_NAMES.rules],
    head_prefixes=(*BERT_NAMES.head_prefixes, "qa_classifier."))


class BigBirdModel(BertModel):
    """BERT's encoder with block-sparse attention."""

    config_class = BigBirdConfig
    name_map = BIG_BIRD_NAMES


class _BigBirdHeads:
    """What every BigBird head class adds to its BERT class: the config, names, and an encoder with its pooler
    (transformers' head classes all hold one, used or not)."""

    config_class = BigBirdConfig
    name_map = BIG_BIRD_NAMES
    base_model_class = BigBirdModel

    def build_encoder(self, add_pooling_layer: bool) -> BertModel:
        return BigBirdModel(self.config, add_pooling_layer=True)  # type: ignore[attr-defined]


class BigBirdForMaskedLM(_BigBirdHeads, BertForMaskedLM):
    """Encoder + BERT's MLM head (`cls.predictions.*`); the pooler is carried, not run."""


class BigBirdClassificationHead(RobertaClassificationHead):
    """dropout -> dense -> `hidden_act` -> dropout -> out_proj, on the first token."""

    def __init__(self, config: BigBirdConfig) -> None:
        super().__init__(config)
        self.activation = activation(config.hidden_act)


class BigBirdForSequenceClassification(_BigBirdHeads, BertForSequenceClassification):
    """The classification head reads the first token's state itself: the pooler is carried, not run."""

    def __init__(self, config: BigBirdConfig) -> None:
        super().__init__(config)
        self.classifier = BigBirdClassificationHead(config)
        self.init_weights()

    def pool(self, first: torch.Tensor) -> torch.Tensor:
        return first

    def _flop_heads(self) -> set[str]:
        return set()


class BigBirdForTokenClassification(_BigBirdHeads, BertForTokenClassification):
    pass


class BigBirdForMultipleChoice(_BigBirdHeads, BertForMultipleChoice):
    pass


class BigBirdQuestionAnsweringHead(nn.Module):
    """HF's span head: dropout, then a feed-forward block with its residual and LayerNorm (BERT's layer's second
    half), then the start/end logits."""

    def __init__(self, config: BigBirdConfig) -> None:
        super().__init__()
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.intermediate = nn.Linear(config.hidden_size, config.intermediate_size)
        self.act = activation(config.hidden_act)
        self.output = nn.Linear(config.intermediate_size, config.hidden_size)
        self.norm = layer_norm(config)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.output(self.act(self.intermediate(self.dropout(x))))
        return self.qa_outputs(self.norm(self.dropout(h) + x))


class BigBirdForQuestionAnswering(_BigBirdHeads, BertForQuestionAnswering):
    """The span head (no pooler, as in HF). The question is `question_lengths` tokens long (default: up to its
    first separator, `sep_token_id`); its tokens but the first can be no answer (their logits lose 1e6, as in HF),
    and without `token_type_ids` the question is segment 0 and the rest segment 1."""

    head_names = {"qa_outputs.intermediate": "qa_classifier.intermediate.dense",
                  "qa_outputs.output": "qa_classifier.output.dense", "qa_outputs.norm": "qa_classifier.output.LayerNorm",
                  "qa_outputs.qa_outputs": "qa_classifier.qa_outputs"}

    def __init__(self, config: BigBirdConfig) -> None:
        super().__init__(config)
        self.qa_outputs = BigBirdQuestionAnsweringHead(config)
        self.init_weights()

    def build_encoder(self, add_pooling_layer: bool) -> BertModel:
        return BigBirdModel(self.config, add_pooling_layer=False)

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                question_lengths: Optional[torch.Tensor] = None, token_type_ids: Optional[torch.Tensor] = None,
                position_ids: Optional[torch.Tensor] = None, start_positions: Optional[torch.Tensor] = None,
                end_positions: Optional[torch.Tensor] = None, output_hidden_states: bool = False
                ) -> QuestionAnsweringOutput:
        if question_lengths is None:
            question_lengths = (input_ids == self.config.sep_token_id).int().argmax(dim=-1, keepdim=True) + 1
        question = torch.arange(input_ids.shape[1], device=input_ids.device)[None] < question_lengths.reshape(-1, 1)
        if token_type_ids is None:
            token_type_ids = (~question).long()
        out = super().forward(input_ids, attention_mask, token_type_ids, position_ids,
                              output_hidden_states=output_hidden_states)
        question[:, 0] = False
        penalty = question.to(out.start_logits.dtype) * 1e6
        start, end = out.start_logits - penalty, out.end_logits - penalty
        return QuestionAnsweringOutput(loss=span_loss(start, end, start_positions, end_positions), start_logits=start,
                                       end_logits=end, hidden_states=out.hidden_states)


FAMILY = Family(config_class=BigBirdConfig, classes={
    "base": BigBirdModel, "masked_lm": BigBirdForMaskedLM, "pretraining": BigBirdForMaskedLM,
    "sequence_classification": BigBirdForSequenceClassification,
    "token_classification": BigBirdForTokenClassification, "question_answering": BigBirdForQuestionAnswering,
    "multiple_choice": BigBirdForMultipleChoice})

"""ELECTRA (Clark et al., 2020) as a configuration of the BERT classes.

The encoder is BERT's with ALBERT-style factorised embeddings: tables ``embedding_size`` wide and, when that
differs from ``hidden_size``, a projection (HF: ``electra.embeddings_project``). There is no pooler. What is
ELECTRA's own are the heads: the discriminator's replaced-token detector (``discriminator_predictions``:
dense + act + dense_prediction, one logit per token), the generator's MLM head (``generator_predictions`` +
``generator_lm_head``, decoder tied to the word embeddings, gelu whatever ``hidden_act`` says), a
classification head that reads the first token through dense + gelu + ``out_proj``, and multiple choice
through XLM's ``sequence_summary``. The pre-training model that joins a generator and a discriminator lives
in `electra_pretraining.py`.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, Optional

import torch
import torch.nn.functional as F
from torch import nn

from bertforge.checkpoint import BERT_NAMES
from bertforge.model.roberta import RobertaClassificationHead
from bertforge.config import BERTFORGE_ONLY_KEY, SUPPORTED_ACTIVATIONS, BertConfig, ConfigError
from bertforge.model.auto import Family
from bertforge.model.bert import BertForMaskedLM, BertModel, BertPreTrainedModel
from bertforge.model.feed_forward import activation
from bertforge.model.outputs import ModelOutput
from bertforge.model.task_heads import (BertForMultipleChoice, BertForQuestionAnswering,
                                        BertForSequenceClassification, BertForTokenClassification)

# name -> (layers, hidden, heads, intermediate, embedding_size). small/base/large are the paper's Table 6
# discriminators (note: ELECTRA-Small is 12 layers, not BERT's 4-layer "small"); tiny/mini/medium are
# BERT's small sizes (Turc et al.) for CPU work.
ELECTRA_PRESETS: dict[str, tuple[int, int, int, int, int]] = {
    "tiny": (2, 128, 2, 512, 128),
    "mini": (4, 256, 4, 1024, 128),
    "small": (12, 256, 4, 1024, 128),
    "medium": (8, 512, 8, 2048, 512),
    "base": (12, 768, 12, 3072, 768),
    "large": (24, 1024, 16, 4096, 1024),
}


@dataclass
class ElectraConfig(BertConfig):
    """`BertConfig` with the defaults and extra fields of HF's `ElectraConfig` (electra-small's shape)."""

    embedding_size: int | None = 128
    hidden_size: int = 256
    num_attention_heads: int = 4
    intermediate_size: int = 1024
    # multiple choice reads the first token through XLM's sequence summary (HF's names and defaults)
    summary_type: str = "first"
    summary_use_proj: bool = True
    summary_activation: str | None = "gelu"
    summary_last_dropout: float = 0.1
    summary_first_dropout: float = 0.0  # read by HF when present; written only when set

    model_type: ClassVar[str] = "electra"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.summary_type != "first":
            raise ConfigError(f"config field 'summary_type' is {self.summary_type!r}; bertforge's ELECTRA reads "
                              "the first token ('first'), as every released ELECTRA does")
        if self.summary_activation is not None and self.summary_activation not in SUPPORTED_ACTIVATIONS:
            raise ConfigError(f"config field 'summary_activation' is {self.summary_activation!r}; supported: "
                              f"null, {', '.join(SUPPORTED_ACTIVATIONS)}")
        if self.extra.get("summary_proj_to_labels"):
            raise ConfigError("config field 'summary_proj_to_labels' is true; ELECTRA's multiple-choice head "
                              "needs the summary to keep hidden_size (set it to false)")
        for name in ("summary_last_dropout", "summary_first_dropout"):
            p = getattr(self, name)
            if not 0.0 <= float(p) < 1.0:
                raise ConfigError(f"config field '{name}' must be in [0, 1), got {p!r}")

    @property
    def embedding_projection(self) -> bool:
        return self.embedding_dim != self.hidden_size  # HF: `embeddings_project` only when E != H

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> "ElectraConfig":
        """A named discriminator size (`tiny` ... `large`); any field can be overridden."""
        if name not in ELECTRA_PRESETS:
            raise ConfigError(f"unknown ELECTRA preset {name!r}; choose one of {', '.join(ELECTRA_PRESETS)}")
        layers, hidden, heads, intermediate, embedding = ELECTRA_PRESETS[name]
        fields: dict[str, Any] = dict(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                                      intermediate_size=intermediate, embedding_size=embedding)
        fields.update(overrides)
        return cls(**fields)

    @classmethod
    def from_bert(cls, config: BertConfig, **overrides: Any) -> "ElectraConfig":
        """The same shape as an ELECTRA config (E = the given config's embedding width)."""
        if isinstance(config, cls) and not overrides:
            return config
        fields = {name: getattr(config, name) for name in BertConfig.field_names()}
        fields["embedding_size"] = config.embedding_dim
        fields.update(overrides)
        return cls(**fields, extra=dict(config.extra))

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        if self.layer_sharing == "none":
            out.pop(BERTFORGE_ONLY_KEY, None)  # the projection is ELECTRA's own: transformers loads it
        out["embedding_size"] = self.embedding_dim  # HF's default is 128: never leave it out
        if not self.summary_first_dropout:
            out.pop("summary_first_dropout")
        return out


# The encoder's names are BERT's under `electra.`, except the projection, which HF keeps outside `embeddings`.
ELECTRA_NAMES = dataclasses.replace(
    BERT_NAMES,
    rules=[(r"embeddings\.projection\.(weight|bias)", r"embeddings_project.\1"), *BERT_NAMES.rules],
    head_prefixes=("discriminator_predictions.", "generator_predictions.", "generator_lm_head.", "classifier.",
                   "qa_outputs.", "sequence_summary."),
    tied=("generator_lm_head.weight",),
    base_modules=(),
)


@dataclass
class ElectraForPreTrainingOutput(ModelOutput):
    loss: Optional[torch.Tensor] = None
    logits: Optional[torch.Tensor] = None  # [batch, seq]: > 0 means "replaced"; 0 at padding
    hidden_states: Optional[tuple[torch.Tensor, ...]] = None


class ElectraModel(BertModel):
    """BERT's encoder under ELECTRA's config and names; no pooler, as in HF's ElectraModel."""

    config_class = ElectraConfig
    name_map = ELECTRA_NAMES
    hf_base_prefix = "electra"

    def __init__(self, config: ElectraConfig, add_pooling_layer: bool = False) -> None:
        super().__init__(config, add_pooling_layer=add_pooling_layer)


class _ElectraHeads:
    """What every ELECTRA head class adds to its BERT class: the config, the names and ELECTRA's encoder."""

    config_class = ElectraConfig
    name_map = ELECTRA_NAMES
    hf_base_prefix = "electra"
    base_model_class = ElectraModel


class ElectraForMaskedLM(_ElectraHeads, BertForMaskedLM):
    """The generator: encoder + `generator_predictions` (dense H -> E, gelu, LayerNorm) + `generator_lm_head`
    (decoder tied to the E-wide word embeddings). With labels the decoder runs on the labelled rows only."""

    head_names = {"mlm.transform": "generator_predictions.dense", "mlm.norm": "generator_predictions.LayerNorm",
                  "mlm.bias": "generator_lm_head.bias"}

    def __init__(self, config: ElectraConfig) -> None:
        super().__init__(config)
        self.mlm.act = activation("gelu")  # HF's generator head uses gelu whatever `hidden_act` says


class ElectraDiscriminatorHead(nn.Module):
    """dense -> hidden_act -> dense_prediction: one "was this token replaced?" logit per token."""

    def __init__(self, config: ElectraConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.act = activation(config.hidden_act)
        self.dense_prediction = nn.Linear(config.hidden_size, 1)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.dense_prediction(self.act(self.dense(hidden))).squeeze(-1)


class ElectraForPreTraining(_ElectraHeads, BertPreTrainedModel):
    """The discriminator: replaced-token detection on every real token (the head never sees padding).

    `labels` are 1 (or True) where a token was replaced and 0 where it is the original; the loss is the mean binary
    cross-entropy over real tokens, as in HF. For masked-LM batches use `ElectraForMaskedLM`, or
    `ElectraPretrainingModel` to train generator and discriminator together.
    """

    def __init__(self, config: ElectraConfig) -> None:
        super().__init__(config)
        self.bert = self.build_encoder(add_pooling_layer=False)
        self.discriminator_predictions = ElectraDiscriminatorHead(config)
        self.init_weights()

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                token_type_ids: Optional[torch.Tensor] = None, position_ids: Optional[torch.Tensor] = None,
                labels: Optional[torch.Tensor] = None, output_hidden_states: bool = False,
                unpad: bool = True) -> ElectraForPreTrainingOutput:
        x, batch, collect = self.bert.encode(input_ids, attention_mask, token_type_ids, position_ids,
                                             unpad=unpad, output_hidden_states=output_hidden_states)
        packed_logits = self.discriminator_predictions(x)  # [real tokens]
        loss = None
        if labels is not None:
            target = batch.pack(labels)
            # bool labels (as ElectraPretrainingModel builds them) need no check, and so no device sync
            if target.dtype != torch.bool and bool(((target != 0) & (target != 1)).any()):
                raise ValueError("ElectraForPreTraining labels must be 1 (replaced) or 0 (original) on every real "
                                 "token; masked-LM labels (-100 / token ids) belong to ElectraForMaskedLM or "
                                 "ElectraPretrainingModel")
            loss = F.binary_cross_entropy_with_logits(packed_logits.float(), target.float())
        hidden_states = tuple(batch.unpack(h) for h in collect) if collect is not None else None
        return ElectraForPreTrainingOutput(loss=loss, logits=batch.unpack(packed_logits), hidden_states=hidden_states)


class ElectraClassificationHead(RobertaClassificationHead):
    """HF's ELECTRA head after the first-token dropout: dense -> gelu -> dropout -> out_proj."""

    activation = staticmethod(F.gelu)


class ElectraForSequenceClassification(_ElectraHeads, BertForSequenceClassification):
    """BERT's class with no pooler: the first token's state goes through BERT's dropout, then the ELECTRA
    head, which is HF's `ElectraClassificationHead` step for step."""

    def __init__(self, config: ElectraConfig) -> None:
        super().__init__(config)
        self.bert.pooler = nn.Identity()
        self.classifier = ElectraClassificationHead(config)
        self.init_weights()

    def _flop_heads(self) -> set[str]:
        return {"pooler"}  # the head's dense H x H costs what a pooler would


class ElectraSequenceSummary(nn.Module):
    """XLM's sequence summary as ELECTRA's multiple-choice head configures it: first token -> dropout ->
    `summary` (H -> H) -> activation. Its last dropout is the head class's `dropout`."""

    def __init__(self, config: ElectraConfig) -> None:
        super().__init__()
        self.first_dropout = nn.Dropout(config.summary_first_dropout)
        self.summary = nn.Linear(config.hidden_size, config.hidden_size) if config.summary_use_proj else nn.Identity()
        self.act = activation(config.summary_activation) if config.summary_activation else (lambda x: x)

    def forward(self, first_token: torch.Tensor) -> torch.Tensor:
        return self.act(self.summary(self.first_dropout(first_token)))


class _Borrowed(nn.Module):
    """Calls a module registered elsewhere (HF names it outside the encoder) from the pooler's slot."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = [module]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.module[0](x)


class ElectraForMultipleChoice(_ElectraHeads, BertForMultipleChoice):
    """BERT's forward with `sequence_summary` in the pooler's slot and `summary_last_dropout` before
    `classifier`, as HF's ElectraForMultipleChoice."""

    def __init__(self, config: ElectraConfig) -> None:
        super().__init__(config)
        self.sequence_summary = ElectraSequenceSummary(config)
        self.bert.pooler = _Borrowed(self.sequence_summary)
        self.dropout = nn.Dropout(config.summary_last_dropout)
        self.init_weights()


class ElectraForTokenClassification(_ElectraHeads, BertForTokenClassification):
    pass


class ElectraForQuestionAnswering(_ElectraHeads, BertForQuestionAnswering):
    pass


# as in transformers, role "pretraining" is the discriminator; "masked_lm" is the generator
FAMILY = Family(config_class=ElectraConfig, classes={
    "base": ElectraModel, "masked_lm": ElectraForMaskedLM, "pretraining": ElectraForPreTraining,
    "sequence_classification": ElectraForSequenceClassification,
    "token_classification": ElectraForTokenClassification,
    "question_answering": ElectraForQuestionAnswering, "multiple_choice": ElectraForMultipleChoice})

__all__ = ["ElectraConfig", "ElectraModel", "ElectraForMaskedLM", "ElectraForPreTraining",
           "ElectraForSequenceClassification", "ElectraForTokenClassification", "ElectraForQuestionAnswering",
           "ElectraForMultipleChoice", "ElectraForPreTrainingOutput", "ELECTRA_NAMES", "ELECTRA_PRESETS", "FAMILY"]

"""DistilBERT (Sanh et al., 2019) as a configuration of the BERT classes.

The network is BERT's post-LN encoder with no segment embeddings (``type_vocab_size = 0``) and no pooler;
what differs is naming: Hugging Face's `config.json` says ``dim``/``n_layers``/``hidden_dim``... and its
checkpoints say ``distilbert.transformer.layer.N.attention.q_lin``... Two heads have another shape than
BERT's: sequence classification and multiple choice read the first token through ``pre_classifier`` + ReLU
(which takes the pooler's place in BERT's forward), and QA applies dropout before ``qa_outputs``.
Optionally the position table is the fixed sinusoidal one (``sinusoidal_pos_embds``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from bertforge.checkpoint import NameMap
from bertforge.config import BertConfig, ConfigError
from bertforge.model.auto import Family
from bertforge.model.bert import BertForMaskedLM, BertModel
from bertforge.model.embeddings import Embeddings
from bertforge.model.task_heads import (BertForMultipleChoice, BertForQuestionAnswering,
                                        BertForSequenceClassification, BertForTokenClassification)

# HF DistilBertConfig field -> our BertConfig field
HF_FIELDS = {"dim": "hidden_size", "n_layers": "num_hidden_layers", "n_heads": "num_attention_heads",
             "hidden_dim": "intermediate_size", "activation": "hidden_act", "dropout": "hidden_dropout_prob",
             "attention_dropout": "attention_probs_dropout_prob"}
LAYER_NORM_EPS = 1e-12  # hard-coded in every LayerNorm of HF's DistilBERT


@dataclass
class DistilBertConfig(BertConfig):
    """`BertConfig` with DistilBERT's defaults (6 layers, no segments) that reads and writes HF's field names."""

    num_hidden_layers: int = 6
    type_vocab_size: int = 0
    layer_norm_eps: float = LAYER_NORM_EPS
    sinusoidal_pos_embds: bool = False
    qa_dropout: float = 0.1
    seq_classif_dropout: float = 0.2
    tie_weights_: bool = True

    model_type: ClassVar[str] = "distilbert"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.type_vocab_size != 0:
            raise ConfigError(f"config field 'type_vocab_size' is {self.type_vocab_size}; DistilBERT has no "
                              "segment embeddings (it must be 0)")
        if self.layer_norm_eps != LAYER_NORM_EPS:
            raise ConfigError(f"config field 'layer_norm_eps' is {self.layer_norm_eps}; DistilBERT's is fixed "
                              f"at {LAYER_NORM_EPS}")
        if not self.tie_weights_:
            raise ConfigError("config field 'tie_weights_' is false; bertforge always ties the MLM decoder to "
                              "the word embeddings")
        for name in ("qa_dropout", "seq_classif_dropout"):
            p = getattr(self, name)
            if not 0.0 <= float(p) < 1.0:
                raise ConfigError(f"config field '{name}' must be in [0, 1), got {p!r}")

    @classmethod
    def json_name(cls, name: str) -> str:
        return next((hf for hf, ours in HF_FIELDS.items() if ours == name), name)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "DistilBertConfig":
        """HF's names win over ours (HF treats `hidden_size` etc. as aliases of `dim` etc.)."""
        data = dict(data)
        for hf, ours in HF_FIELDS.items():
            if hf in data:
                data[ours] = data.pop(hf)
        return super().from_dict(data)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        for hf, ours in HF_FIELDS.items():
            out[hf] = out.pop(ours)
        del out["type_vocab_size"], out["layer_norm_eps"]  # not HF fields: fixed for the family
        return out


def sinusoidal_positions(n_positions: int, dim: int) -> torch.Tensor:
    """HF's fixed table: angle(pos, j) = pos / 10000^(2*(j//2)/dim); sin on even columns, cos on odd ones."""
    pos = torch.arange(n_positions, dtype=torch.float64)[:, None]
    j = torch.arange(dim, dtype=torch.float64)
    angle = pos / torch.pow(10000.0, 2 * torch.div(j, 2, rounding_mode="floor") / dim)
    table = torch.empty(n_positions, dim, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle[:, 0::2])
    table[:, 1::2] = torch.cos(angle[:, 1::2])
    return table.float()


DISTILBERT_NAMES = NameMap(
    rules=[
        (r"embeddings\.norm\.(weight|bias)", r"embeddings.LayerNorm.\1"),
        (r"encoder\.layers\.(\d+)\.attention\.out\.(weight|bias)", r"transformer.layer.\1.attention.out_lin.\2"),
        (r"encoder\.layers\.(\d+)\.attention_norm\.(weight|bias)", r"transformer.layer.\1.sa_layer_norm.\2"),
        (r"encoder\.layers\.(\d+)\.feed_forward\.up\.(weight|bias)", r"transformer.layer.\1.ffn.lin1.\2"),
        (r"encoder\.layers\.(\d+)\.feed_forward\.down\.(weight|bias)", r"transformer.layer.\1.ffn.lin2.\2"),
        (r"encoder\.layers\.(\d+)\.output_norm\.(weight|bias)", r"transformer.layer.\1.output_layer_norm.\2"),
    ],
    fused=[
        (r"encoder\.layers\.(\d+)\.attention\.qkv\.(weight|bias)",
         [r"transformer.layer.\1.attention.q_lin.\2", r"transformer.layer.\1.attention.k_lin.\2",
          r"transformer.layer.\1.attention.v_lin.\2"]),
    ],
    ignored=("embeddings.position_ids",),
    head_prefixes=("vocab_transform.", "vocab_layer_norm.", "vocab_projector.", "pre_classifier.", "classifier.",
                   "qa_outputs."),
    tied=("vocab_projector.weight",),  # the decoder is the word embedding; `vocab_projector.bias` is real
)


class _DistilBert:
    """What every DistilBERT class adds: config, names, and the fixed sinusoidal table when asked for."""

    config_class = DistilBertConfig
    name_map = DISTILBERT_NAMES
    hf_base_prefix = "distilbert"

    def init_weights(self) -> None:
        super().init_weights()
        if self.config.sinusoidal_pos_embds:
            for module in self.modules():
                if isinstance(module, Embeddings):
                    weight = module.position_embeddings.weight
                    with torch.no_grad():
                        weight.copy_(sinusoidal_positions(*weight.shape))
                    weight.requires_grad_(False)  # a fixed table: the optimizer skips it


class DistilBertModel(_DistilBert, BertModel):
    """BERT's encoder without segments; HF's DistilBertModel has no pooler, so none is built by default."""

    def __init__(self, config: DistilBertConfig, add_pooling_layer: bool = False) -> None:
        super().__init__(config, add_pooling_layer=add_pooling_layer)


class _DistilBertHeads(_DistilBert):
    base_model_class = DistilBertModel

    def build_encoder(self, add_pooling_layer: bool) -> DistilBertModel:
        return DistilBertModel(self.config, add_pooling_layer=False)  # DistilBERT has no pooler


class DistilBertForMaskedLM(_DistilBertHeads, BertForMaskedLM):
    """Encoder + `vocab_transform` -> activation -> `vocab_layer_norm` -> `vocab_projector` (tied)."""

    head_names = {"mlm.transform": "vocab_transform", "mlm.norm": "vocab_layer_norm",
                  "mlm.bias": "vocab_projector.bias"}


class _PreClassifierHead:
    """Sequence classification and multiple choice: first token -> `pre_classifier` -> ReLU -> dropout ->
    classifier: BERT's head with its own pooling and `seq_classif_dropout`."""

    def __init__(self, config: DistilBertConfig) -> None:
        super().__init__(config)
        self.pre_classifier = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(config.seq_classif_dropout)
        self.init_weights()

    def pool(self, first: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.pre_classifier(first))


class DistilBertForSequenceClassification(_PreClassifierHead, _DistilBertHeads, BertForSequenceClassification):
    pass


class DistilBertForMultipleChoice(_PreClassifierHead, _DistilBertHeads, BertForMultipleChoice):
    pass


class DistilBertForTokenClassification(_DistilBertHeads, BertForTokenClassification):
    """Same as BERT's (dropout = `dropout`, then `classifier` on every token)."""


class DistilBertForQuestionAnswering(_DistilBertHeads, BertForQuestionAnswering):
    """BERT's head with HF's `qa_dropout` before `qa_outputs`."""

    head_names = {"qa_outputs.1": "qa_outputs"}

    def __init__(self, config: DistilBertConfig) -> None:
        super().__init__(config)
        self.qa_outputs = nn.Sequential(nn.Dropout(config.qa_dropout), self.qa_outputs)


# role "pretraining" is MLM only: DistilBERT was trained without NSP
FAMILY = Family(config_class=DistilBertConfig, classes={
    "base": DistilBertModel, "masked_lm": DistilBertForMaskedLM, "pretraining": DistilBertForMaskedLM,
    "sequence_classification": DistilBertForSequenceClassification,
    "token_classification": DistilBertForTokenClassification,
    "question_answering": DistilBertForQuestionAnswering, "multiple_choice": DistilBertForMultipleChoice})

__all__ = ["DistilBertConfig", "DistilBertModel", "DistilBertForMaskedLM", "DistilBertForSequenceClassification",
           "DistilBertForTokenClassification", "DistilBertForQuestionAnswering", "DistilBertForMultipleChoice",
           "DISTILBERT_NAMES", "FAMILY", "sinusoidal_positions"]

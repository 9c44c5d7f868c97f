"""ALBERT (Lan et al., 2019) as a configuration of the BERT classes.

ALBERT's two parameter reductions are `BertConfig` options any member can use: a factorised embedding
(``embedding_size`` E < H, plus a projection E -> H) and cross-layer sharing (``layer_sharing``). What is
ALBERT's own is small: Hugging Face's defaults (gelu_new, vocab 30000, no dropout, all layers shared), its
checkpoint names (``albert.*``, ``predictions.*``, ``sop_classifier.*``, a bare-Linear pooler) and the
sentence-order head, which has NSP's shape and is driven by the same label.

transformers describes sharing with ``num_hidden_groups``/``inner_group_num``; bertforge reads and writes
those for the modes they can express ("all": 1 group; "none": one group per layer) and refuses the rest
with a `ConfigError` naming the field. "attention" and "ffn" sharing (the paper's Table 4) are
bertforge-only: their config.json carries ``layer_sharing`` and a ``num_hidden_groups`` that transformers
rejects with a message saying so, rather than loading a model with silently re-initialised layers.

One training-only difference from transformers: its ALBERT layer applies no dropout to the feed-forward
output; bertforge keeps BERT's (and the original TF ALBERT's). ALBERT's default dropout is 0, where they agree.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Optional

import torch
from torch import nn

from bertforge.checkpoint import NameMap
from bertforge.config import BERTFORGE_ONLY_KEY, BertConfig, ConfigError
from bertforge.model.auto import Family
from bertforge.model.bert import BertForMaskedLM, BertForPreTraining, BertModel
from bertforge.model.outputs import BertForPreTrainingOutput
from bertforge.model.task_heads import (BertForMultipleChoice, BertForQuestionAnswering,
                                        BertForSequenceClassification, BertForTokenClassification)

# name -> (layers, hidden, heads, intermediate, embedding_size). base..xxlarge are the paper's Table 1;
# tiny..medium are BERT's small sizes (Turc et al.) for CPU work.
ALBERT_PRESETS: dict[str, tuple[int, int, int, int, int]] = {
    "tiny": (2, 128, 2, 512, 64),
    "mini": (4, 256, 4, 1024, 128),
    "small": (4, 512, 8, 2048, 128),
    "medium": (8, 512, 8, 2048, 128),
    "base": (12, 768, 12, 3072, 128),
    "large": (24, 1024, 16, 4096, 128),
    "xlarge": (24, 2048, 16, 8192, 128),
    "xxlarge": (12, 4096, 64, 16384, 128),
}


@dataclass
class AlbertConfig(BertConfig):
    """`BertConfig` with the defaults of HF's `AlbertConfig` (albert-xxlarge's shape, all layers shared)."""

    vocab_size: int = 30000
    hidden_size: int = 4096
    num_attention_heads: int = 64
    intermediate_size: int = 16384
    hidden_act: str = "gelu_new"
    hidden_dropout_prob: float = 0.0
    attention_probs_dropout_prob: float = 0.0
    classifier_dropout: float | None = 0.1  # HF: classifier_dropout_prob
    embedding_size: int | None = 128
    layer_sharing: str = "all"
    bos_token_id: int = 2
    eos_token_id: int = 3

    model_type: ClassVar[str] = "albert"

    @property
    def embedding_projection(self) -> bool:
        return True  # HF's ALBERT projects E -> H even when E == H

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> "AlbertConfig":
        """A named size (`tiny` ... `xxlarge`); any field can be overridden, e.g. ``layer_sharing="none"``."""
        if name not in ALBERT_PRESETS:
            raise ConfigError(f"unknown ALBERT preset {name!r}; choose one of {', '.join(ALBERT_PRESETS)}")
        layers, hidden, heads, intermediate, embedding = ALBERT_PRESETS[name]
        fields: dict[str, Any] = dict(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                                      intermediate_size=intermediate, embedding_size=embedding)
        fields.update(overrides)
        return cls(**fields)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "AlbertConfig":
        data = dict(data)
        if "classifier_dropout_prob" in data:
            data["classifier_dropout"] = data.pop("classifier_dropout_prob")
        groups, inner = data.pop("num_hidden_groups", 1), data.pop("inner_group_num", 1)
        if "layer_sharing" not in data:
            data["layer_sharing"] = _sharing_from_groups(groups, inner, data.get("num_hidden_layers", 12))
        return super().from_dict(data)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out.pop(BERTFORGE_ONLY_KEY, None)
        out.pop("layer_sharing", None)
        dropout = out.pop("classifier_dropout", None)
        out["classifier_dropout_prob"] = dropout if dropout is not None else self.hidden_dropout_prob
        out["embedding_size"] = self.embedding_dim  # HF's field is an int, default 128: never leave it out
        out["inner_group_num"] = 1
        groups = {"all": 1, "none": self.num_hidden_layers}.get(self.layer_sharing)
        if groups is None:
            out["layer_sharing"] = self.layer_sharing
            # a value transformers' strict config rejects, naming the field: better than a silent mis-load
            groups = (f"layer_sharing={self.layer_sharing!r} is bertforge-only; transformers cannot load this "
                      "checkpoint")
        out["num_hidden_groups"] = groups
        return out


def _sharing_from_groups(groups: Any, inner: Any, num_layers: Any) -> str:
    """HF's (num_hidden_groups, inner_group_num) -> `layer_sharing`, for the combinations bertforge runs."""
    if inner != 1:
        raise ConfigError(f"config field 'inner_group_num' is {inner!r}; bertforge runs one layer per group "
                          "(inner_group_num = 1), as every released ALBERT does")
    if groups == 1:
        return "all"
    if groups == num_layers:
        return "none"
    raise ConfigError(f"config field 'num_hidden_groups' is {groups!r}; bertforge supports 1 (all layers shared) "
                      f"or num_hidden_layers ({num_layers}, nothing shared)")


_LAYER = r"encoder.albert_layer_groups.\1.albert_layers.0"
ALBERT_NAMES = NameMap(
    rules=[
        (r"embeddings\.norm\.(weight|bias)", r"embeddings.LayerNorm.\1"),
        (r"embeddings\.projection\.(weight|bias)", r"encoder.embedding_hidden_mapping_in.\1"),
        (r"encoder\.layers\.(\d+)\.attention\.out\.(weight|bias)", _LAYER + r".attention.dense.\2"),
        (r"encoder\.layers\.(\d+)\.attention_norm\.(weight|bias)", _LAYER + r".attention.LayerNorm.\2"),
        (r"encoder\.layers\.(\d+)\.feed_forward\.up\.(weight|bias)", _LAYER + r".ffn.\2"),
        (r"encoder\.layers\.(\d+)\.feed_forward\.down\.(weight|bias)", _LAYER + r".ffn_output.\2"),
        (r"encoder\.layers\.(\d+)\.output_norm\.(weight|bias)", _LAYER + r".full_layer_layer_norm.\2"),
        (r"pooler\.dense\.(weight|bias)", r"pooler.\1"),  # HF's pooler is a bare Linear
    ],
    fused=[
        (r"encoder\.layers\.(\d+)\.attention\.qkv\.(weight|bias)",
         [_LAYER + r".attention.query.\2", _LAYER + r".attention.key.\2", _LAYER + r".attention.value.\2"]),
    ],
    ignored=("embeddings.position_ids", "embeddings.token_type_ids"),
    head_prefixes=("predictions.", "sop_classifier.", "classifier.", "qa_outputs.", "pooler."),
    tied=("predictions.decoder.weight", "predictions.decoder.bias"),
    base_modules=("pooler.",),
)


class AlbertModel(BertModel):
    """BERT's encoder under ALBERT's config and checkpoint names."""

    config_class = AlbertConfig
    name_map = ALBERT_NAMES
    hf_base_prefix = "albert"


class _AlbertHeads:
    """What every ALBERT head class adds to its BERT class: the config, the names and ALBERT's encoder."""

    config_class = AlbertConfig
    name_map = ALBERT_NAMES
    hf_base_prefix = "albert"
    base_model_class = AlbertModel


class AlbertForMaskedLM(_AlbertHeads, BertForMaskedLM):
    """Encoder + `predictions` (dense H -> E, act, LayerNorm, decoder tied to the E-wide word embeddings)."""

    head_names = {"mlm.transform": "predictions.dense", "mlm.norm": "predictions.LayerNorm",
                  "mlm.bias": "predictions.bias"}


class AlbertForPreTraining(_AlbertHeads, BertForPreTraining):
    """MLM + sentence-order prediction (SOP). SOP is NSP's head and loss on other data (A/B swapped, not a
    random B), so it rides on BERT's NSP path; the pre-training loop's `next_sentence_label` drives it."""

    head_names = {**AlbertForMaskedLM.head_names, "nsp.classifier": "sop_classifier.classifier"}

    def __init__(self, config: AlbertConfig) -> None:
        super().__init__(config)
        self.nsp.dropout = nn.Dropout(config.classifier_dropout or 0.0)  # HF's SOP head drops out first

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                token_type_ids: Optional[torch.Tensor] = None, position_ids: Optional[torch.Tensor] = None,
                labels: Optional[torch.Tensor] = None, sentence_order_label: Optional[torch.Tensor] = None,
                next_sentence_label: Optional[torch.Tensor] = None, **kwargs: Any) -> BertForPreTrainingOutput:
        """As `BertForPreTraining.forward`; `seq_relationship_logits`/`nsp_loss` hold SOP's logits and loss."""
        if sentence_order_label is not None and next_sentence_label is not None:
            raise ValueError("pass sentence_order_label or its alias next_sentence_label, not both")
        order = sentence_order_label if sentence_order_label is not None else next_sentence_label
        return super().forward(input_ids, attention_mask, token_type_ids, position_ids, labels=labels,
                               next_sentence_label=order, **kwargs)


class AlbertForSequenceClassification(_AlbertHeads, BertForSequenceClassification):
    pass


class AlbertForTokenClassification(_AlbertHeads, BertForTokenClassification):
    pass


class AlbertForQuestionAnswering(_AlbertHeads, BertForQuestionAnswering):
    pass


class AlbertForMultipleChoice(_AlbertHeads, BertForMultipleChoice):
    pass


FAMILY = Family(config_class=AlbertConfig, classes={
    "base": AlbertModel, "masked_lm": AlbertForMaskedLM, "pretraining": AlbertForPreTraining,
    "sequence_classification": AlbertForSequenceClassification,
    "token_classification": AlbertForTokenClassification,
    "question_answering": AlbertForQuestionAnswering, "multiple_choice": AlbertForMultipleChoice})

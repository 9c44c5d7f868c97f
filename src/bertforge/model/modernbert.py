"""ModernBERT (Warner et al., 2024) as a configuration of the BERT classes.

The network is bertforge's encoder with the modern options of `BertConfig` switched on: pre-LN layers with a
final norm, a GeGLU feed-forward, no biases in linears and norms, rotary positions (no position table, no
segments) with one base for global and one for local layers, and a sliding window of `local_attention` tokens
in every layer but each `global_attn_every_n_layers`-th. What is ModernBERT's own is small: Hugging Face's
config names and defaults, its checkpoint names (`model.*`, `head.*`, `decoder.*`), its dropout placement
(embeddings, attention probabilities and output, inside the MLP), its truncated-normal init, and its task
heads, which run the prediction head (dense, act, norm) on a pooled or per-token state before the classifier.

Unpadding, attention groups, and the masked-rows-only decoder work unchanged: rotary rotates packed tokens by
their own positions, and a local layer's window is a mask on each group's grid (see `model/attention.py`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Optional

import torch
from torch import nn

from bertforge.checkpoint import NameMap
from bertforge.config import BERTFORGE_ONLY_KEY, PRESETS, BertConfig, ConfigError
from bertforge.model.attention import SelfAttention
from bertforge.model.auto import Family
from bertforge.model.bert import BertForMaskedLM, BertModel, BertPreTrainedModel
from bertforge.model.feed_forward import FeedForward, activation
from bertforge.model.heads import MaskedLMHead
from bertforge.model.layer import layer_norm
from bertforge.model.outputs import TaskOutput
from bertforge.model.packing import PackedBatch
from bertforge.model.task_heads import (BertForQuestionAnswering, BertForTokenClassification, choice_loss,
                                        choice_rows, sequence_loss)

# name -> (layers, hidden, heads, intermediate). base and large are the released models; tiny..medium are
# BERT's small sizes (Turc et al.) with ModernBERT-base's GLU width ratio (1152 / 768 = 1.5), for CPU work.
MODERNBERT_PRESETS: dict[str, tuple[int, int, int, int]] = {
    **{name: (layers, hidden, heads, hidden * 3 // 2) for name, (layers, hidden, heads) in PRESETS.items()
       if name in ("tiny", "mini", "small", "medium")},
    "base": (22, 768, 12, 1152),
    "large": (28, 1024, 16, 2624),
}

# HF's ModernBertConfig name -> ours, for the fields both have under other names
HF_RENAMES = {"hidden_activation": "hidden_act", "norm_eps": "layer_norm_eps", "mlp_dropout": "hidden_dropout_prob",
              "attention_dropout": "attention_probs_dropout_prob", "classifier_bias": "head_bias",
              "classifier_activation": "head_act"}
GLOBAL, LOCAL = "full_attention", "sliding_attention"


@dataclass
class ModernBertConfig(BertConfig):
    """`BertConfig` with the modern options on and the defaults of HF's `ModernBertConfig` (ModernBERT-base).

    Dropout, in HF's terms: `attention_dropout` (kept in `attention_probs_dropout_prob`) drops the attention
    probabilities and the attention output, `mlp_dropout` (kept in `hidden_dropout_prob`) the GLU's output
    before its down-projection, and `embedding_dropout` the embeddings.
    """

    vocab_size: int = 50368
    hidden_size: int = 768
    num_hidden_layers: int = 22
    num_attention_heads: int = 12
    intermediate_size: int = 1152
    hidden_dropout_prob: float = 0.0
    attention_probs_dropout_prob: float = 0.0
    max_position_embeddings: int = 8192
    type_vocab_size: int = 0
    layer_norm_eps: float = 1e-5
    pad_token_id: int = 50283
    classifier_dropout: float | None = 0.0
    pre_norm: bool = True
    feed_forward_glu: bool = True
    attention_bias: bool = False
    mlp_bias: bool = False
    norm_bias: bool = False
    rope_theta: float | None = 160000.0
    local_rope_theta: float | None = 10000.0
    local_attention: int | None = 128
    global_attn_every_n_layers: int = 3
    head_bias: bool = False
    head_act: str | None = "gelu"
    decoder_bias: bool = True
    # ModernBERT's own
    embedding_dropout: float = 0.0
    initializer_cutoff_factor: float = 2.0
    classifier_pooling: str = "cls"

    model_type: ClassVar[str] = "modernbert"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.classifier_pooling not in ("cls", "mean"):
            raise ConfigError(f"config field 'classifier_pooling' is {self.classifier_pooling!r}; choose cls or mean")
        if not 0.0 <= float(self.embedding_dropout) < 1.0:
            raise ConfigError(f"config field 'embedding_dropout' must be in [0, 1), got {self.embedding_dropout!r}")

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> "ModernBertConfig":
        """A named size (`tiny` ... `medium`, `base`, `large`); any field can be overridden."""
        if name not in MODERNBERT_PRESETS:
            raise ConfigError(f"unknown ModernBERT preset {name!r}; choose one of {', '.join(MODERNBERT_PRESETS)}")
        layers, hidden, heads, intermediate = MODERNBERT_PRESETS[name]
        fields: dict[str, Any] = dict(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                                      intermediate_size=intermediate)
        fields.update(overrides)
        return cls(**fields)

    # ---- dropout placement (see the class docstring) -----------------------------------------------------------
    @property
    def embedding_dropout_prob(self) -> float:
        return self.embedding_dropout

    @property
    def attention_output_dropout_prob(self) -> float:
        return self.attention_probs_dropout_prob

    @property
    def ffn_inner_dropout_prob(self) -> float:
        return self.hidden_dropout_prob

    @property
    def ffn_output_dropout_prob(self) -> float:
        return 0.0

    def modern_options_in_use(self) -> list[str]:
        return []  # native to this family: written under HF's names by `to_dict`

    def bertforge_only_options(self) -> list[str]:
        """Options set here that transformers' ModernBERT cannot express."""
        only = [name for name in ("pre_norm", "feed_forward_glu") if not getattr(self, name)]
        if not self.rotary:
            only.append("rope_theta")
        if self.relative_bias:
            only.append("relative_attention_num_buckets")
        if self.type_vocab_size:
            only.append("type_vocab_size")
        if self.embedding_projection or self.layer_sharing != "none":
            only.append("embedding_size/layer_sharing")
        return only

    # ---- HF's config.json ---------------------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ModernBertConfig":
        data = dict(data)
        for hf, ours in HF_RENAMES.items():
            if hf in data:
                data[ours] = data.pop(hf)
        rope = data.pop("rope_parameters", None)
        if "global_rope_theta" in data:  # transformers 4's names
            data["rope_theta"] = data.pop("global_rope_theta")
        if rope is not None:
            if not isinstance(rope, dict):
                raise ConfigError(f"config field 'rope_parameters' must be an object, got {rope!r}")
            for kind, name in ((GLOBAL, "rope_theta"), (LOCAL, "local_rope_theta")):
                params = rope.get(kind) or {}
                if params.get("rope_type", "default") != "default":
                    raise ConfigError(f"config field 'rope_parameters.{kind}.rope_type' is "
                                      f"{params['rope_type']!r}; bertforge supports 'default' rotary positions")
                if "rope_theta" in params:
                    data[name] = params["rope_theta"]
        layer_types = data.pop("layer_types", None)
        if layer_types is not None:
            data["global_attn_every_n_layers"], all_global = _every_n(layer_types, data.get("num_hidden_layers", 22))
            if all_global:
                data["local_attention"] = None
        return super().from_dict(data)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out.pop(BERTFORGE_ONLY_KEY, None)
        for hf, ours in HF_RENAMES.items():
            out.pop(ours, None)
            out[hf] = getattr(self, ours)
        if out["classifier_activation"] is None:
            out["classifier_activation"] = self.hidden_act
        if out.get("classifier_dropout") is None:
            out["classifier_dropout"] = 0.0
        for name in ("rope_theta", "local_rope_theta", "global_attn_every_n_layers", "pre_norm", "feed_forward_glu",
                     "type_vocab_size", "local_attention"):
            out.pop(name, None)
        for name in ("attention_bias", "mlp_bias", "norm_bias", "decoder_bias"):
            out[name] = getattr(self, name)
        out["layer_types"] = [GLOBAL if self.is_global_layer(i) else LOCAL for i in range(self.num_hidden_layers)]
        if self.local_attention is not None:
            out["local_attention"] = self.local_attention
        if self.rotary:
            local = self.local_rope_theta if self.local_rope_theta is not None else self.rope_theta
            out["rope_parameters"] = {GLOBAL: {"rope_type": "default", "rope_theta": float(self.rope_theta)},
                                      LOCAL: {"rope_type": "default", "rope_theta": float(local)}}
        for name in ("bos_token_id", "eos_token_id", "cls_token_id", "sep_token_id"):
            out.setdefault(name, None)  # unknown rather than HF's defaults, which may lie outside this vocabulary
        only = self.bertforge_only_options()
        if only:
            for name in ("pre_norm", "feed_forward_glu", "rope_theta", "local_rope_theta", "type_vocab_size"):
                out[name] = getattr(self, name)
            out[BERTFORGE_ONLY_KEY] = (f"{', '.join(only)}: bertforge options; transformers' ModernBERT classes "
                                       "cannot load this checkpoint")
        return out


def _every_n(layer_types: Any, num_layers: Any) -> tuple[int, bool]:
    """HF's per-layer `layer_types` -> (global_attn_every_n_layers, whether all layers are global)."""
    if not isinstance(layer_types, list) or any(t not in (GLOBAL, LOCAL) for t in layer_types):
        raise ConfigError(f"config field 'layer_types' must be a list of {GLOBAL!r}/{LOCAL!r}, got {layer_types!r}")
    if len(layer_types) != num_layers:
        raise ConfigError(f"config field 'layer_types' has {len(layer_types)} entries for {num_layers} layers")
    globals_ = [i for i, t in enumerate(layer_types) if t == GLOBAL]
    if len(globals_) == len(layer_types):
        return 1, True
    n = globals_[1] - globals_[0] if len(globals_) > 1 else len(layer_types)
    if [i % n == 0 for i in range(len(layer_types))] != [t == GLOBAL for t in layer_types]:
        raise ConfigError("config field 'layer_types' must make every n-th layer global, starting with layer 0 "
                          f"(ModernBERT's global_attn_every_n_layers); got {layer_types}")
    return n, False


# internal (bertforge) -> HF names of the base model; heads are `head.*`, `decoder.*`, `classifier.*`
MODERNBERT_NAMES = NameMap(
    rules=[
        (r"embeddings\.word_embeddings\.weight", r"embeddings.tok_embeddings.weight"),
        (r"encoder\.layers\.(\d+)\.attention\.qkv\.(weight|bias)", r"layers.\1.attn.Wqkv.\2"),
        (r"encoder\.layers\.(\d+)\.attention\.out\.(weight|bias)", r"layers.\1.attn.Wo.\2"),
        (r"encoder\.layers\.(\d+)\.attention_norm\.(weight|bias)", r"layers.\1.attn_norm.\2"),
        (r"encoder\.layers\.(\d+)\.feed_forward\.up\.(weight|bias)", r"layers.\1.mlp.Wi.\2"),
        (r"encoder\.layers\.(\d+)\.feed_forward\.down\.(weight|bias)", r"layers.\1.mlp.Wo.\2"),
        (r"encoder\.layers\.(\d+)\.output_norm\.(weight|bias)", r"layers.\1.mlp_norm.\2"),
        (r"encoder\.final_norm\.(weight|bias)", r"final_norm.\1"),
    ],
    head_prefixes=("head.", "decoder.", "classifier."),
    tied=("decoder.weight",),
)


class ModernBertHead(nn.Module):
    """HF's prediction head (dense, act, norm): what every ModernBERT task head runs before its classifier."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size, bias=config.head_bias)
        self.act = activation(config.head_act or config.hidden_act)
        self.norm = layer_norm(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.act(self.dense(x)))


class ModernBertClassifier(nn.Module):
    """Prediction head -> dropout -> classifier: ModernBERT's token and span heads as one module."""

    def __init__(self, config: BertConfig, outputs: int) -> None:
        super().__init__()
        self.head = ModernBertHead(config)
        self.dropout = nn.Dropout(config.classifier_dropout or 0.0)
        self.classifier = nn.Linear(config.hidden_size, outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.dropout(self.head(x)))


class _ModernBertBase:
    """Config, names and ModernBERT's weight init (truncated normal; output projections scaled by depth)."""

    config_class = ModernBertConfig
    name_map = MODERNBERT_NAMES
    hf_base_prefix = "model"

    def _init_module(self, module: nn.Module) -> None:
        super()._init_module(module)  # type: ignore[misc]
        config = self.config  # type: ignore[attr-defined]
        std = config.initializer_range
        out_std = std / math.sqrt(2.0 * config.num_hidden_layers)

        def trunc(linear: nn.Module, s: float) -> None:
            cutoff = config.initializer_cutoff_factor * s
            nn.init.trunc_normal_(linear.weight, mean=0.0, std=s, a=-cutoff, b=cutoff)

        if isinstance(module, SelfAttention):
            trunc(module.qkv, std)
            trunc(module.out, out_std)
        elif isinstance(module, FeedForward):
            trunc(module.up, std)
            trunc(module.down, out_std)
        elif isinstance(module, nn.Embedding):
            trunc(module, std)
        elif isinstance(module, ModernBertHead):
            trunc(module.dense, out_std)
        elif isinstance(module, MaskedLMHead):
            trunc(module.transform, out_std)
        elif isinstance(module, ModernBertClassifier):
            trunc(module.classifier, config.hidden_size ** -0.5)


class ModernBertModel(_ModernBertBase, BertModel):
    """Embeddings (token table + norm) -> N pre-LN layers -> final norm. No pooler, as in HF."""

    def __init__(self, config: ModernBertConfig, add_pooling_layer: bool = False) -> None:
        super().__init__(config, add_pooling_layer=False)


class _ModernBertHeads(_ModernBertBase):
    base_model_class = ModernBertModel


class ModernBertForMaskedLM(_ModernBertHeads, BertForMaskedLM):
    """Encoder + `head` (dense, act, norm) + `decoder` tied to the token embeddings; with labels the decoder
    runs on the labelled rows only (HF's `sparse_prediction`, always on)."""

    head_names = {"mlm.transform": "head.dense", "mlm.norm": "head.norm", "mlm.bias": "decoder.bias"}


def mean_pool(x: torch.Tensor, batch, attention_mask: Optional[torch.Tensor]) -> torch.Tensor:
    """One vector per sequence from packed states: the mean of its real tokens."""
    if batch.indices is not None:
        sequence = batch.indices // batch.seq_len
        weight = x.new_ones(x.shape[0])
    else:
        sequence = torch.arange(x.shape[0], device=x.device) // batch.seq_len
        weight = (batch.pack(attention_mask).to(x.dtype) if attention_mask is not None else x.new_ones(x.shape[0]))
    sums = x.new_zeros(batch.batch_size, x.shape[1]).index_add_(0, sequence, x * weight[:, None])
    counts = x.new_zeros(batch.batch_size).index_add_(0, sequence, weight)
    return sums / counts.clamp(min=1.0)[:, None]


class _PooledHead(_ModernBertHeads, BertPreTrainedModel):
    """Encoder, then one pooled state per sequence (`classifier_pooling`: [CLS] or the mean of real tokens)
    -> head -> dropout -> `classifier` with `outputs` columns."""

    head_names = {"scorer.head": "head", "scorer.classifier": "classifier"}

    def __init__(self, config: ModernBertConfig, outputs: int) -> None:
        super().__init__(config)
        self.bert = self.build_encoder(add_pooling_layer=False)
        self.scorer = ModernBertClassifier(config, outputs)
        self.init_weights()

    @property
    def last_layer_reads(self) -> str:
        return "first" if self.config.classifier_pooling == "cls" else "all"

    def score(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor],
              token_type_ids: Optional[torch.Tensor], position_ids: Optional[torch.Tensor],
              output_hidden_states: bool) -> tuple[torch.Tensor, Optional[tuple[torch.Tensor, ...]]]:
        first = self.config.classifier_pooling == "cls"  # else the mean of real tokens, which reads them all
        x, batch, collect = self.bert.encode(input_ids, attention_mask, token_type_ids, position_ids,
                                             output_hidden_states=output_hidden_states,
                                             rows=PackedBatch.first_token_rows if first else None)
        logits = self.scorer(x if first else mean_pool(x, batch, attention_mask))
        return logits, (tuple(batch.unpack(h) for h in collect) if collect is not None else None)


class ModernBertForSequenceClassification(_PooledHead):
    """Sequence classification or (one label) regression on the pooled state, with HF's loss rule."""

    def __init__(self, config: ModernBertConfig) -> None:
        super().__init__(config, config.num_labels)
        self.num_labels = config.num_labels

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                token_type_ids: Optional[torch.Tensor] = None, position_ids: Optional[torch.Tensor] = None,
                labels: Optional[torch.Tensor] = None, output_hidden_states: bool = False) -> TaskOutput:
        logits, hidden = self.score(input_ids, attention_mask, token_type_ids, position_ids, output_hidden_states)
        loss = sequence_loss(logits, labels, self.config) if labels is not None else None
        return TaskOutput(loss=loss, logits=logits, hidden_states=hidden)


class ModernBertForMultipleChoice(_PooledHead):
    """Inputs [batch, choices, seq]: each (context, choice) pair is pooled and scored; softmax over choices."""

    def __init__(self, config: ModernBertConfig) -> None:
        super().__init__(config, 1)

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                token_type_ids: Optional[torch.Tensor] = None, position_ids: Optional[torch.Tensor] = None,
                labels: Optional[torch.Tensor] = None, output_hidden_states: bool = False) -> TaskOutput:
        (B, C), rows = choice_rows(input_ids, attention_mask, token_type_ids, position_ids)
        logits, hidden = self.score(*rows, output_hidden_states)
        logits = logits.reshape(B, C)
        return TaskOutput(loss=choice_loss(logits, labels), logits=logits, hidden_states=hidden)


class ModernBertForTokenClassification(_ModernBertHeads, BertForTokenClassification):
    """BERT's token head with ModernBERT's head -> dropout -> classifier on every real token."""

    head_names = {"classifier.head": "head", "classifier.classifier": "classifier"}

    def __init__(self, config: ModernBertConfig) -> None:
        super().__init__(config)
        self.dropout = nn.Identity()  # inside `classifier`, after the head, as in HF
        self.classifier = ModernBertClassifier(config, config.num_labels)
        self.init_weights()


class ModernBertForQuestionAnswering(_ModernBertHeads, BertForQuestionAnswering):
    """BERT's span head with ModernBERT's head -> dropout -> classifier giving the start and end logits."""

    head_names = {"qa_outputs.head": "head", "qa_outputs.classifier": "classifier"}

    def __init__(self, config: ModernBertConfig) -> None:
        super().__init__(config)
        self.qa_outputs = ModernBertClassifier(config, 2)
        self.init_weights()


# role "pretraining" is MLM only (ModernBERT has no sentence-pair task)
FAMILY = Family(config_class=ModernBertConfig, classes={
    "base": ModernBertModel, "masked_lm": ModernBertForMaskedLM, "pretraining": ModernBertForMaskedLM,
    "sequence_classification": ModernBertForSequenceClassification,
    "token_classification": ModernBertForTokenClassification,
    "question_answering": ModernBertForQuestionAnswering, "multiple_choice": ModernBertForMultipleChoice})

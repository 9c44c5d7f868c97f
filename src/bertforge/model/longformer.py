"""Longformer (Beltagy et al., 2020) as a configuration of the RoBERTa classes.

The network is RoBERTa's with another attention: a sliding window of `attention_window` tokens (one width per
layer) plus global attention on tokens the caller chooses, computed band by band so that memory and time grow
linearly with the length (`model/sliding_window.py`). Each layer holds Hugging Face's separate projections for
the global tokens (`query_global`, `key_global`, `value_global`). What else is Longformer's own is small: HF's
config names and defaults, its checkpoint prefix (`longformer.*`), and which tokens attend globally when the
caller does not say: `[CLS]` for sequence classification, the question (the tokens before the first separator)
for question answering, the choice (the tokens after the separators) for multiple choice, none otherwise.

Inside, the global tokens travel in the attention mask as HF's `LongformerModel` merges them: 0 padding,
1 local, 2 global (`merge_global_attention`); RoBERTa's head classes read that mask as real/padding unchanged, and
`LongformerModel.attention_pattern` hands the 2s to the encoder. There is no need to pad to a multiple of the
window as transformers does: a key past a sequence's end is simply not in any window.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, Optional

import torch

from bertforge.config import MAX_SIZES, PRESETS, ConfigError
from bertforge.model.auto import Family
from bertforge.model.packing import PackedBatch
from bertforge.model.roberta import (ROBERTA_NAMES, RobertaConfig, RobertaForMaskedLM, RobertaForMultipleChoice,
                                     RobertaForQuestionAnswering, RobertaForSequenceClassification,
                                     RobertaForTokenClassification, RobertaModel)


@dataclass
class LongformerConfig(RobertaConfig):
    """`RobertaConfig` with the defaults of HF's `LongformerConfig` and its `attention_window`: one even width
    for every layer, or a list of one per layer."""

    vocab_size: int = 30522
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    sep_token_id: int | None = 2
    attention_window: int | list[int] = 512

    model_type: ClassVar[str] = "longformer"

    def __post_init__(self) -> None:
        super().__post_init__()
        window = self.attention_window
        widths = window if isinstance(window, list) else [window]
        if isinstance(window, list) and len(window) != self.num_hidden_layers:
            raise ConfigError(f"config field 'attention_window' lists {len(window)} widths for "
                              f"{self.num_hidden_layers} layers; give one width per layer, or one for all")
        for width in widths:
            if (isinstance(width, bool) or not isinstance(width, int) or width < 2 or width % 2
                    or width > MAX_SIZES["local_attention"]):
                raise ConfigError(f"config field 'attention_window' must be an even whole number from 2 to "
                                  f"{MAX_SIZES['local_attention']:,} (or a list of them), got {width!r}")
        if self.local_attention is not None or self.relative_bias or self.rotary:
            raise ConfigError("a Longformer's layers attend through 'attention_window'; it takes no "
                              "'local_attention', rotary or relative positions")

    @property
    def sliding_windows(self) -> list[int]:
        window = self.attention_window
        return list(window) if isinstance(window, list) else [window] * self.num_hidden_layers

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> "LongformerConfig":
        """A named size (`tiny` ... `large`, BERT's shapes) as allenai's longformer-*-4096 are laid out: 4,098
        positions, one segment type, eps 1e-5; a window of 512 (base, large) or 256 (the small sizes)."""
        if name not in PRESETS:
            raise ConfigError(f"unknown Longformer preset {name!r}; choose one of {', '.join(PRESETS)}")
        layers, hidden, heads = PRESETS[name]
        fields: dict[str, Any] = dict(
            num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads, intermediate_size=4 * hidden,
            vocab_size=50265, max_position_embeddings=4098, type_vocab_size=1, layer_norm_eps=1e-5,
            attention_window=512 if name in ("base", "large") else 256)
        fields.update(overrides)
        return cls(**fields)


# RoBERTa's names under `longformer.`, and each layer's global projections
LONGFORMER_NAMES = dataclasses.replace(
    ROBERTA_NAMES,
    rules=[*ROBERTA_NAMES.rules,
           (r"encoder\.layers\.(\d+)\.attention\.query_global\.(weight|bias)",
            r"encoder.layer.\1.attention.self.query_global.\2")],
    fused=[*ROBERTA_NAMES.fused,
           (r"encoder\.layers\.(\d+)\.attention\.kv_global\.(weight|bias)",
            [r"encoder.layer.\1.attention.self.key_global.\2", r"encoder.layer.\1.attention.self.value_global.\2"])],
)

LOCAL, GLOBAL = 1, 2  # the merged mask's values for a real token (0: padding)


def merge_global_attention(input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor],
                           global_attention_mask: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """attention_mask (1 real, 0 padding) and global_attention_mask (1 global) -> one mask of 0 padding, 1 local,
    2 global, as HF's `LongformerModel` merges them."""
    if global_attention_mask is None:
        return attention_mask
    if global_attention_mask.shape != input_ids.shape:
        raise ValueError(f"global_attention_mask must have input_ids' shape {tuple(input_ids.shape)}, got "
                         f"{tuple(global_attention_mask.shape)}")
    real = torch.ones_like(input_ids) if attention_mask is None else (attention_mask != 0).long()
    return real * (LOCAL + (global_attention_mask != 0).long())


def _first_separator(input_ids: torch.Tensor, sep_token_id: Optional[int], head: str) -> torch.Tensor:
    """Each row's first separator position ([...]); a row without one cannot say where its question ends."""
    is_sep = input_ids == (-1 if sep_token_id is None else sep_token_id)
    if not bool(is_sep.any(dim=-1).all()):
        raise ValueError(f"{head}: a row of input_ids has no separator (sep_token_id {sep_token_id}) to tell which "
                         "tokens attend globally; pass global_attention_mask")
    return is_sep.int().argmax(dim=-1)


def question_tokens(input_ids: torch.Tensor, sep_token_id: Optional[int]) -> torch.Tensor:
    """HF's default for question answering: the tokens before the first separator attend globally."""
    first = _first_separator(input_ids, sep_token_id, "LongformerForQuestionAnswering")
    return (torch.arange(input_ids.shape[-1], device=input_ids.device) < first[..., None]).long()


def choice_tokens(input_ids: torch.Tensor, sep_token_id: Optional[int]) -> torch.Tensor:
    """HF's default for multiple choice: the tokens after the first two separators (`</s></s>`) attend globally."""
    first = _first_separator(input_ids, sep_token_id, "LongformerForMultipleChoice")
    return (torch.arange(input_ids.shape[-1], device=input_ids.device) > first[..., None] + 1).long()


def first_token(input_ids: torch.Tensor) -> torch.Tensor:
    """HF's default for sequence classification: `<s>` ([CLS]) attends globally."""
    mask = torch.zeros_like(input_ids)
    mask[..., 0] = 1
    return mask


class LongformerModel(RobertaModel):
    """RoBERTa's encoder with sliding-window + global attention. `global_attention_mask` (1: global) as in HF."""

    config_class = LongformerConfig
    name_map = LONGFORMER_NAMES
    hf_base_prefix = "longformer"

    def attention_pattern(self, batch: PackedBatch, attention_mask: Optional[torch.Tensor]) -> PackedBatch:
        """The merged mask's 2s become the packing's global tokens."""
        if attention_mask is None or not bool((attention_mask == GLOBAL).any()):
            return batch
        return dataclasses.replace(batch, global_tokens=batch.pack(attention_mask == GLOBAL))

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                global_attention_mask: Optional[torch.Tensor] = None, token_type_ids: Optional[torch.Tensor] = None,
                position_ids: Optional[torch.Tensor] = None, **kwargs: Any):
        merged = merge_global_attention(input_ids, attention_mask, global_attention_mask)
        return super().forward(input_ids, merged, token_type_ids, position_ids, **kwargs)


class _LongformerHeads:
    """What every Longformer head class adds to its RoBERTa class: the config, names, and Longformer's encoder."""

    config_class = LongformerConfig
    name_map = LONGFORMER_NAMES
    hf_base_prefix = "longformer"
    base_model_class = LongformerModel

    def default_global_attention(self, input_ids: torch.Tensor) -> Optional[torch.Tensor]:
        """Which tokens attend globally when the caller does not say (none, unless the head overrides this)."""
        return None

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                global_attention_mask: Optional[torch.Tensor] = None, token_type_ids: Optional[torch.Tensor] = None,
                position_ids: Optional[torch.Tensor] = None, **kwargs: Any):
        """The RoBERTa head's forward, with HF Longformer's `global_attention_mask` (1: global) merged into the
        attention mask; its other arguments (labels, start/end positions...) by name."""
        if global_attention_mask is None:
            global_attention_mask = self.default_global_attention(input_ids)
        merged = merge_global_attention(input_ids, attention_mask, global_attention_mask)
        return super().forward(input_ids, merged, token_type_ids, position_ids, **kwargs)  # type: ignore[misc]


class LongformerForMaskedLM(_LongformerHeads, RobertaForMaskedLM):
    """Encoder + `lm_head`, RoBERTa's; no global token unless asked for."""


class LongformerForSequenceClassification(_LongformerHeads, RobertaForSequenceClassification):
    """RoBERTa's classification head on `<s>`, which attends globally unless the caller says otherwise."""

    def default_global_attention(self, input_ids: torch.Tensor) -> Optional[torch.Tensor]:
        return first_token(input_ids)


class LongformerForTokenClassification(_LongformerHeads, RobertaForTokenClassification):
    pass


class LongformerForQuestionAnswering(_LongformerHeads, RobertaForQuestionAnswering):
    """The span head; the question (tokens before the first separator) attends globally unless told otherwise."""

    def default_global_attention(self, input_ids: torch.Tensor) -> Optional[torch.Tensor]:
        return question_tokens(input_ids, self.config.sep_token_id)


class LongformerForMultipleChoice(_LongformerHeads, RobertaForMultipleChoice):
    """Inputs [batch, choices, seq]; each choice's own tokens attend globally unless told otherwise."""

    def default_global_attention(self, input_ids: torch.Tensor) -> Optional[torch.Tensor]:
        return choice_tokens(input_ids, self.config.sep_token_id)


# the bare encoder keeps its pooler (HF's LongformerModel has one); role "pretraining" is MLM
FAMILY = Family(config_class=LongformerConfig, classes={
    "base": LongformerModel, "masked_lm": LongformerForMaskedLM, "pretraining": LongformerForMaskedLM,
    "sequence_classification": LongformerForSequenceClassification,
    "token_classification": LongformerForTokenClassification,
    "question_answering": LongformerForQuestionAnswering, "multiple_choice": LongformerForMultipleChoice})

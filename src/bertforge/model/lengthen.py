"""A long model from a 512-token one: Longformer's recipe (Beltagy et al., 2020, the `convert_model_to_long`
notebook) for a BERT or RoBERTa folder.

The network keeps every weight of the source; what changes is (1) the position table, which grows to
`max_positions` rows by copying the learned rows block after block (position 512 + k reads row k), so the
model starts from positions it knows rather than random ones, and (2) each layer's attention, which becomes a
sliding window of `attention_window` tokens plus global tokens whose projections (`query_global`,
`key_global`, `value_global`) start as copies of the local ones. The result is a `LongformerForMaskedLM`
folder in transformers' layout with its tokenizer (`model_max_length` raised), ready for continued MLM
pre-training (`bertforge pretrain --init-from`). On an input the window covers, it computes exactly what the
source computes: the conversion moves no number, it only makes room.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from bertforge.config import MAX_SIZES
from bertforge.settings import MAX_LENGTH, SettingError, setting

logger = logging.getLogger(__name__)

#: families the recipe applies to: BERT's encoder with absolute learned positions
SOURCE_FAMILIES = ("bert", "roberta")


@dataclass
class LengthenSettings:
    """`bertforge lengthen`: which 512-token folder to stretch, to how many positions, with which window."""

    model: str = setting(help="BERT or RoBERTa folder (HF layout, with its tokenizer) to lengthen", metavar="DIR",
                         kind="existing_dir")
    output: str = setting(help="new (or empty) folder for the Longformer", metavar="DIR")
    max_positions: int = setting(4096, "tokens the long model reads (its position table, past the source's own "
                                 "positions, repeats the learned rows block by block)", positive=True,
                                 maximum=MAX_LENGTH)
    attention_window: int = setting(512, "tokens each token attends to (an even number; half on each side)",
                                    positive=True, maximum=MAX_LENGTH)

    def __post_init__(self) -> None:
        if self.attention_window % 2:
            raise SettingError("{attention_window} must be even (half the window on each side of a token), got "
                               "{got}", owner=LengthenSettings, got=self.attention_window)


def lengthen(settings: LengthenSettings, say=logger.info) -> dict[str, Any]:
    """Write the Longformer of `settings.model` to `settings.output`; returns what was done (for the report)."""
    from bertforge.checkpoint import newly_initialized, quiet_loading
    from bertforge.model.auto import folder_family
    from bertforge.model.longformer import LongformerForMaskedLM
    from bertforge.tokenization import load_tokenizer
    source_dir, out = Path(settings.model), Path(settings.output)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise SettingError("{output} must be a new or empty folder: {got} holds files", owner=LengthenSettings,
                           got=str(out))
    source_family = folder_family(source_dir)
    model_type = source_family.config_class.model_type
    if model_type not in SOURCE_FAMILIES:
        raise SettingError("{model} is a " + model_type + " folder; the Longformer recipe converts "
                           + " or ".join(SOURCE_FAMILIES) + " folders", owner=LengthenSettings)
    with quiet_loading():
        source = source_family.model_class("masked_lm").from_pretrained(source_dir)
    fresh = newly_initialized(source)
    tokenizer = load_tokenizer(source_dir)
    config = long_config(source.config, settings.max_positions, settings.attention_window,
                         sep_token_id=tokenizer.sep_token_id, where=str(source_dir))
    target = LongformerForMaskedLM(config)
    copy_weights(source, target)
    target.save_pretrained(out)
    tokenizer.model_max_length = settings.max_positions
    tokenizer.save_pretrained(out)
    if fresh:
        say(f"{source_dir} has no MLM head ({', '.join(fresh[:2])}...): it starts freshly initialised; continued "
            "MLM pre-training trains it")
    say(f"{out}: a Longformer of {settings.max_positions:,} positions (window {settings.attention_window}) from "
        f"{source_dir} ({model_type}, {source.config.max_position_embeddings} position rows)")
    return {"output": str(out), "max_positions": settings.max_positions, "source_type": model_type,
            "attention_window": settings.attention_window, "fresh_head": bool(fresh)}


def long_config(config, max_positions: int, attention_window: int, *, sep_token_id: int | None, where: str = ""):
    """The source's config as a `LongformerConfig` with `max_positions` real positions (plus RoBERTa's offset:
    the padding index and the one below it), refusing what Longformer's layers cannot hold."""
    from bertforge.model.longformer import LongformerConfig
    where = f"{where}/config.json" if where else "the source config"
    modern = config.modern_options_in_use()
    if modern or config.embedding_projection or config.layer_sharing != "none" or not config.absolute_positions:
        raise SettingError("{model}: " + where + " uses " + (", ".join(modern) or "embedding_size/layer_sharing")
                           + "; the Longformer recipe needs BERT's plain layers with learned absolute positions",
                           owner=LengthenSettings)
    head_act = config.head_act or config.hidden_act
    if head_act != "gelu":
        raise SettingError("{model}: " + where + " field 'hidden_act' is " + repr(head_act) + "; Longformer's MLM "
                           "head computes gelu, so the converted head would differ from the source's",
                           owner=LengthenSettings)
    data = {k: v for k, v in config.to_dict().items() if k in LongformerConfig.field_names()}
    offset = data.get("pad_token_id", 0) + 1  # Longformer numbers positions from padding_idx + 1, as RoBERTa
    rows = max_positions + offset
    if rows > MAX_SIZES["max_position_embeddings"]:
        raise SettingError("{max_positions} is too large: {got:,} rows", owner=LengthenSettings, got=rows)
    data.update(max_position_embeddings=rows, attention_window=attention_window, sep_token_id=sep_token_id,
                id2label=None)
    return LongformerConfig.from_dict(data)


def source_offset(model) -> int:
    """Row of the source's position table that position 0 reads: RoBERTa's padding_idx + 1, BERT's 0."""
    return model.config.pad_token_id + 1 if model.config.model_type == "roberta" else 0


def long_positions(table: torch.Tensor, offset: int, rows: int, new_offset: int) -> torch.Tensor:
    """A table of `rows` rows whose position p (row new_offset + p) is the source's position p mod n (row
    offset + p mod n, n the source's positions): the learned rows repeated block by block, as Longformer's
    notebook does. The rows below new_offset (RoBERTa's padding row and the one below it) are the source's own
    when it has them, else zero (the padding row of an `nn.Embedding(padding_idx=...)`)."""
    learned = table[offset:]
    out = torch.zeros(rows, table.shape[1], dtype=table.dtype)
    if offset == new_offset:
        out[:offset] = table[:offset]
    positions = torch.arange(rows - new_offset)
    out[new_offset:] = learned[positions % learned.shape[0]]
    return out


@torch.no_grad()
def copy_weights(source, target) -> None:
    """Every weight of `source` (a BERT/RoBERTa MLM model) into `target` (its Longformer), positions stretched and
    each layer's global projections copied from the local ones."""
    state = source.state_dict()
    key = "bert.embeddings.position_embeddings.weight"
    rows = target.config.max_position_embeddings
    state[key] = long_positions(state[key], source_offset(source), rows, target.config.pad_token_id + 1)
    hidden = target.config.hidden_size
    for i in range(target.config.num_hidden_layers):
        prefix = f"bert.encoder.layers.{i}.attention."
        for kind in ("weight", "bias"):
            qkv = state[prefix + "qkv." + kind]
            state[prefix + "query_global." + kind] = qkv[:hidden].clone()
            state[prefix + "kv_global." + kind] = qkv[hidden:].clone()
    missing, unexpected = target.load_state_dict(state, strict=False)
    unexpected = [k for k in unexpected if not k.startswith("bert.pooler.")]  # the MLM class has no pooler
    if missing or unexpected:
        raise RuntimeError(f"lengthen: weights that do not carry over: missing {missing[:4]}, unexpected "
                           f"{unexpected[:4]}")

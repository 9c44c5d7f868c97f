"""A warm-started encoder–decoder (Rothe et al., 2020) trained as a conditional masked LM (Mask-Predict,
Ghazvininejad et al., 2019).

Both halves are bertforge's BERT: the encoder a `BertModel`, the decoder a `BertLMHeadModel` — BERT with
cross-attention in every layer (`config.add_cross_attention`) and the MLM head. Either can start from any
BERT-family checkpoint; only the cross-attention blocks (and an MLM head the checkpoint lacks) are new.
Mask-Predict adds a target-length predictor: a classifier over lengths 0..`max_target_length` on the
mean of the encoder's states, trained beside the decoder's loss (weight 0.1, as in the paper).

On disk this is Hugging Face's `EncoderDecoderModel` layout: `config.json` with `model_type: encoder-decoder`
and the two sub-configs, weights `encoder.*` and `decoder.bert.*` / `decoder.cls.*`, so `transformers` loads
it. Two things do not carry over: the length predictor (`length_predictor.*`, which transformers reports as
unused), and the decoder's bidirectional self-attention — transformers runs a decoder left to right, which
our decoder does only when asked (`causal=True`).
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch import nn

from bertforge.atomic import atomic_save_safetensors, atomic_write_text
from bertforge.checkpoint import SAFE_WEIGHTS
from bertforge.config import CONFIG_NAME, BertConfig, ConfigError, read_config_json
from bertforge.model.bert import BertForMaskedLM, BertModel
from bertforge.model.outputs import ModelOutput

LENGTH_LOSS_WEIGHT = 0.1  # Mask-Predict's weight of the length loss
MODEL_TYPE = "encoder-decoder"
MAX_TARGET_LENGTH = 1 << 16  # the length predictor has a class per length
logger = logging.getLogger(__name__)


class BertLMHeadModel(BertForMaskedLM):
    """The decoder: BERT with cross-attention to the encoder in every layer, and the MLM head (HF's
    `BertLMHeadModel` names). Self-attention runs both ways unless `causal=True` (transformers' behaviour)."""

    def __init__(self, config: BertConfig) -> None:
        if not config.add_cross_attention:
            config = config.replace(is_decoder=True, add_cross_attention=True)
        super().__init__(config)


@dataclass
class EncoderDecoderConfig:
    encoder: BertConfig
    decoder: BertConfig
    max_target_length: int = 64                  # the length predictor's classes are 0..max_target_length
    decoder_start_token_id: Optional[int] = None  # [CLS]: what transformers' generate() starts a target with

    model_type = MODEL_TYPE

    def __post_init__(self) -> None:
        self.decoder = self.decoder.replace(is_decoder=True, add_cross_attention=True)
        if self.encoder.hidden_size != self.decoder.hidden_size:
            raise ConfigError(f"the encoder's hidden_size ({self.encoder.hidden_size}) and the decoder's "
                              f"({self.decoder.hidden_size}) differ; warm-start both from checkpoints of one width")
        if (not isinstance(self.max_target_length, int) or isinstance(self.max_target_length, bool)
                or not 1 <= self.max_target_length <= MAX_TARGET_LENGTH):
            raise ConfigError(f"max_target_length must be a whole number from 1 to {MAX_TARGET_LENGTH:,}, got "
                              f"{self.max_target_length!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"model_type": MODEL_TYPE, "is_encoder_decoder": True, "architectures": ["EncoderDecoderModel"],
                "encoder": self.encoder.to_dict(), "decoder": self.decoder.to_dict(),
                "decoder_start_token_id": self.decoder_start_token_id, "pad_token_id": self.decoder.pad_token_id,
                "max_target_length": self.max_target_length}

    @classmethod
    def from_json_file(cls, path: str | Path) -> "EncoderDecoderConfig":
        path = Path(path)
        data = read_config_json(path)
        if data.get("model_type") != MODEL_TYPE:
            raise ConfigError(f"{path}: not an encoder-decoder config (model_type {data.get('model_type')!r})")
        parts = {}
        for half in ("encoder", "decoder"):
            sub = data.get(half)
            if not isinstance(sub, dict):
                raise ConfigError(f"{path}: field {half!r} must hold the {half}'s config")
            if sub.get("model_type", "bert") != "bert":
                raise ConfigError(f"{path}: the {half} is a {sub.get('model_type')!r} model; bertforge's "
                                  "encoder-decoder is made of BERT checkpoints")
            try:
                parts[half] = BertConfig.from_dict(sub)
            except (ConfigError, TypeError) as err:
                raise ConfigError(f"{path}: {half}: {err}") from None
        return cls(parts["encoder"], parts["decoder"], data.get("max_target_length", 64),
                   data.get("decoder_start_token_id"))


@dataclass
class Seq2SeqOutput(ModelOutput):
    loss: Optional[torch.Tensor] = None
    logits: Optional[torch.Tensor] = None          # [batch, target, vocab], or [labelled tokens, vocab]
    length_logits: Optional[torch.Tensor] = None   # [batch, max_target_length + 1]
    token_loss: Optional[torch.Tensor] = None
    length_loss: Optional[torch.Tensor] = None


class EncoderDecoderModel(nn.Module):
    """Encoder + decoder + length predictor; `forward` is the conditional MLM's training step."""

    config_class = EncoderDecoderConfig

    def __init__(self, config: EncoderDecoderConfig) -> None:
        super().__init__()
        self.config = config
        self.encoder = _encoder(config.encoder)
        self.decoder = BertLMHeadModel(config.decoder)
        self.length_predictor = nn.Linear(config.encoder.hidden_size, config.max_target_length + 1)
        nn.init.normal_(self.length_predictor.weight, std=config.encoder.initializer_range)
        nn.init.zeros_(self.length_predictor.bias)

    # ---- the network --------------------------------------------------------------------------------------------
    def encode(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        return self.encoder(input_ids, attention_mask=attention_mask).last_hidden_state

    def predict_length(self, states: torch.Tensor, attention_mask: Optional[torch.Tensor]) -> torch.Tensor:
        """Logits over target lengths 0..max_target_length from the mean of the real tokens' states."""
        if attention_mask is None:
            pooled = states.mean(1)
        else:
            keep = attention_mask.to(states.dtype)[..., None]
            pooled = (states * keep).sum(1) / keep.sum(1).clamp(min=1)
        return self.length_predictor(pooled)

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                decoder_input_ids: Optional[torch.Tensor] = None,
                decoder_attention_mask: Optional[torch.Tensor] = None, labels: Optional[torch.Tensor] = None,
                target_lengths: Optional[torch.Tensor] = None, causal: bool = False,
                encoder_hidden_states: Optional[torch.Tensor] = None) -> Seq2SeqOutput:
        """With `labels` (-100 where nothing is predicted) the decoder's head runs only on labelled tokens and
        the loss is their cross-entropy, plus 0.1 x the length loss when `target_lengths` are given."""
        if decoder_input_ids is None:
            raise ValueError("decoder_input_ids are required")
        states = self.encode(input_ids, attention_mask) if encoder_hidden_states is None else encoder_hidden_states
        out = self.decoder(decoder_input_ids, attention_mask=decoder_attention_mask, labels=labels, causal=causal,
                           encoder_hidden_states=states, encoder_attention_mask=attention_mask)
        length_logits = self.predict_length(states, attention_mask)
        loss, length_loss = out.loss, None
        if target_lengths is not None:
            length_loss = F.cross_entropy(length_logits.float(), target_lengths.clamp(max=self.config.max_target_length))
            loss = length_loss * LENGTH_LOSS_WEIGHT if loss is None else loss + LENGTH_LOSS_WEIGHT * length_loss
        return Seq2SeqOutput(loss=loss, logits=out.logits, length_logits=length_logits, token_loss=out.loss,
                             length_loss=length_loss)

    # ---- checkpoints ----------------------------------------------------------------------------------------------
    @classmethod
    def from_encoder_decoder_pretrained(cls, encoder: str | Path, decoder: str | Path,
                                        max_target_length: int = 64) -> "EncoderDecoderModel":
        """Warm-start both halves from BERT checkpoints (Rothe et al.'s BERT2BERT when they are the same)."""
        from bertforge.checkpoint import load_hf_state_dict, newly_initialized, quiet_loading, read_checkpoint
        from bertforge.model.auto import read_model_type
        for half, folder in (("encoder", encoder), ("decoder", decoder)):
            if read_model_type(folder) != "bert":
                raise ConfigError(f"{folder}: a {read_model_type(folder)!r} checkpoint; the {half} of an "
                                  "encoder-decoder must be a BERT checkpoint")
        # each half's config.json is checked against its weights before anything is built
        enc_cfg, enc_state, enc_source = read_checkpoint(_encoder, encoder, config_class=BertConfig)
        dec_cfg, dec_state, dec_source = read_checkpoint(BertLMHeadModel, decoder, config_class=BertConfig)
        cls_id = _cls_token_id(Path(decoder))
        model = cls(EncoderDecoderConfig(enc_cfg, dec_cfg, max_target_length, cls_id))
        with quiet_loading():  # what is new here is expected: said once, below
            load_hf_state_dict(model.encoder, enc_state, source=enc_source)
            load_hf_state_dict(model.decoder, dec_state, source=dec_source)
        new = newly_initialized(model.decoder)
        head = [n for n in new if "crossattention" not in n]
        logger.info("warm start: the decoder's cross-attention (%d layers)%s is new", dec_cfg.num_hidden_layers,
                    " and its MLM head" if head else "")
        return model

    @classmethod
    def from_pretrained(cls, path: str | Path) -> "EncoderDecoderModel":
        """Load a folder written by `save_pretrained` or by transformers' `EncoderDecoderModel`."""
        from bertforge.checkpoint import (CheckpointError, check_weights_fit, find_weights, load_hf_state_dict,
                                          read_tensors, read_weight_shapes, resolve_folder)
        folder = resolve_folder(path)
        config_file = folder / CONFIG_NAME
        config = EncoderDecoderConfig.from_json_file(config_file)
        weights = find_weights(folder)
        shapes, source = read_weight_shapes(weights), weights.source
        # the config's sizes against the weights' shapes, before anything is built
        for half, build in (("encoder", _encoder), ("decoder", BertLMHeadModel)):
            part = {key.partition(".")[2]: shape for key, shape in shapes.items() if key.startswith(half + ".")}
            check_weights_fit(build, getattr(config, half), part, f"{source} ({half})", f"{config_file} ({half})")
        lengths = shapes.get("length_predictor.weight")
        if lengths is not None and lengths[0] != config.max_target_length + 1:
            raise CheckpointError(f"{config_file}: 'max_target_length' is {config.max_target_length} but the weights "
                                  f"({source}) hold {lengths[0] - 1} (length_predictor.weight has shape {lengths})")
        model = cls(config)
        state = read_tensors(weights)
        halves: dict[str, dict[str, torch.Tensor]] = {"encoder": {}, "decoder": {}}
        length = {}
        for key, tensor in state.items():
            head, _, rest = key.partition(".")
            if head in halves:
                halves[head][rest] = tensor
            elif head == "length_predictor":
                length[rest] = tensor
            elif head != "enc_to_dec_proj":
                raise CheckpointError(f"{source}: key {key!r} belongs to neither the encoder nor the decoder")
        for half, tensors in halves.items():
            if not tensors:
                raise CheckpointError(f"{source}: no {half} weights ({half}.*)")
            load_hf_state_dict(getattr(model, half), tensors, source=f"{source} ({half})")
        if length:
            model.length_predictor.load_state_dict(length)
        return model

    def save_pretrained(self, directory: str | Path) -> Path:
        from bertforge.checkpoint import internal_to_hf_state_dict
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        tensors = {f"encoder.{k}": v for k, v in internal_to_hf_state_dict(self.encoder).items()}
        tensors.update({f"decoder.{k}": v for k, v in internal_to_hf_state_dict(self.decoder).items()})
        tensors.update({f"length_predictor.{k}": v.detach().contiguous()
                        for k, v in self.length_predictor.state_dict().items()})
        atomic_save_safetensors(tensors, directory / SAFE_WEIGHTS, metadata={"format": "pt"})
        atomic_write_text(directory / CONFIG_NAME, json.dumps(self.config.to_dict(), indent=2, sort_keys=True) + "\n")
        return directory

    def num_parameters(self) -> int:
        return sum(p.numel() for p in {id(p): p for p in self.parameters()}.values())

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device


def _encoder(config: BertConfig) -> BertModel:
    """The encoder half, as the model builds it (no pooler)."""
    return BertModel(config, add_pooling_layer=False)


def _cls_token_id(folder: Path) -> Optional[int]:
    """The decoder's start token ([CLS]) from the folder's tokenizer, for transformers' `decoder_start_token_id`."""
    try:
        from bertforge.tokenization import load_tokenizer
        return int(load_tokenizer(folder).cls_token_id)
    except Exception:  # no tokenizer beside the weights: transformers then needs it set by hand
        return None

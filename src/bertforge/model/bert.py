"""The public BERT classes: `BertModel`, `BertForMaskedLM`, `BertForPreTraining`.

Read top to bottom: the shared base (init, save/load, size and FLOP counts), the encoder model, then the
pre-training models. Every class works on packed tokens inside (see `packing.py`) and returns padded
[batch, seq, ...] tensors outside, so callers see the same shapes as in `transformers`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, ClassVar, Optional

import torch
import torch.nn.functional as F
from torch import nn

from bertforge.config import BertConfig
from bertforge.model.cross_attention import Memory
from bertforge.model.embeddings import Embeddings
from bertforge.model.encoder import Encoder
from bertforge.model.flops import count_flops
from bertforge.model.heads import MaskedLMHead, NextSentenceHead, Pooler
from bertforge.model.kernels import FAST, Kernels
from bertforge.model.outputs import BertForPreTrainingOutput, BertModelOutput, MaskedLMOutput
from bertforge.model.packing import PackedBatch
from bertforge.model.relative_bias import RelativePositionBias


class BertPreTrainedModel(nn.Module):
    """What every model class shares: weight init, checkpoints in the HF layout, size and FLOP counts."""

    config_class: ClassVar[type[BertConfig]] = BertConfig
    # the HF name of the encoder's sub-module in head classes ("bert.embeddings..."), "" in the bare model
    base_model_prefix: ClassVar[str] = "bert"
    # internal -> HF name prefixes of this class's heads (the base model's map lives in checkpoint.py)
    head_names: ClassVar[dict[str, str]] = {}
    # the encoder class head classes build (a family sets its own, e.g. RoBERTa's position numbering)
    base_model_class: ClassVar[Optional[type]] = None
    _kernels: Kernels = FAST  # the implementations of the speed-sensitive parts (`model/kernels.py`)

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.loading_info: dict[str, list[str]] = {}

    # ---- initialisation -----------------------------------------------------------------------------------
    def init_weights(self) -> None:
        self.apply(self._init_module)

    def _init_module(self, module: nn.Module) -> None:
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.padding_idx is not None:
                with torch.no_grad():
                    module.weight[module.padding_idx].zero_()
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            if module.bias is not None:  # bias-free norms (`norm_bias=False`)
                nn.init.zeros_(module.bias)
        elif isinstance(module, MaskedLMHead) and module.bias is not None:
            nn.init.zeros_(module.bias)
        elif isinstance(module, RelativePositionBias):
            nn.init.normal_(module.weight, mean=0.0, std=std)

    # ---- checkpoints ------------------------------------------------------------------------------------------
    @classmethod
    def from_pretrained(cls, path: str | Path, config: Optional[BertConfig] = None, *,
                        strict: bool = False, **config_overrides: Any):
        """Load an HF-layout folder (`config.json` + `model.safetensors`, or shards listed in an index).

        Parameters the folder lacks (e.g. the MLM head of a sentence-embedding model) are freshly
        initialised and listed in `model.loading_info["newly_initialized"]` (and logged); `strict=True`
        makes that an error instead.
        """
        from bertforge.checkpoint import load_pretrained
        return load_pretrained(cls, path, config=config, strict=strict, **config_overrides)

    def save_pretrained(self, directory: str | Path) -> Path:
        """Write `config.json` + `model.safetensors` with HF's parameter names (loads in `transformers`)."""
        from bertforge.checkpoint import save_pretrained
        return save_pretrained(self, directory)

    # ---- sizes -------------------------------------------------------------------------------------------------
    def num_parameters(self, exclude_embeddings: bool = False) -> int:
        params = {id(p): p for p in self.parameters()}  # tied weights once
        if exclude_embeddings:
            for module in self.modules():
                if isinstance(module, nn.Embedding):
                    params.pop(id(module.weight), None)
        return sum(p.numel() for p in params.values())

    def flops_per_token(self, seq_len: int = 128, masked_fraction: float = 0.15, training: bool = True) -> float:
        """Matmul FLOPs per real token for full sequences of `seq_len` (3x forward when training)."""
        heads = self._flop_heads()
        n_masked = masked_fraction * seq_len if "mlm" in heads else 0.0
        read = {"all": None, "first": 1.0, "masked": n_masked + ("pooler" in heads)}[self.last_layer_reads]
        total = count_flops(self.config, [seq_len], n_masked=n_masked, pooler="pooler" in heads,
                            nsp="nsp" in heads, training=training, last_layer_rows=read)
        return total / seq_len

    def _flop_heads(self) -> set[str]:
        return set()

    @property
    def last_layer_reads(self) -> str:
        """Which rows of the last layer the heads read, so the only ones it computes: "all", "first" (the
        first token of each sequence) or "masked" (the MLM's rows, and [CLS] for a sentence-pair head)."""
        return "all"

    @property
    def kernels(self) -> Kernels:
        return self._kernels

    def set_kernels(self, kernels: Kernels) -> "BertPreTrainedModel":
        """Use `kernels` in every part of this model (e.g. `Kernels.reference()`: the plain padded path)."""
        for module in self.modules():
            if isinstance(module, BertPreTrainedModel):
                module._kernels = kernels
            elif hasattr(type(module), "kernels"):  # the parts with a choice: attention, dropout, MLM decoder
                module.kernels = kernels
        return self

    def build_encoder(self, add_pooling_layer: bool) -> "BertModel":
        return (self.base_model_class or BertModel)(self.config, add_pooling_layer=add_pooling_layer)

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.parameters()).dtype


class BertModel(BertPreTrainedModel):
    """The encoder: embeddings -> N post-LN layers -> (pooler). Outputs `BertModelOutput`."""

    base_model_prefix = ""

    def __init__(self, config: BertConfig, add_pooling_layer: bool = True) -> None:
        super().__init__(config)
        self.embeddings = Embeddings(config)
        self.encoder = Encoder(config)
        self.pooler = Pooler(config) if add_pooling_layer else None
        self.init_weights()

    def _flop_heads(self) -> set[str]:
        return {"pooler"} if self.pooler is not None else set()

    def default_position_ids(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor]) -> torch.Tensor:
        """0, 1, 2, ... per row; families with another convention (RoBERTa's offset) override this."""
        # spelled as ONNX Runtime's embedding fusion expects: arange(seq) expanded to the ids' shape
        return torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0).expand_as(input_ids)

    def encode(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
               token_type_ids: Optional[torch.Tensor] = None, position_ids: Optional[torch.Tensor] = None,
               causal: bool = False, unpad: bool = True, output_hidden_states: bool = False,
               encoder_hidden_states: Optional[torch.Tensor] = None, encoder_attention_mask: Optional[torch.Tensor] = None,
               rows: Optional[Callable[[PackedBatch], torch.Tensor]] = None,
               ) -> tuple[torch.Tensor, PackedBatch, list[torch.Tensor] | None]:
        """Run the encoder and stay packed: (hidden [tokens, H], the packing, packed hidden states or None).

        Heads use this to pick rows ([CLS], masked tokens) without ever re-padding the whole batch: `rows`,
        given the packing, names the packed rows a head reads (e.g. `PackedBatch.first_token_rows`); the
        hidden states returned are then those rows only, in that order, and the last layer computes nothing
        else (`Encoder.forward`). A decoder (`config.add_cross_attention`) also attends to
        `encoder_hidden_states` [batch, source, H].
        """
        x, batch, collect = self._encode_in_layout(input_ids, attention_mask, token_type_ids, position_ids, causal,
                                                   unpad, output_hidden_states, encoder_hidden_states,
                                                   encoder_attention_mask, rows)
        if batch.grid and rows is None:  # the grid layout's [batch, seq, H] as the packed rows the heads read
            x = x.flatten(0, 1)
        return x, batch, collect

    def _encode_in_layout(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor],
                          token_type_ids: Optional[torch.Tensor], position_ids: Optional[torch.Tensor],
                          causal: bool, unpad: bool, output_hidden_states: bool,
                          encoder_hidden_states: Optional[torch.Tensor], encoder_attention_mask: Optional[torch.Tensor],
                          rows: Optional[Callable[[PackedBatch], torch.Tensor]],
                          ) -> tuple[torch.Tensor, PackedBatch, list[torch.Tensor] | None]:
        """`encode`, with the last hidden states as the encoder gives them: [batch, seq, H] in the grid layout."""
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must be [batch, seq], got shape {tuple(input_ids.shape)}")
        B, L = input_ids.shape
        if L > self.config.max_position_embeddings:
            raise ValueError(f"sequence length {L} exceeds max_position_embeddings "
                             f"({self.config.max_position_embeddings}); truncate the input")
        kernels = self.kernels
        grid = kernels.grid_layout and self._grid_capable(causal, encoder_hidden_states is not None)
        batch = PackedBatch.from_mask(attention_mask, B, L, input_ids.device, causal=causal,
                                      unpad=unpad and kernels.unpad, max_groups=kernels.attention_groups, grid=grid)
        batch = self.attention_pattern(batch, attention_mask)
        if position_ids is None:
            position_ids = self.default_position_ids(input_ids, attention_mask)
        if grid:  # the embeddings read [batch, seq] as given; the encoder returns [batch, seq, H]
            positions = None
            x = self.embeddings(input_ids, position_ids, token_type_ids)
        else:
            positions = batch.pack(position_ids)
            x = self.embeddings(batch.pack(input_ids), positions,
                                batch.pack(token_type_ids) if token_type_ids is not None else None)
        collect: list[torch.Tensor] | None = [] if output_hidden_states else None
        memory = None
        if encoder_hidden_states is not None:
            if not self.config.add_cross_attention:
                raise ValueError("encoder_hidden_states given, but this model has no cross-attention "
                                 "(config.add_cross_attention is false)")
            memory = Memory.of(encoder_hidden_states, encoder_attention_mask)
        x = self.encoder(x, batch, collect, positions=positions, memory=memory,  # rotary reads the positions
                         rows=rows(batch) if rows is not None else None)
        return x, batch, collect

    def attention_pattern(self, batch: PackedBatch, attention_mask: Optional[torch.Tensor]) -> PackedBatch:
        """The packing as the layers attend with it. A family whose mask says more than real/padding overrides
        this (Longformer: which tokens attend globally)."""
        return batch

    def _grid_capable(self, causal: bool, cross_attention: bool) -> bool:
        """Whether `Kernels.grid_layout` applies: attention with no positions or masks of its own."""
        config = self.config
        return not (causal or cross_attention or config.rotary or config.relative_bias
                    or config.local_attention is not None or config.sliding_windows is not None
                    or config.block_sparse is not None)

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                token_type_ids: Optional[torch.Tensor] = None, position_ids: Optional[torch.Tensor] = None,
                output_hidden_states: bool = False, causal: bool = False, unpad: bool = True) -> BertModelOutput:
        x, batch, collect = self._encode_in_layout(input_ids, attention_mask, token_type_ids, position_ids, causal,
                                                   unpad, output_hidden_states, None, None, None)
        # the grid layout's output is already [batch, seq, H]: an export's token vectors are the last layer's
        last_hidden_state = x if batch.grid else batch.unpack(x)
        pooled = self.pooler(last_hidden_state[:, 0] if batch.grid else x[batch.first_token_rows()]
                             ) if self.pooler is not None else None
        hidden_states = tuple(batch.unpack(h) for h in collect) if collect is not None else None
        return BertModelOutput(last_hidden_state=last_hidden_state, pooler_output=pooled, hidden_states=hidden_states)


def _mlm_rows(labels: Optional[torch.Tensor], prediction_positions: Optional[torch.Tensor],
              attention_mask: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """Which [batch, seq] positions the decoder runs on: the labelled ones, or those asked for."""
    positions = prediction_positions if prediction_positions is not None else (
        labels != -100 if labels is not None else None)
    if positions is not None and attention_mask is not None and bool((positions & ~attention_mask.bool()).any()):
        raise ValueError("MLM labels/prediction positions fall on padding (attention_mask == 0)")
    return positions


class BertForMaskedLM(BertPreTrainedModel):
    """Encoder (no pooler) + MLM head. With labels, the decoder runs only on labelled positions."""

    head_names = {"mlm.transform": "cls.predictions.transform.dense", "mlm.norm": "cls.predictions.transform.LayerNorm",
                  "mlm.bias": "cls.predictions.bias"}

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config)
        self.bert = self.build_encoder(add_pooling_layer=False)
        self.mlm = MaskedLMHead(config, self.bert.embeddings.word_embeddings)
        self.init_weights()

    def _flop_heads(self) -> set[str]:
        return {"mlm"}

    last_layer_reads = "masked"

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                token_type_ids: Optional[torch.Tensor] = None, position_ids: Optional[torch.Tensor] = None,
                labels: Optional[torch.Tensor] = None, prediction_positions: Optional[torch.Tensor] = None,
                output_hidden_states: bool = False, causal: bool = False, unpad: bool = True,
                encoder_hidden_states: Optional[torch.Tensor] = None,
                encoder_attention_mask: Optional[torch.Tensor] = None) -> MaskedLMOutput:
        positions = _mlm_rows(labels, prediction_positions, attention_mask)
        x, batch, collect = self.bert.encode(input_ids, attention_mask, token_type_ids, position_ids,
                                             causal=causal, unpad=unpad, output_hidden_states=output_hidden_states,
                                             encoder_hidden_states=encoder_hidden_states,
                                             encoder_attention_mask=encoder_attention_mask,
                                             rows=None if positions is None else lambda b: b.rows_of(positions))
        logits = self.mlm(batch.unpack(x) if positions is None else x)
        loss = None
        if labels is not None:
            target = labels[positions] if positions is not None else labels.reshape(-1)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), target, ignore_index=-100)
        hidden_states = tuple(batch.unpack(h) for h in collect) if collect is not None else None
        return MaskedLMOutput(loss=loss, logits=logits, hidden_states=hidden_states)


class BertForPreTraining(BertPreTrainedModel):
    """Encoder + pooler + MLM head + next-sentence head; loss = MLM + NSP, as in the paper."""

    head_names = {**BertForMaskedLM.head_names, "nsp.classifier": "cls.seq_relationship"}

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config)
        self.bert = self.build_encoder(add_pooling_layer=True)
        self.mlm = MaskedLMHead(config, self.bert.embeddings.word_embeddings)
        self.nsp = NextSentenceHead(config)
        self.init_weights()

    def _flop_heads(self) -> set[str]:
        return {"mlm", "pooler", "nsp"}

    last_layer_reads = "masked"

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                token_type_ids: Optional[torch.Tensor] = None, position_ids: Optional[torch.Tensor] = None,
                labels: Optional[torch.Tensor] = None, next_sentence_label: Optional[torch.Tensor] = None,
                prediction_positions: Optional[torch.Tensor] = None, output_hidden_states: bool = False,
                causal: bool = False, unpad: bool = True) -> BertForPreTrainingOutput:
        positions = _mlm_rows(labels, prediction_positions, attention_mask)
        # the heads read the [CLS] rows (one per sequence, first) and the masked rows: the last layer runs on those
        rows = None if positions is None else lambda b: torch.cat([b.first_token_rows(), b.rows_of(positions)])
        x, batch, collect = self.bert.encode(input_ids, attention_mask, token_type_ids, position_ids,
                                             causal=causal, unpad=unpad, output_hidden_states=output_hidden_states,
                                             rows=rows)
        if positions is None:
            first, prediction_logits = x[batch.first_token_rows()], self.mlm(batch.unpack(x))
        else:
            first, prediction_logits = x[:batch.batch_size], self.mlm(x[batch.batch_size:])
        nsp_logits = self.nsp(self.bert.pooler(first))

        mlm_loss = nsp_loss = loss = None
        if labels is not None:
            target = labels[positions] if positions is not None else labels.reshape(-1)
            mlm_loss = F.cross_entropy(prediction_logits.reshape(-1, prediction_logits.shape[-1]).float(), target,
                                       ignore_index=-100)
            loss = mlm_loss
        if next_sentence_label is not None:
            nsp_loss = F.cross_entropy(nsp_logits.float(), next_sentence_label.reshape(-1))
            loss = nsp_loss if loss is None else loss + nsp_loss
        hidden_states = tuple(batch.unpack(h) for h in collect) if collect is not None else None
        return BertForPreTrainingOutput(loss=loss, prediction_logits=prediction_logits,
                                        seq_relationship_logits=nsp_logits, mlm_loss=mlm_loss, nsp_loss=nsp_loss,
                                        hidden_states=hidden_states)

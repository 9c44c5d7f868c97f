"""XLNet (Yang et al., 2019): relative attention with two streams, for permutation language modelling.

What XLNet shares with BERT is small: a word-embedding table, post-LN layers and BERT's feed-forward block
(`FeedForward`, here also dropped inside as XLNet does). Its own, written out below in reading order:

- no absolute positions: each layer scores a query i against a key j by content, ``(q_i + r_w_bias) . k_j``,
  plus position, ``(q_i + r_r_bias) . R_{i-j}`` where ``R`` projects a fixed sinusoid of the offset i - j
  (`relative_positional_encoding`, then `relative_shift` picks offset i - j out of the table of all offsets),
  plus segment, ``(q_i + r_s_bias) . seg_embed[same or different segment]``: segments are relative too, so
  any token_type ids work (XLNet's tokenizer gives A = 0, B = 1, <cls> = 2);
- two streams: the content stream h (token i sees token i) and, when `target_mapping` names the tokens to
  predict, the query stream g, which starts from the learned `mask_emb` and sees the content of the other
  tokens only, never its own (`attention_masks`); both share every weight. `perm_mask[b, i, j] = 1` hides
  token j from token i, which is how a factorisation order is imposed;
- padding sits on the LEFT (the sequence's summary is its last token, <cls>), masked by `attention_mask`
  (1 = real) or transformers' `input_mask` (1 = padding).

Parameter names are transformers' (`transformer.layer.N.rel_attn.q`...), so checkpoints move both ways.
Segment recurrence (Transformer-XL's memory): with `use_mems=True` a call returns each layer's input states as
`mems` (the last `mem_len` tokens, config.json's field), and the next segment's call attends to them as well,
at offsets that continue across the boundary; no gradient flows into the memory.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Optional

import torch
import torch.nn.functional as F
from torch import nn

from bertforge.checkpoint import NameMap
from bertforge.config import SUPPORTED_ACTIVATIONS, BertConfig, ConfigError
from bertforge.model.auto import Family
from bertforge.model.bert import BertPreTrainedModel
from bertforge.model.dropout import Dropout
from bertforge.model.feed_forward import FeedForward, activation
from bertforge.model.outputs import BertModelOutput, MaskedLMOutput, QuestionAnsweringOutput, TaskOutput
from bertforge.model.task_heads import choice_loss, choice_rows, sequence_loss

# HF XLNetConfig field -> our BertConfig field
HF_FIELDS = {"d_model": "hidden_size", "n_layer": "num_hidden_layers", "n_head": "num_attention_heads",
             "d_inner": "intermediate_size", "ff_activation": "hidden_act", "dropout": "hidden_dropout_prob"}
# BertConfig fields XLNet has no use for (no position table, segments are relative): never written
NOT_HF_FIELDS = ("attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size")
SUMMARY_TYPES = ("last", "first", "mean")


@dataclass
class XLNetConfig(BertConfig):
    """`BertConfig` with the defaults of HF's `XLNetConfig` (xlnet-large's shape) that reads and writes HF's
    field names. One `dropout` (kept in `hidden_dropout_prob`) drops everywhere, attention included."""

    vocab_size: int = 32000
    hidden_size: int = 1024
    num_hidden_layers: int = 24
    num_attention_heads: int = 16
    intermediate_size: int = 4096
    type_vocab_size: int = 0
    pad_token_id: int = 5
    attn_type: str = "bi"  # "bi": every token sees every other; "uni": each sees itself and those before
    clamp_len: int = -1  # offsets beyond this share one encoding (-1: no clamping)
    same_length: bool = False  # with "uni", every token sees the same number of tokens
    bi_data: bool = False  # the original's two-direction pre-training data; not supported
    # sequence classification and multiple choice: XLM's sequence summary (HF's names and defaults)
    summary_type: str = "last"
    summary_use_proj: bool = True
    summary_activation: str | None = "tanh"
    summary_last_dropout: float = 0.1
    summary_first_dropout: float = 0.0  # read by HF when present; written only when set

    model_type: ClassVar[str] = "xlnet"

    def __post_init__(self) -> None:
        self.attention_probs_dropout_prob = self.hidden_dropout_prob  # XLNet has one dropout
        super().__post_init__()
        if self.attn_type not in ("bi", "uni"):
            raise ConfigError(f"config field 'attn_type' is {self.attn_type!r}; choose 'bi' or 'uni'")
        if self.bi_data:
            raise ConfigError("config field 'bi_data' is true; bertforge's XLNet runs one direction per sequence "
                              "(set it to false, as every released XLNet config has it)")
        if isinstance(self.clamp_len, bool) or not isinstance(self.clamp_len, int):
            raise ConfigError(f"config field 'clamp_len' must be a whole number (-1: off), got {self.clamp_len!r}")
        if not isinstance(self.same_length, bool):
            raise ConfigError(f"config field 'same_length' must be true or false, got {self.same_length!r}")
        if self.hidden_size % 2:
            raise ConfigError(f"config field 'd_model' is {self.hidden_size}; XLNet's sin/cos position encoding "
                              "needs an even width")
        for name in ("mem_len", "reuse_len"):  # read from config.json as transformers writes them (in `extra`)
            value = self.extra.get(name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ConfigError(f"config field '{name}' must be a whole number of tokens or null, got {value!r}")
        self._check_summary()

    def _check_summary(self) -> None:
        if self.summary_activation in ("", "linear"):  # transformers' spellings of no activation
            self.summary_activation = None
        if self.summary_type not in SUMMARY_TYPES:
            raise ConfigError(f"config field 'summary_type' is {self.summary_type!r}; bertforge's XLNet supports "
                              f"{', '.join(SUMMARY_TYPES)}")
        if self.summary_activation is not None and self.summary_activation not in SUPPORTED_ACTIVATIONS:
            raise ConfigError(f"config field 'summary_activation' is {self.summary_activation!r}; supported: "
                              f"null, {', '.join(SUPPORTED_ACTIVATIONS)}")
        if self.extra.get("summary_proj_to_labels"):
            raise ConfigError("config field 'summary_proj_to_labels' is true; XLNet's heads need the summary to "
                              "keep d_model (set it to false)")
        for name in ("summary_last_dropout", "summary_first_dropout"):
            p = getattr(self, name)
            if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p < 1.0:
                raise ConfigError(f"config field '{name}' must be in [0, 1), got {p!r}")

    @property
    def ffn_inner_dropout_prob(self) -> float:
        return self.hidden_dropout_prob  # XLNet drops the activation inside the feed-forward block too

    @classmethod
    def json_name(cls, name: str) -> str:
        return next((hf for hf, ours in HF_FIELDS.items() if ours == name), name)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "XLNetConfig":
        """HF's names win over ours; `d_head` must be d_model / n_head (HF checks the same)."""
        data = dict(data)
        for hf, ours in HF_FIELDS.items():
            if hf in data:
                data[ours] = data.pop(hf)
        d_head = data.pop("d_head", None)
        config = super().from_dict(data)
        if d_head is not None and d_head != config.head_dim:
            raise ConfigError(f"config field 'd_head' is {d_head!r}; XLNet's must be d_model / n_head = "
                              f"{config.head_dim}")
        return config

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        for hf, ours in HF_FIELDS.items():
            out[hf] = out.pop(ours)
        for name in NOT_HF_FIELDS:
            out.pop(name, None)  # transformers' XLNetConfig refuses max_position_embeddings
        out["d_head"] = self.head_dim
        if self.summary_activation is None:
            out["summary_activation"] = "linear"  # transformers' XLNetConfig needs a string
        if not self.summary_first_dropout:
            out.pop("summary_first_dropout")
        return out


# ---- positions, masks and segments: what every layer reads -------------------------------------------------------
def relative_positional_encoding(qlen: int, klen: int, config: XLNetConfig, device: torch.device) -> torch.Tensor:
    """[offsets, d_model]: sin | cos of each offset klen, klen - 1, ... (down to 1 - qlen for "bi", 0 for "uni")
    at the frequencies 1 / 10000^(2k / d_model), as the original; row p is the offset klen - p."""
    freq = torch.arange(0, config.hidden_size, 2, dtype=torch.int64, device=device).float()
    inv_freq = 1 / torch.pow(10000, freq / config.hidden_size)
    end = -qlen if config.attn_type == "bi" else -1
    offsets = torch.arange(klen, end, -1, dtype=torch.int64, device=device).float()
    if config.clamp_len > 0:
        offsets = offsets.clamp(-config.clamp_len, config.clamp_len)
    angle = offsets[:, None] * inv_freq
    return torch.cat([torch.sin(angle), torch.cos(angle)], dim=-1)


def relative_shift(scores: torch.Tensor, klen: int, rows: Optional[torch.Tensor] = None,
                   qlen: Optional[int] = None) -> torch.Tensor:
    """[B, n, qlen, offsets] scores of each query against every offset -> [B, n, qlen, klen], the score of
    query i against key j being that of offset i - j, i.e. of row qlen - i + j of the encoding. (Offsets a
    "uni" model never reads — keys after the query — are clamped to the last row; they are masked.)
    With `rows` [B, P] the P queries are those of positions `rows` of a segment of `qlen` tokens."""
    B, n, q, offsets = scores.shape
    j = torch.arange(klen, device=scores.device)
    if rows is None:
        index = (q - torch.arange(q, device=scores.device)[:, None] + j).clamp(max=offsets - 1)
        return scores.gather(-1, index.expand(B, n, q, klen))
    index = (qlen - rows[:, None, :, None] + j).clamp(max=offsets - 1)
    return scores.gather(-1, index.expand(B, n, q, klen))


def attention_masks(padding: Optional[torch.Tensor], perm_mask: Optional[torch.Tensor], config: XLNetConfig,
                    qlen: int, mlen: int, dtype: torch.dtype, device: torch.device
                    ) -> tuple[Optional[torch.Tensor], Optional[torch.Tensor]]:
    """(content-stream mask, query-stream mask), each [B or 1, qlen, mlen + qlen] with 1 = hidden, or None.
    Keys are the `mlen` remembered tokens (`mems`), then the segment's own.

    The query stream's mask hides padding keys (`padding` [B, L], 1 = pad), whatever `perm_mask` hides, and
    for "uni" the keys after the query; memory is always visible. The content stream's is the same but always
    lets a token see itself: its own content is what the content stream carries."""
    hidden = None
    if config.attn_type == "uni":
        hidden = _causal_mask(qlen, mlen, config.same_length, device)[None]
    for data in (padding[:, None, :] if padding is not None else None, perm_mask):
        if data is not None:
            data = F.pad(data, (mlen, 0))  # the memory columns: visible
            hidden = data if hidden is None else hidden + data
    if hidden is None:
        return None, None
    query_mask = (hidden > 0).to(dtype)
    itself = F.pad(torch.eye(qlen, device=device, dtype=dtype), (mlen, 0))
    content_mask = ((query_mask - itself) > 0).to(dtype)
    return content_mask, query_mask


def _causal_mask(qlen: int, mlen: int, same_length: bool, device: torch.device) -> torch.Tensor:
    """"uni": keys after the query are hidden (memory never is); with `same_length` also the segment's keys
    before it, so that every query sees the same number of keys (with no memory: itself only, as the
    original)."""
    ones = torch.ones(qlen, mlen + qlen, device=device)
    mask = ones.triu(mlen + 1)
    if same_length:
        mask[:, :qlen] += ones[:, :qlen].tril(-1)
    return mask


def segment_difference(token_type_ids: Optional[torch.Tensor], mlen: int = 0) -> Optional[torch.Tensor]:
    """[B, L, mlen + L] True where query and key lie in different segments (XLNet's segments are relative;
    remembered tokens count as type 0, as in the original)."""
    if token_type_ids is None:
        return None
    keys = F.pad(token_type_ids, (mlen, 0))
    return token_type_ids[:, :, None] != keys[:, None, :]


# ---- the layer -------------------------------------------------------------------------------------------------
class XLNetRelativeAttention(nn.Module):
    """Multi-head attention with content, position and segment scores; shared by the two streams.

    Projections are [d_model, heads, d_head] tensors named as in transformers (`q`, `k`, `v`, `o`, `r`)."""

    def __init__(self, config: XLNetConfig) -> None:
        super().__init__()
        H, n, d = config.hidden_size, config.num_attention_heads, config.head_dim
        for name in ("q", "k", "v", "o", "r"):
            setattr(self, name, nn.Parameter(torch.empty(H, n, d)))
        self.r_r_bias = nn.Parameter(torch.empty(n, d))
        self.r_s_bias = nn.Parameter(torch.empty(n, d))
        self.r_w_bias = nn.Parameter(torch.empty(n, d))
        self.seg_embed = nn.Parameter(torch.empty(2, n, d))  # [same segment, different segment]
        self.layer_norm = nn.LayerNorm(H, eps=config.layer_norm_eps)
        self.dropout = Dropout(config.hidden_dropout_prob)
        self.scale = 1 / math.sqrt(d)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_r: torch.Tensor,
               segments: Optional[torch.Tensor], mask: Optional[torch.Tensor],
               rows: Optional[torch.Tensor] = None, qlen: Optional[int] = None) -> torch.Tensor:
        """q [B, Lq, n, d] against keys/values [B, Lk, n, d] and position keys k_r [offsets, n, d]; with
        `rows` [B, Lq], the queries are of those positions of the segment's `qlen` (see `relative_shift`)."""
        content = torch.einsum("bind,bjnd->bnij", q + self.r_w_bias, k)
        position = relative_shift(torch.einsum("bind,rnd->bnir", q + self.r_r_bias, k_r), k.shape[1], rows, qlen)
        score = content + position
        if segments is not None:
            by_kind = torch.einsum("bind,snd->bnis", q + self.r_s_bias, self.seg_embed)  # [B, n, Lq, 2]
            score = score + torch.where(segments[:, None], by_kind[..., 1:], by_kind[..., :1])
        score = score * self.scale
        if mask is not None:  # a large finite penalty, as the original: a row that sees nothing averages all
            score = score - (65500.0 if score.dtype == torch.float16 else 1e30) * mask[:, None]
        prob = self.dropout(torch.softmax(score, dim=-1))
        return torch.einsum("bnij,bjnd->bind", prob, v)

    def post_attention(self, residual: torch.Tensor, vec: torch.Tensor) -> torch.Tensor:
        out = self.dropout(torch.einsum("bind,hnd->bih", vec, self.o))
        return self.layer_norm(out + residual)

    def forward(self, h: torch.Tensor, g: Optional[torch.Tensor], content_mask: Optional[torch.Tensor],
                query_mask: Optional[torch.Tensor], positions: torch.Tensor, segments: Optional[torch.Tensor],
                target_mapping: Optional[torch.Tensor], memory: Optional[torch.Tensor] = None,
                query_rows: Optional["QueryRows"] = None) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        """h [B, L, H]; g [B, P, H] (the P predictions `target_mapping` [B, P, L] places, or `query_rows`)
        or None; memory [B, M, H]: the previous segment's states at this layer, which keys and values also
        cover."""
        keys = h if memory is None else torch.cat([memory.to(h.dtype), h], dim=1)
        k = torch.einsum("bih,hnd->bind", keys, self.k)
        v = torch.einsum("bih,hnd->bind", keys, self.v)
        k_r = torch.einsum("rh,hnd->rnd", positions, self.r)
        q_h = torch.einsum("bih,hnd->bind", h, self.q)
        h_out = self.post_attention(h, self.attend(q_h, k, v, k_r, segments, content_mask))
        if g is None:
            return h_out, None
        q_g = torch.einsum("bph,hnd->bpnd", g, self.q)
        if query_rows is not None:  # P queries only, each at its position: no [L, L] query stream
            vec_g = self.attend(q_g, k, v, k_r, query_rows.segments, query_mask, query_rows.positions, h.shape[1])
            return h_out, self.post_attention(g, vec_g)
        # each prediction's query goes to the position it predicts, attends from there, and comes back
        q_g = torch.einsum("bpnd,bpl->blnd", q_g, target_mapping)
        vec_g = torch.einsum("blnd,bpl->bpnd", self.attend(q_g, k, v, k_r, segments, query_mask), target_mapping)
        return h_out, self.post_attention(g, vec_g)


class XLNetFeedForward(FeedForward):
    """BERT's block (`layer_1` = up, `layer_2` = down), its output dropped, added to its input and normed."""

    def __init__(self, config: XLNetConfig) -> None:
        super().__init__(config)
        self.output_dropout = Dropout(config.hidden_dropout_prob)
        self.layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer_norm(x + self.output_dropout(super().forward(x)))


class XLNetLayer(nn.Module):
    """Relative attention, then the feed-forward block, each stream through both."""

    def __init__(self, config: XLNetConfig) -> None:
        super().__init__()
        self.rel_attn = XLNetRelativeAttention(config)
        self.ff = XLNetFeedForward(config)

    def forward(self, h: torch.Tensor, g: Optional[torch.Tensor], *args: Any
                ) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        h, g = self.rel_attn(h, g, *args)
        return self.ff(h), (self.ff(g) if g is not None else None)


# ---- the models ------------------------------------------------------------------------------------------------
XLNET_NAMES = NameMap(
    rules=[(r"layer\.(\d+)\.ff\.up\.(weight|bias)", r"layer.\1.ff.layer_1.\2"),
           (r"layer\.(\d+)\.ff\.down\.(weight|bias)", r"layer.\1.ff.layer_2.\2")],
    head_prefixes=("lm_loss.", "sequence_summary.", "logits_proj.", "classifier.", "qa_outputs.", "start_logits.",
                   "end_logits.", "answer_class."),
    tied=("lm_loss.weight",),  # the LM decoder is the word embedding; `lm_loss.bias` is real
)
_ATTENTION_TENSORS = ("q", "k", "v", "o", "r", "r_r_bias", "r_s_bias", "r_w_bias", "seg_embed")


class XLNetPreTrainedModel(BertPreTrainedModel):
    """What every XLNet class shares: config, names (`transformer.` in transformers) and init."""

    config_class = XLNetConfig
    name_map = XLNET_NAMES
    hf_base_prefix = "transformer"

    def _init_module(self, module: nn.Module) -> None:
        super()._init_module(module)
        std = self.config.initializer_range
        if isinstance(module, XLNetRelativeAttention):
            for name in _ATTENTION_TENSORS:
                nn.init.normal_(getattr(module, name), mean=0.0, std=std)
        elif isinstance(module, XLNetModel):
            nn.init.normal_(module.mask_emb, mean=0.0, std=std)

    def flops_per_token(self, seq_len: int = 128, masked_fraction: float = 0.15, training: bool = True) -> float:
        """Matmul FLOPs per real token for full sequences of `seq_len`; the LM head predicts `masked_fraction`
        of them through the query stream (PLM with K = 6 predicts 1/6), the other heads none."""
        from bertforge.model.flops import count_xlnet_flops
        predicted = masked_fraction * seq_len if isinstance(self, XLNetLMHeadModel) else 0.0
        return count_xlnet_flops(self.config, [seq_len], n_predicted=predicted, training=training) / seq_len

    @property
    def embeddings(self) -> "ModuleGroup":
        """What `bertforge info` counts as embeddings: the word embeddings and the query stream's `mask_emb`."""
        base = self.bert if hasattr(self, "bert") else self
        return ModuleGroup([base.word_embedding], [base.mask_emb])

    @property
    def encoder(self) -> "ModuleGroup":
        """The relative-attention layers (no pooler: XLNet's heads summarise <cls> themselves)."""
        return ModuleGroup(list((self.bert if hasattr(self, "bert") else self).layer))

    pooler = None


class ModuleGroup:
    """Modules (and loose parameters) counted together, as `BertModel.embeddings` / `.encoder` are."""

    projection = None  # no factorised embedding

    def __init__(self, modules: list[nn.Module], loose: list[nn.Parameter] = ()) -> None:
        self.modules, self.loose = modules, list(loose)

    def parameters(self):
        for module in self.modules:
            yield from module.parameters()
        yield from self.loose


def padding_of(attention_mask: Optional[torch.Tensor], input_mask: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """[B, L] float, 1 = padding, from either convention (BERT's attention_mask or XLNet's input_mask)."""
    if attention_mask is not None and input_mask is not None:
        raise ValueError("pass attention_mask (1 = real token) or input_mask (1 = padding), not both")
    if input_mask is not None:
        return input_mask.float()
    return 1.0 - attention_mask.float() if attention_mask is not None else None


@dataclass
class QueryRows:
    """The query stream's P rows when it runs only at the predicted positions (`target_positions`)."""
    positions: torch.Tensor  # [B, P] the position each prediction is of
    segments: Optional[torch.Tensor]  # [B, P, keys] those rows of `segment_difference`


def query_rows(positions: torch.Tensor, query_mask: Optional[torch.Tensor], segments: Optional[torch.Tensor]
               ) -> tuple[QueryRows, Optional[torch.Tensor]]:
    """The rows of the query stream's mask and segments at `positions` [B, P] (the only rows it computes)."""
    def rows(table: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
        if table is None:
            return None
        table = table.expand(positions.shape[0], -1, -1)
        return table.gather(1, positions[:, :, None].expand(-1, -1, table.shape[-1]))
    return QueryRows(positions, rows(segments)), rows(query_mask)


@dataclass
class XLNetModelOutput(BertModelOutput):
    # with use_mems=True: per layer, [batch, memory, hidden], what the next segment's call takes as `mems`
    mems: Optional[list[torch.Tensor]] = None


@dataclass
class XLNetLMHeadModelOutput(MaskedLMOutput):
    mems: Optional[list[torch.Tensor]] = None


class XLNetModel(XLNetPreTrainedModel):
    """Word embeddings -> N relative-attention layers, content stream (and query stream with
    `target_mapping`). The output is the query stream's when there is one: [B, P, H], else [B, L, H]."""

    base_model_prefix = ""

    def __init__(self, config: XLNetConfig) -> None:
        super().__init__(config)
        self.word_embedding = nn.Embedding(config.vocab_size, config.hidden_size)
        self.mask_emb = nn.Parameter(torch.empty(1, 1, config.hidden_size))
        self.layer = nn.ModuleList(XLNetLayer(config) for _ in range(config.num_hidden_layers))
        self.dropout = Dropout(config.hidden_dropout_prob)
        self.init_weights()

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                mems: Optional[list[torch.Tensor]] = None, perm_mask: Optional[torch.Tensor] = None,
                target_mapping: Optional[torch.Tensor] = None, token_type_ids: Optional[torch.Tensor] = None,
                input_mask: Optional[torch.Tensor] = None, use_mems: bool = False,
                output_hidden_states: bool = False, target_positions: Optional[torch.Tensor] = None
                ) -> XLNetModelOutput:
        """perm_mask [B, L, L]: 1 where token i may not see token j; target_mapping [B, P, L]: prediction p
        is of token l where it is 1 (both as in transformers). `target_positions` [B, P] (instead of a
        one-hot target_mapping): prediction p is of that position, and the query stream computes only
        those P rows instead of all L, the same numbers at a fraction of the cost. `mems`: one [B, M, H]
        tensor per layer, the `mems` a previous call returned with `use_mems=True` (batch first:
        transformers' are [M, B, H])."""
        _check_inputs(input_ids, perm_mask, target_mapping, mems, len(self.layer), target_positions)
        L, dtype, device = input_ids.shape[1], self.word_embedding.weight.dtype, input_ids.device
        mlen = mems[0].shape[1] if mems is not None else 0
        content_mask, query_mask = attention_masks(padding_of(attention_mask, input_mask), perm_mask, self.config,
                                                   L, mlen, dtype, device)
        h = self.dropout(self.word_embedding(input_ids))
        g, rows = None, None
        if target_mapping is not None:
            target_mapping = target_mapping.to(dtype)
            g = self.dropout(self.mask_emb.expand(input_ids.shape[0], target_mapping.shape[1], -1))
        positions = self.dropout(relative_positional_encoding(L, mlen + L, self.config, device).to(dtype))
        segments = segment_difference(token_type_ids, mlen)
        if target_positions is not None:
            rows, query_mask = query_rows(target_positions, query_mask, segments)
            g = self.dropout(self.mask_emb.expand(input_ids.shape[0], target_positions.shape[1], -1))
        collect: list[torch.Tensor] | None = [] if output_hidden_states else None
        new_mems: list[torch.Tensor] = []
        for i, layer in enumerate(self.layer):
            memory = mems[i] if mems is not None else None
            if use_mems:
                new_mems.append(self.cache_memory(h, memory))
            _collect(collect, h, g)
            h, g = layer(h, g, content_mask, query_mask, positions, segments, target_mapping, memory, rows)
        _collect(collect, h, g)
        out = self.dropout(g if g is not None else h)
        return XLNetModelOutput(last_hidden_state=out, hidden_states=tuple(collect) if collect is not None else None,
                                mems=new_mems if use_mems else None)

    def cache_memory(self, h: torch.Tensor, memory: Optional[torch.Tensor]) -> torch.Tensor:
        """What the next segment remembers of this layer's input: the first `reuse_len` tokens of this segment
        (all when unset) after the old memory, the last `mem_len` of them (all when 0 or null); no gradient."""
        reuse, keep = self.config.extra.get("reuse_len"), self.config.extra.get("mem_len", 512)
        current = h[:, :reuse] if reuse else h
        both = current if memory is None else torch.cat([memory, current], dim=1)
        return (both[:, -keep:] if keep else both).detach()


def _collect(collect: Optional[list[torch.Tensor]], h: torch.Tensor, g: Optional[torch.Tensor]) -> None:
    """Hidden states as transformers gives them: h per layer, or h and g in turn with a query stream."""
    if collect is not None:
        collect.extend([h] if g is None else [h, g])


def _check_inputs(input_ids: torch.Tensor, perm_mask: Optional[torch.Tensor], target_mapping: Optional[torch.Tensor],
                  mems: Optional[list[torch.Tensor]], n_layers: int,
                  target_positions: Optional[torch.Tensor] = None) -> None:
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids must be [batch, seq], got shape {tuple(input_ids.shape)}")
    B, L = input_ids.shape
    if target_positions is not None:
        if target_mapping is not None:
            raise ValueError("pass target_mapping or target_positions, not both")
        if target_positions.dim() != 2 or target_positions.shape[0] != B or target_positions.dtype != torch.long:
            raise ValueError(f"target_positions must be a long tensor [batch = {B}, predictions], got "
                             f"{target_positions.dtype} {tuple(target_positions.shape)}")
    if mems is not None and (len(mems) != n_layers or any(m.dim() != 3 or m.shape[0] != B for m in mems)
                             or len({m.shape[1] for m in mems}) != 1):
        raise ValueError(f"mems must be {n_layers} tensors (one per layer) of [batch = {B}, memory, hidden], "
                         "as a previous call with use_mems=True returns them")
    if perm_mask is not None and tuple(perm_mask.shape) != (B, L, L):
        raise ValueError(f"perm_mask must be [batch, seq, seq] = {(B, L, L)}, got {tuple(perm_mask.shape)}")
    if target_mapping is not None and (target_mapping.dim() != 3 or tuple(target_mapping.shape[::2]) != (B, L)):
        raise ValueError(f"target_mapping must be [batch, predictions, seq] = ({B}, P, {L}), got "
                         f"{tuple(target_mapping.shape)}")


class _XLNetHead(XLNetPreTrainedModel):
    """A head on `self.bert`, an `XLNetModel` (transformers' `transformer`)."""

    def encode(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor],
               token_type_ids: Optional[torch.Tensor], input_mask: Optional[torch.Tensor],
               output_hidden_states: bool, **two_stream: Any) -> BertModelOutput:
        return self.bert(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                         input_mask=input_mask, output_hidden_states=output_hidden_states, **two_stream)


class XLNetLMHeadModel(_XLNetHead):
    """XLNet + `lm_loss`: logits of the vocabulary from the decoder tied to the word embeddings. With
    `target_mapping` the logits are of the predictions (the query stream), [B, P, V]; labels match them."""

    head_names = {"lm_bias": "lm_loss.bias"}

    def __init__(self, config: XLNetConfig) -> None:
        super().__init__(config)
        self.bert = XLNetModel(config)
        self.lm_bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.init_weights()

    def _init_module(self, module: nn.Module) -> None:
        super()._init_module(module)
        if module is self:
            nn.init.zeros_(self.lm_bias)

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                perm_mask: Optional[torch.Tensor] = None, target_mapping: Optional[torch.Tensor] = None,
                token_type_ids: Optional[torch.Tensor] = None, input_mask: Optional[torch.Tensor] = None,
                labels: Optional[torch.Tensor] = None, mems: Optional[list[torch.Tensor]] = None,
                use_mems: bool = False, output_hidden_states: bool = False,
                target_positions: Optional[torch.Tensor] = None) -> XLNetLMHeadModelOutput:
        out = self.encode(input_ids, attention_mask, token_type_ids, input_mask, output_hidden_states,
                          perm_mask=perm_mask, target_mapping=target_mapping, mems=mems, use_mems=use_mems,
                          target_positions=target_positions)
        logits = F.linear(out.last_hidden_state, self.bert.word_embedding.weight, self.lm_bias)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1),
                                   ignore_index=-100)
        return XLNetLMHeadModelOutput(loss=loss, logits=logits, hidden_states=out.hidden_states, mems=out.mems)


class XLNetSequenceSummary(nn.Module):
    """XLM's sequence summary: the last real token's state (<cls>), or the first, or the mean -> first dropout
    -> `summary` (H -> H) -> activation -> last dropout. XLNet pads on the left, so <cls> is position -1 as
    transformers reads it; a batch padded on the right (bertforge's task batches) gives the same states for its
    real tokens (positions are relative, padding keys are hidden), and `padding` [B, L] (1 = pad) finds its
    <cls> before the padding."""

    def __init__(self, config: XLNetConfig) -> None:
        super().__init__()
        self.summary_type = config.summary_type
        self.first_dropout = Dropout(config.summary_first_dropout)
        self.summary = nn.Linear(config.hidden_size, config.hidden_size) if config.summary_use_proj else nn.Identity()
        self.act = activation(config.summary_activation) if config.summary_activation else (lambda x: x)
        self.last_dropout = Dropout(config.summary_last_dropout)

    def forward(self, hidden: torch.Tensor, padding: Optional[torch.Tensor] = None) -> torch.Tensor:
        picked = {"last": lambda: _last_real(hidden, padding), "first": lambda: hidden[:, 0],
                  "mean": lambda: hidden.mean(dim=1)}[self.summary_type]()
        return self.last_dropout(self.act(self.summary(self.first_dropout(picked))))


def _last_real(hidden: torch.Tensor, padding: Optional[torch.Tensor]) -> torch.Tensor:
    """[B, H]: each row's state at its last real position (position -1 with left padding or none)."""
    if padding is None:
        return hidden[:, -1]
    positions = torch.arange(hidden.shape[1], device=hidden.device)
    last = torch.where(padding.to(hidden.device) > 0, -1, positions).amax(dim=1).clamp(min=0)
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]


class XLNetForSequenceClassification(_XLNetHead):
    """Sequence summary -> `logits_proj`; the loss follows HF's rule (`sequence_loss`)."""

    def __init__(self, config: XLNetConfig) -> None:
        super().__init__(config)
        self.num_labels = config.num_labels
        self.bert = XLNetModel(config)
        self.sequence_summary = XLNetSequenceSummary(config)
        self.logits_proj = nn.Linear(config.hidden_size, config.num_labels)
        self.init_weights()

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                token_type_ids: Optional[torch.Tensor] = None, input_mask: Optional[torch.Tensor] = None,
                labels: Optional[torch.Tensor] = None, output_hidden_states: bool = False) -> TaskOutput:
        out = self.encode(input_ids, attention_mask, token_type_ids, input_mask, output_hidden_states)
        padding = padding_of(attention_mask, input_mask)
        logits = self.logits_proj(self.sequence_summary(out.last_hidden_state, padding))
        loss = sequence_loss(logits, labels, self.config) if labels is not None else None
        return TaskOutput(loss=loss, logits=logits, hidden_states=out.hidden_states)


class XLNetForTokenClassification(_XLNetHead):
    """`classifier` on every token (the model's last dropout is the only one); labels of -100 are ignored."""

    def __init__(self, config: XLNetConfig) -> None:
        super().__init__(config)
        self.num_labels = config.num_labels
        self.bert = XLNetModel(config)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.init_weights()

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                token_type_ids: Optional[torch.Tensor] = None, input_mask: Optional[torch.Tensor] = None,
                labels: Optional[torch.Tensor] = None, output_hidden_states: bool = False) -> TaskOutput:
        out = self.encode(input_ids, attention_mask, token_type_ids, input_mask, output_hidden_states)
        logits = self.classifier(out.last_hidden_state)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.reshape(-1, self.num_labels).float(), labels.reshape(-1),
                                   ignore_index=-100)
        return TaskOutput(loss=loss, logits=logits, hidden_states=out.hidden_states)


class XLNetForQuestionAnsweringSimple(_XLNetHead):
    """`qa_outputs`: a start and an end logit per token; loss = mean of the two cross-entropies, positions
    outside the sequence ignored (transformers' XLNetForQuestionAnsweringSimple; padding is not masked)."""

    def __init__(self, config: XLNetConfig) -> None:
        super().__init__(config)
        self.bert = XLNetModel(config)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        self.init_weights()

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                token_type_ids: Optional[torch.Tensor] = None, input_mask: Optional[torch.Tensor] = None,
                start_positions: Optional[torch.Tensor] = None, end_positions: Optional[torch.Tensor] = None,
                output_hidden_states: bool = False) -> QuestionAnsweringOutput:
        out = self.encode(input_ids, attention_mask, token_type_ids, input_mask, output_hidden_states)
        logits = self.qa_outputs(out.last_hidden_state)
        start_logits, end_logits = logits[..., 0].contiguous(), logits[..., 1].contiguous()
        loss = None
        if start_positions is not None and end_positions is not None:
            L = start_logits.shape[1]
            start = start_positions.reshape(-1).clamp(0, L)
            end = end_positions.reshape(-1).clamp(0, L)
            loss = (F.cross_entropy(start_logits.float(), start, ignore_index=L)
                    + F.cross_entropy(end_logits.float(), end, ignore_index=L)) / 2
        return QuestionAnsweringOutput(loss=loss, start_logits=start_logits, end_logits=end_logits,
                                       hidden_states=out.hidden_states)


class XLNetForMultipleChoice(_XLNetHead):
    """Inputs [batch, choices, seq]: each (context, choice) row's summary -> `logits_proj` (one score)."""

    def __init__(self, config: XLNetConfig) -> None:
        super().__init__(config)
        self.bert = XLNetModel(config)
        self.sequence_summary = XLNetSequenceSummary(config)
        self.logits_proj = nn.Linear(config.hidden_size, 1)
        self.init_weights()

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                token_type_ids: Optional[torch.Tensor] = None, input_mask: Optional[torch.Tensor] = None,
                labels: Optional[torch.Tensor] = None, output_hidden_states: bool = False) -> TaskOutput:
        (B, C), rows = choice_rows(input_ids, attention_mask, token_type_ids, input_mask)
        out = self.encode(*rows, output_hidden_states)
        padding = padding_of(rows[1], rows[3])
        logits = self.logits_proj(self.sequence_summary(out.last_hidden_state, padding)).reshape(B, C)
        return TaskOutput(loss=choice_loss(logits, labels), logits=logits, hidden_states=out.hidden_states)


# role "masked_lm"/"pretraining" is the LM head, which `pretrain --objective plm` trains (pretraining/plm.py)
FAMILY = Family(config_class=XLNetConfig, classes={
    "base": XLNetModel, "masked_lm": XLNetLMHeadModel, "pretraining": XLNetLMHeadModel,
    "sequence_classification": XLNetForSequenceClassification,
    "token_classification": XLNetForTokenClassification,
    "question_answering": XLNetForQuestionAnsweringSimple, "multiple_choice": XLNetForMultipleChoice})

__all__ = ["XLNetConfig", "XLNetModel", "XLNetLMHeadModel", "XLNetForSequenceClassification",
           "XLNetForTokenClassification", "XLNetForQuestionAnsweringSimple", "XLNetForMultipleChoice",
           "XLNET_NAMES", "FAMILY", "relative_positional_encoding", "relative_shift", "attention_masks"]

"""`BertConfig`: the model's shape, with the field names of Hugging Face's BERT `config.json`.

Keeping HF's names means a `config.json` written by either library is read by the other unchanged; keys we
do not model (``architectures``, ``transformers_version``, ``use_cache``...) are carried in ``extra`` so a
round trip does not lose them.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from bertforge.folder_files import SETTINGS_MAX_BYTES, folder_has, read_folder_text

CONFIG_NAME = "config.json"

# name -> (layers, hidden, heads); intermediate = 4 x hidden, as in Turc et al. (2019), "Well-Read Students".
PRESETS: dict[str, tuple[int, int, int]] = {
    "tiny": (2, 128, 2),
    "mini": (4, 256, 4),
    "small": (4, 512, 8),
    "medium": (8, 512, 8),
    "base": (12, 768, 12),
    "large": (24, 1024, 16),
}

# Cross-layer parameter sharing (ALBERT, Lan et al. 2019, Table 4): which sub-blocks all layers share.
LAYER_SHARING = ("none", "attention", "ffn", "all")

# Keys written to config.json only when a model uses an option transformers' class for it cannot express.
BERTFORGE_ONLY_KEY = "bertforge_only"

# The modern-encoder options (see `BertConfig`): written to config.json only when set away from BERT's defaults.
MODERN_OPTIONS = ("pre_norm", "feed_forward_glu", "attention_bias", "mlp_bias", "norm_bias", "rope_theta",
                  "local_rope_theta", "local_attention", "global_attn_every_n_layers", "head_bias", "head_act",
                  "decoder_bias", "relative_attention_num_buckets", "relative_attention_max_distance")

# An encoder–decoder's decoder options (HF's names), written to config.json only when set.
DECODER_OPTIONS = ("is_decoder", "add_cross_attention")

# Upper bounds of the size fields, far above any released encoder (BERT-large: 24 layers, H=1024; the largest
# vocabularies: ~250k; the longest position tables: ~130k). A config.json beyond them is a mistake or an
# attack: ten million layers or a billion-row vocabulary would exhaust memory before a first forward pass.
MAX_SIZES = {"vocab_size": 1 << 22, "hidden_size": 1 << 16, "num_hidden_layers": 512, "num_attention_heads": 1024,
             "intermediate_size": 1 << 18, "max_position_embeddings": 1 << 20, "type_vocab_size": 1024,
             "embedding_size": 1 << 16, "relative_attention_num_buckets": 1 << 12,
             "relative_attention_max_distance": 1 << 20, "local_attention": 1 << 20}

SUPPORTED_ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "relu", "silu", "swish", "tanh")


class ConfigError(ValueError):
    """A config that cannot describe a model; the message names the field."""


_Config = TypeVar("_Config", bound="ConfigFile")


class ConfigFile:
    """A model config's config.json round trip, shared by every family's config dataclass: reading (the file's
    `model_type` must be the class's; errors name the file), writing, and copying with changes."""

    model_type: ClassVar[str]

    @classmethod
    def field_names(cls) -> set[str]:
        return {f.name for f in dataclasses.fields(cls)} - {"extra"}

    @classmethod
    def from_json_file(cls: type[_Config], path: str | Path) -> _Config:
        path = Path(path)
        return cls.from_json_dict(read_config_json(path), path)

    @classmethod
    def from_json_dict(cls: type[_Config], data: dict[str, Any], path: str | Path) -> _Config:
        """The config in `data`, the parsed content of the config.json at `path` (named in errors)."""
        model_type = data.get("model_type", cls.model_type)
        if model_type != cls.model_type:
            raise ConfigError(f"{path}: model_type is {model_type!r}, but {cls.__name__} reads {cls.model_type!r}")
        try:
            return cls.from_dict(data)
        except TypeError as err:  # a field of the wrong kind, e.g. a list where a number belongs
            raise ConfigError(f"{path}: {err}") from None
        except ConfigError as err:
            raise ConfigError(f"{path}: {err}") from None

    @classmethod
    def from_pretrained(cls: type[_Config], path: str | Path) -> _Config:
        path = Path(path)
        return cls.from_json_file(config_file(path))

    def save_pretrained(self, directory: str | Path, architectures: list[str] | None = None) -> Path:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        data = self.to_dict()
        if architectures:
            data["architectures"] = architectures
        target = directory / CONFIG_NAME
        target.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        return target

    def replace(self: _Config, **changes: Any) -> _Config:
        return dataclasses.replace(self, **changes)


@dataclass
class BertConfig(ConfigFile):
    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    classifier_dropout: float | None = None
    # ALBERT's two parameter reductions, usable by any member: the width E of the embedding tables (None =
    # hidden_size; E != H adds a projection E -> H) and which sub-blocks the layers share.
    embedding_size: int | None = None
    layer_sharing: str = "none"
    # Modern-encoder options (ModernBERT, Warner et al. 2024), each usable on its own; the defaults are BERT's.
    pre_norm: bool = False  # LayerNorm before each sub-block (not after the residual sum), plus a final norm
    feed_forward_glu: bool = False  # up-projection to 2 x intermediate; act(first half) * second half (GeGLU)
    attention_bias: bool = True  # biases of the QKV and attention-output projections
    mlp_bias: bool = True  # biases of the feed-forward projections
    norm_bias: bool = True  # LayerNorm biases
    rope_theta: float | None = None  # rotary positions with this base instead of the absolute position table
    local_rope_theta: float | None = None  # the rotary base of local-attention layers (None: rope_theta)
    local_attention: int | None = None  # local layers see keys within local_attention // 2 positions; None: all global
    global_attn_every_n_layers: int = 1  # with local_attention, layer i is global when i % n == 0
    # T5's relative position bias (`model/relative_bias.py`) instead of the absolute position table: None = off
    relative_attention_num_buckets: int | None = None
    relative_attention_max_distance: int = 128  # offsets this far and beyond share the last bucket
    head_bias: bool = True  # bias of the MLM head's dense transform
    head_act: str | None = None  # the MLM head's activation (None: hidden_act)
    decoder_bias: bool = True  # bias of the MLM vocabulary decoder
    # An encoder–decoder's decoder (HF's names): cross-attention to the encoder after each self-attention.
    # `is_decoder` is what makes transformers run the self-attention left to right; bertforge's decoders
    # attend both ways unless asked (`causal=True`), as a conditional masked LM does.
    is_decoder: bool = False
    add_cross_attention: bool = False
    # Fine-tuning heads keep their label names here, as HF does, so a saved predictor knows what it predicts.
    id2label: dict[int, str] | None = None
    problem_type: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    model_type: ClassVar[str] = "bert"

    def __post_init__(self) -> None:
        check_config(self)
        if self.id2label is not None:
            self.id2label = {int(k): str(v) for k, v in self.id2label.items()}

    @classmethod
    def json_name(cls, name: str) -> str:
        """The config.json name of field `name` (a family may name a field its own way, e.g. DistilBERT's
        ``n_layers``), for messages about the file."""
        return name

    # ---- presets -------------------------------------------------------------------------------------------
    @classmethod
    def preset(cls, name: str, **overrides: Any) -> "BertConfig":
        """A named size (`tiny` ... `large`); any field can be overridden, e.g. ``vocab_size=8000``."""
        if name not in PRESETS:
            raise ConfigError(f"unknown model preset {name!r}; choose one of {', '.join(PRESETS)}")
        layers, hidden, heads = PRESETS[name]
        fields = dict(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                      intermediate_size=4 * hidden)
        fields.update(overrides)
        return cls(**fields)

    # ---- (de)serialisation ---------------------------------------------------------------------------------
    @property
    def num_labels(self) -> int:
        return len(self.id2label) if self.id2label else 2

    @property
    def label2id(self) -> dict[str, int] | None:
        return {v: k for k, v in self.id2label.items()} if self.id2label else None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "BertConfig":
        known = cls.field_names()
        kwargs = {k: v for k, v in data.items() if k in known}
        extra = {k: v for k, v in data.items()
                 if k not in known and k not in ("model_type", "label2id", BERTFORGE_ONLY_KEY)}
        return cls(**kwargs, extra=extra)

    def to_dict(self) -> dict[str, Any]:
        """The HF `config.json` dictionary (unknown keys we were given are written back)."""
        out: dict[str, Any] = dict(self.extra)
        out["model_type"] = self.model_type
        for f in dataclasses.fields(self):
            if f.name == "extra":
                continue
            value = getattr(self, f.name)
            if value is None and f.name in ("id2label", "problem_type", "classifier_dropout", "embedding_size"):
                continue
            if f.name == "layer_sharing" and value == "none":  # BERT's config.json stays as transformers writes it
                continue
            if f.name in MODERN_OPTIONS + DECODER_OPTIONS and value == f.default:  # likewise for options left off
                continue
            if f.name == "id2label":
                out["id2label"] = {str(k): v for k, v in value.items()}
                out["label2id"] = {v: k for k, v in value.items()}
                continue
            out[f.name] = value
        modern = [name for name in self.modern_options_in_use() if name in out]
        if self.embedding_projection or self.layer_sharing != "none" or modern:
            used = ["embedding_size/layer_sharing"] if self.embedding_projection or self.layer_sharing != "none" else []
            out[BERTFORGE_ONLY_KEY] = (f"{'/'.join(used + modern)} are bertforge options: transformers' "
                                       f"{self.model_type} classes cannot load this checkpoint")
        return out

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def modern_options_in_use(self) -> list[str]:
        """The modern-encoder options set away from BERT's defaults (a family that has them natively, such as
        ModernBERT, overrides this with an empty list)."""
        return [f.name for f in dataclasses.fields(self)
                if f.name in MODERN_OPTIONS and getattr(self, f.name) != f.default]

    @property
    def rotary(self) -> bool:
        """Rotary position embeddings instead of the absolute position table."""
        return self.rope_theta is not None

    @property
    def relative_bias(self) -> bool:
        """T5's relative position bias in attention."""
        return self.relative_attention_num_buckets is not None

    @property
    def absolute_positions(self) -> bool:
        """A learned position table added to the embeddings (BERT's), rather than positions inside attention."""
        return not (self.rotary or self.relative_bias)

    def is_global_layer(self, index: int) -> bool:
        """Whether layer `index` attends over the whole sequence (False: within the local window)."""
        return self.local_attention is None or index % self.global_attn_every_n_layers == 0

    @property
    def sliding_windows(self) -> list[int] | None:
        """Longformer's window width per layer (keys within width // 2 either side, plus the global tokens; the
        layers then also hold global projections), or None: attention as above. Set by `LongformerConfig`."""
        return None

    @property
    def block_sparse(self) -> tuple[int, int] | None:
        """BigBird's block-sparse attention in every layer: (block_size, num_random_blocks), or None. Set by
        `BigBirdConfig`."""
        return None

    # Where dropout goes. BERT drops the embeddings, each sub-block's output, and (attention_probs_dropout_prob)
    # the attention probabilities; a family with another placement (ModernBERT) overrides these.
    @property
    def embedding_dropout_prob(self) -> float:
        return self.hidden_dropout_prob

    @property
    def attention_output_dropout_prob(self) -> float:
        return self.hidden_dropout_prob

    @property
    def ffn_inner_dropout_prob(self) -> float:
        """Dropout on the activation inside the feed-forward block, before the down-projection."""
        return 0.0

    @property
    def ffn_output_dropout_prob(self) -> float:
        return self.hidden_dropout_prob

    @property
    def embedding_dim(self) -> int:
        """E, the width of the embedding tables (= hidden_size unless factorised)."""
        return self.embedding_size if self.embedding_size is not None else self.hidden_size

    @property
    def embedding_projection(self) -> bool:
        """Whether embeddings are projected E -> H before the first layer (ALBERT always has the projection)."""
        return self.embedding_dim != self.hidden_size


def check_config(config: BertConfig) -> None:
    """Refuse a config that cannot describe a model, naming the field: sizes, ranges, kinds, option pairs."""
    for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                 "max_position_embeddings"):
        _check_int(name, getattr(config, name), minimum=1)
    _check_int("type_vocab_size", config.type_vocab_size, minimum=0)
    _check_upper_bounds(config)
    if config.hidden_size % config.num_attention_heads:
        raise ConfigError(f"config field 'hidden_size' ({config.hidden_size}) must be divisible by "
                          f"'num_attention_heads' ({config.num_attention_heads})")
    _check_int("pad_token_id", config.pad_token_id, minimum=0)
    if config.pad_token_id >= config.vocab_size:
        raise ConfigError(f"config field 'pad_token_id' ({config.pad_token_id}) must be below 'vocab_size' "
                          f"({config.vocab_size})")
    if config.embedding_size is not None:
        _check_int("embedding_size", config.embedding_size, minimum=1, allow_none=True)
    if config.layer_sharing not in LAYER_SHARING:
        raise ConfigError(f"config field 'layer_sharing' is {config.layer_sharing!r}; choose one of "
                          f"{', '.join(LAYER_SHARING)}")
    if not isinstance(config.hidden_act, str) or config.hidden_act not in SUPPORTED_ACTIVATIONS:
        raise ConfigError(f"config field 'hidden_act' is {config.hidden_act!r}; supported: "
                          f"{', '.join(SUPPORTED_ACTIVATIONS)}")
    _check_number("layer_norm_eps", config.layer_norm_eps, "a small positive number such as 1e-12",
                  lambda v: v > 0)
    _check_number("initializer_range", config.initializer_range, "a number of at least 0", lambda v: v >= 0)
    for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout"):
        value = getattr(config, name)
        if value is not None or name != "classifier_dropout":
            _check_number(name, value, "a probability in [0, 1)", lambda v: 0 <= v < 1)
    _check_modern_options(config)
    if config.add_cross_attention and config.layer_sharing != "none":
        raise ConfigError("config field 'add_cross_attention' cannot be combined with 'layer_sharing' "
                          f"{config.layer_sharing!r}: a decoder's layers each have their own cross-attention")
    kind = config.extra.get("position_embedding_type", "absolute")
    if kind not in ("absolute", None):
        raise ConfigError(f"config field 'position_embedding_type' is {kind!r}; only 'absolute' is supported")
    if config.id2label is not None:
        try:
            {int(k): str(v) for k, v in config.id2label.items()}
        except (AttributeError, TypeError, ValueError):
            raise ConfigError("config field 'id2label' must map label ids (whole numbers) to names, got "
                              f"{config.id2label!r}") from None


def _check_upper_bounds(config: BertConfig) -> None:
    for name, maximum in MAX_SIZES.items():
        value = getattr(config, name)
        if isinstance(value, int) and not isinstance(value, bool) and value > maximum:
            raise ConfigError(f"config field '{config.json_name(name)}' is {value:,}; bertforge accepts at most "
                              f"{maximum:,} (is the config.json damaged?)")


def _check_modern_options(config: BertConfig) -> None:
    for name in ("pre_norm", "feed_forward_glu", "attention_bias", "mlp_bias", "norm_bias", "head_bias",
                 "decoder_bias", "is_decoder", "add_cross_attention"):
        if not isinstance(getattr(config, name), bool):
            raise ConfigError(f"config field '{name}' must be true or false, got {getattr(config, name)!r}")
    for name in ("rope_theta", "local_rope_theta"):
        value = getattr(config, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
            raise ConfigError(f"config field '{name}' must be a positive number or null, got {value!r}")
    if config.local_rope_theta is not None and config.rope_theta is None:
        raise ConfigError("config field 'local_rope_theta' needs 'rope_theta' (rotary positions) to be set")
    window, every = config.local_attention, config.global_attn_every_n_layers
    if window is not None and (not isinstance(window, int) or isinstance(window, bool) or window < 2):
        raise ConfigError(f"config field 'local_attention' must be an integer >= 2 (the window width) or null, "
                          f"got {window!r}")
    if not isinstance(every, int) or isinstance(every, bool) or every < 1:
        raise ConfigError(f"config field 'global_attn_every_n_layers' must be a positive integer, got {every!r}")
    if config.head_act is not None and config.head_act not in SUPPORTED_ACTIVATIONS:
        raise ConfigError(f"config field 'head_act' is {config.head_act!r}; supported: "
                          f"{', '.join(SUPPORTED_ACTIVATIONS)}")
    buckets, distance = config.relative_attention_num_buckets, config.relative_attention_max_distance
    if buckets is not None and (not isinstance(buckets, int) or isinstance(buckets, bool) or buckets < 4):
        raise ConfigError(f"config field 'relative_attention_num_buckets' must be an integer >= 4 (T5: 32) or "
                          f"null, got {buckets!r}")
    exact = (buckets or 4) // 4
    if not isinstance(distance, int) or isinstance(distance, bool) or distance <= exact:
        raise ConfigError(f"config field 'relative_attention_max_distance' must be an integer above "
                          f"{exact} (a quarter of the buckets; T5: 128), got {distance!r}")
    if config.rope_theta is not None and config.head_dim % 2:
        raise ConfigError(f"rotary positions need an even head size; hidden_size / num_attention_heads = "
                          f"{config.head_dim}")


def config_file(path: str | Path) -> Path:
    """The config.json a model folder or a config file names: `folder/config.json`, or the file itself."""
    path = Path(path)
    return path / CONFIG_NAME if path.is_dir() else path


def has_config(folder: str | Path) -> bool:
    """Whether `folder` holds a config.json as a regular file inside it (what makes it a model folder)."""
    return folder_has(folder, CONFIG_NAME)


def read_model_config(path: str | Path) -> dict[str, Any]:
    """The JSON object of a model folder's config.json (or of a config file): the one reading of that file."""
    return read_config_json(config_file(path))


def read_config_json(path: str | Path) -> dict[str, Any]:
    """The JSON object of a config.json, read as a file of its folder (a regular file inside it, of bounded
    size: :mod:`bertforge.folder_files`); errors name the file and the line."""
    path = Path(path)
    text = read_folder_text(path.parent, path.name, SETTINGS_MAX_BYTES)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(f"{path}: not valid JSON (line {err.lineno}, column {err.colno}: {err.msg})") from None
    except RecursionError:
        raise ConfigError(f"{path}: JSON nested too deeply") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object of config fields, got {type(data).__name__}")
    return data


def _check_int(name: str, value: Any, minimum: int, allow_none: bool = False) -> None:
    """A whole number >= minimum; JSON's 768.0 or "768" is refused rather than guessed at."""
    if isinstance(value, bool) or not isinstance(value, int):
        kind = "a whole number" + (" or null" if allow_none else "")
        raise ConfigError(f"config field '{name}' must be {kind} of at least {minimum}, got {value!r}")
    if value < minimum:
        raise ConfigError(f"config field '{name}' must be at least {minimum}, got {value!r}")


def _check_number(name: str, value: Any, expected: str, ok) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or not ok(value):
        raise ConfigError(f"config field '{name}' must be {expected}, got {value!r}")


def dropout_overrides(dropout: float | None) -> dict[str, float]:
    """Config overrides that set hidden and attention dropout together (`{}` for None: keep the model's)."""
    return {} if dropout is None else {"hidden_dropout_prob": dropout, "attention_probs_dropout_prob": dropout}

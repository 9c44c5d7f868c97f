"""Checkpoints in the Hugging Face layout: `config.json` + `model.safetensors` with HF's parameter names.

Inside, bertforge names its parts freely (and fuses Q/K/V into one projection); this module is the one place
that translates, through a `NameMap` per family. Everything that can go wrong with a checkpoint folder —
missing files, corrupt or truncated tensors, wrong shapes or dtypes, keys nobody knows — becomes a
`CheckpointError` that names the file and the keys, never a bare traceback from inside torch.

A folder may come from anyone: its files are read only as files of the folder (`folder_files`), weights only
from safetensors (a pickle is never opened), and config.json's sizes are checked against the weights' shapes
before any model is built (`read_checkpoint`, the one path every loader takes).
"""
from __future__ import annotations

import contextlib
import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import torch

from bertforge.atomic import atomic_write_text, atomic_save_safetensors
from bertforge.config import CONFIG_NAME, MAX_SIZES, BertConfig, ConfigError, has_config, read_config_json
from bertforge.folder_files import (SETTINGS_MAX_BYTES, WEIGHTS_MAX_BYTES, check_folder_file, folder_has,
                                    read_folder_text)

logger = logging.getLogger("bertforge.checkpoint")


@contextlib.contextmanager
def quiet_loading() -> Iterator[None]:
    """Hold back the loader's warnings about new and unused weights, for a caller that reports them itself
    (in its own words, or as an error)."""
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)

SAFE_WEIGHTS = "model.safetensors"
SAFE_INDEX = "model.safetensors.index.json"


class CheckpointError(ValueError, RuntimeError):
    """A checkpoint folder that cannot be read or does not fit the model; the message says where and why.

    A ValueError (bad input, like every user-facing error); also a RuntimeError, which it was first."""


# ---- name maps -------------------------------------------------------------------------------------------------
@dataclass
class NameMap:
    """Regex rules from internal parameter names to HF names for one family's base model.

    `fused` rules map one internal tensor to several HF tensors concatenated along dim 0 (Q, K, V).
    `ignored` are HF keys that carry no parameters of ours (buffers such as `position_ids`).
    `head_prefixes` are HF keys of heads any model of the family may carry: when the class being loaded has
    no such head they are reported as unused, not rejected as unknown.
    `tied` are HF keys of tensors that are tied to others (the MLM decoder): HF may or may not write them;
    we accept and ignore them on load.
    `base_modules` are HF key prefixes (without the base-model prefix) that belong to the base model even
    though they look like heads, e.g. BERT's `pooler.`.
    """

    rules: list[tuple[str, str]]
    fused: list[tuple[str, list[str]]] = field(default_factory=list)
    ignored: tuple[str, ...] = ()
    head_prefixes: tuple[str, ...] = ()
    tied: tuple[str, ...] = ()
    base_modules: tuple[str, ...] = ()

    def to_hf(self, name: str) -> list[str]:
        for pattern, targets in self.fused:
            m = re.fullmatch(pattern, name)
            if m:
                return [m.expand(t) for t in targets]
        for pattern, target in self.rules:
            m = re.fullmatch(pattern, name)
            if m:
                return [m.expand(target)]
        return [name]


BERT_NAMES = NameMap(
    rules=[
        (r"embeddings\.norm\.(weight|bias)", r"embeddings.LayerNorm.\1"),
        (r"encoder\.layers\.(\d+)\.attention\.out\.(weight|bias)", r"encoder.layer.\1.attention.output.dense.\2"),
        (r"encoder\.layers\.(\d+)\.attention_norm\.(weight|bias)", r"encoder.layer.\1.attention.output.LayerNorm.\2"),
        (r"encoder\.layers\.(\d+)\.feed_forward\.up\.(weight|bias)", r"encoder.layer.\1.intermediate.dense.\2"),
        (r"encoder\.layers\.(\d+)\.feed_forward\.down\.(weight|bias)", r"encoder.layer.\1.output.dense.\2"),
        (r"encoder\.layers\.(\d+)\.output_norm\.(weight|bias)", r"encoder.layer.\1.output.LayerNorm.\2"),
        # a decoder's cross-attention (`add_cross_attention`)
        (r"encoder\.layers\.(\d+)\.cross_attention\.query\.(weight|bias)",
         r"encoder.layer.\1.crossattention.self.query.\2"),
        (r"encoder\.layers\.(\d+)\.cross_attention\.out\.(weight|bias)",
         r"encoder.layer.\1.crossattention.output.dense.\2"),
        (r"encoder\.layers\.(\d+)\.cross_attention_norm\.(weight|bias)",
         r"encoder.layer.\1.crossattention.output.LayerNorm.\2"),
    ],
    fused=[
        (r"encoder\.layers\.(\d+)\.attention\.qkv\.(weight|bias)",
         [r"encoder.layer.\1.attention.self.query.\2", r"encoder.layer.\1.attention.self.key.\2",
          r"encoder.layer.\1.attention.self.value.\2"]),
        (r"encoder\.layers\.(\d+)\.cross_attention\.kv\.(weight|bias)",
         [r"encoder.layer.\1.crossattention.self.key.\2", r"encoder.layer.\1.crossattention.self.value.\2"]),
    ],
    ignored=("embeddings.position_ids", "embeddings.token_type_ids"),
    head_prefixes=("cls.", "classifier.", "qa_outputs.", "pooler."),
    # the decoder weight is the word embedding and its bias is `cls.predictions.bias`
    tied=("cls.predictions.decoder.weight", "cls.predictions.decoder.bias"),
    base_modules=("pooler.",),
)


def _legacy_rename(key: str) -> str:
    """TF-era checkpoints call LayerNorm parameters gamma/beta."""
    if key.endswith(".gamma"):
        return key[: -len("gamma")] + "weight"
    if key.endswith(".beta"):
        return key[: -len("beta")] + "bias"
    return key


def _name_map(model: torch.nn.Module) -> NameMap:
    return getattr(type(model), "name_map", BERT_NAMES)


def _base_prefix(model: torch.nn.Module) -> tuple[str, str]:
    """(internal prefix of the encoder module, HF prefix of the base model) for this class."""
    if type(model).base_model_prefix == "":
        return "", ""
    family_prefix = getattr(type(model), "hf_base_prefix", "bert")
    return type(model).base_model_prefix + ".", family_prefix + "."


def internal_to_hf_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    state = model.state_dict()
    out: dict[str, torch.Tensor] = {}
    for hf_name, (name, index, n_chunks) in _expected_hf_names(model).items():
        tensor = state[name]
        part = tensor.chunk(n_chunks, dim=0)[index] if n_chunks > 1 else tensor
        out[hf_name] = part.detach().contiguous()
    return out


def _is_head(name: str, head_names: dict[str, str]) -> bool:
    return any(name == k or name.startswith(k + ".") for k in head_names)


def _rename_head(name: str, head_names: dict[str, str]) -> str:
    for inner, hf in head_names.items():
        if name == inner or name.startswith(inner + "."):
            return hf + name[len(inner):]
    return name


def _expected_hf_names(model: torch.nn.Module) -> dict[str, tuple[str, int, int]]:
    """HF name -> (internal name, chunk index, number of chunks) for every tensor the model holds."""
    names = _name_map(model)
    inner_prefix, hf_prefix = _base_prefix(model)
    head_names = type(model).head_names
    table: dict[str, tuple[str, int, int]] = {}
    for name in model.state_dict():
        if inner_prefix and name.startswith(inner_prefix):
            hf_names = [hf_prefix + n for n in names.to_hf(name[len(inner_prefix):])]
        elif not inner_prefix and not _is_head(name, head_names):
            hf_names = names.to_hf(name)
        else:
            hf_names = [_rename_head(name, head_names)]
        for i, hf_name in enumerate(hf_names):
            table[hf_name] = (name, i, len(hf_names))
    return table


# ---- saving --------------------------------------------------------------------------------------------------
def save_pretrained(model: torch.nn.Module, directory: str | Path) -> Path:
    """Write config.json and model.safetensors atomically (a crash never leaves a half-written file)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tensors = internal_to_hf_state_dict(model)
    atomic_save_safetensors(tensors, directory / SAFE_WEIGHTS, metadata={"format": "pt"})
    data = model.config.to_dict()
    data["architectures"] = [type(model).__name__]
    data.setdefault("tie_word_embeddings", True)
    atomic_write_text(directory / CONFIG_NAME, json.dumps(data, indent=2, sort_keys=True) + "\n")
    return directory


# ---- loading -------------------------------------------------------------------------------------------------
def resolve_folder(path: str | Path) -> Path:
    folder = Path(path)
    if not folder.exists():
        hint = ("; bertforge never downloads from a hub: fetch the model elsewhere and pass its local folder"
                if "/" not in str(path) or not str(path).startswith((".", "/")) else "")
        raise CheckpointError(f"{path}: no such checkpoint folder{hint}")
    if not folder.is_dir():
        raise CheckpointError(f"{path}: expected a checkpoint folder (config.json + model.safetensors), got a file")
    return folder


# ---- the weights files: safetensors only, checked as files of the folder ------------------------------------------
# Pickled weights (`torch.save`): loading one can run any code it names, so bertforge never opens them.
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")


@dataclass(frozen=True)
class WeightFiles:
    """The safetensors files that hold a folder's weights, checked (regular files inside the folder, of bounded
    size) but not yet opened."""

    source: Path  # what messages name: model.safetensors, or the shard index
    files: tuple[Path, ...]  # the real paths of the safetensors files
    listed: tuple[str, ...] = ()  # the tensor names a shard index promises


def find_weights(folder: Path) -> WeightFiles:
    """The folder's safetensors weights (one file, or shards listed in an index). Pickle-only weights are
    refused without being opened; so is any weights file that is a link out of the folder, a FIFO or a device."""
    if folder_has(folder, SAFE_WEIGHTS):
        return WeightFiles(folder / SAFE_WEIGHTS, (check_folder_file(folder, SAFE_WEIGHTS, WEIGHTS_MAX_BYTES),))
    if folder_has(folder, SAFE_INDEX):
        return _index_shards(folder)
    pickled = sorted(entry.name for entry in folder.iterdir() if entry.suffix in PICKLE_SUFFIXES)
    if pickled:
        raise CheckpointError(pickle_message(folder, pickled))
    if (folder / "model.onnx").is_file():
        raise CheckpointError(onnx_export_message(folder))
    raise CheckpointError(f"{folder}: no weights file; expected {SAFE_WEIGHTS} (or shards listed in {SAFE_INDEX})")


def pickle_message(folder: Path, names: list[str]) -> str:
    shown = ", ".join(names[:3]) + (f" (+{len(names) - 3} more)" if len(names) > 3 else "")
    return (f"{folder}: its weights are only in {shown}, a pickle, which bertforge never loads (unpickling can run "
            f"code); convert them to {SAFE_WEIGHTS} where you trust the file, e.g. with transformers: "
            f"AutoModel.from_pretrained(folder).save_pretrained(folder, safe_serialization=True) (the Auto class "
            f"of the model's head)")


def _index_shards(folder: Path) -> WeightFiles:
    index = folder / SAFE_INDEX
    try:
        weight_map = json.loads(read_folder_text(folder, SAFE_INDEX, SETTINGS_MAX_BYTES))["weight_map"]
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise TypeError("weight_map must map tensor names to shard file names")
    except (json.JSONDecodeError, KeyError, TypeError, RecursionError) as err:
        raise CheckpointError(f"{index}: not a valid shard index (need a 'weight_map' object): {err}") from None
    files = []
    for shard in sorted(set(weight_map.values())):
        try:
            files.append(check_folder_file(folder, shard, WEIGHTS_MAX_BYTES))
        except FileNotFoundError:
            raise CheckpointError(f"{index}: lists shard {shard}, which is missing") from None
    return WeightFiles(index, tuple(files), tuple(weight_map))


def read_weight_shapes(weights: WeightFiles) -> dict[str, tuple[int, ...]]:
    """Every tensor's shape, from the safetensors headers alone: no tensor is read."""
    from safetensors import SafetensorError, safe_open
    shapes: dict[str, tuple[int, ...]] = {}
    for file in weights.files:
        try:
            with safe_open(str(file), framework="pt") as handle:
                for key in handle.keys():
                    shapes[key] = tuple(handle.get_slice(key).get_shape())
        except (SafetensorError, OSError, ValueError, RuntimeError) as err:
            raise CheckpointError(f"{_shown(weights, file)}: not a readable safetensors file (truncated or "
                                  f"corrupted?): {err}") from None
    missing = sorted(set(weights.listed) - set(shapes))
    if missing:
        raise CheckpointError(f"{weights.source}: keys listed but absent from their shards: {_few(missing)}")
    return shapes


def read_tensors(weights: WeightFiles) -> dict[str, torch.Tensor]:
    from safetensors import SafetensorError
    from safetensors.torch import load_file
    tensors: dict[str, torch.Tensor] = {}
    for file in weights.files:
        try:
            tensors.update(load_file(str(file)))
        except (SafetensorError, OSError, ValueError, RuntimeError) as err:
            raise CheckpointError(f"{_shown(weights, file)}: not a readable safetensors file (truncated or "
                                  f"corrupted?): {err}") from None
    return tensors


def _shown(weights: WeightFiles, file: Path) -> Path:
    return weights.source if len(weights.files) == 1 and weights.source.name == SAFE_WEIGHTS else file


def read_state_dict(folder: Path) -> tuple[dict[str, torch.Tensor], Path]:
    """All tensors of the folder's weights (single or sharded safetensors) and the file that names them."""
    weights = find_weights(folder)
    return read_tensors(weights), weights.source


def onnx_export_message(folder: Path) -> str:
    """What to do with an ONNX export given where PyTorch weights are needed: which verbs run it, and which
    folder to give instead (the one `export` read, named in its onnx.json)."""
    source = None
    with contextlib.suppress(OSError, ValueError):
        info = json.loads(read_folder_text(folder, "onnx.json", 65536))
        source = info.get("exported_from") if isinstance(info, dict) else None
    origin = f" (its onnx.json names {source!r})" if isinstance(source, str) and 0 < len(source) < 200 else ""
    return (f"{folder} is an ONNX export (model.onnx, no PyTorch weights): `bertforge serve --model {folder} "
            f"--backend onnx` runs it, and `bertforge embed --backend onnx` for an encoder; every other command "
            f"needs the model folder it was exported from{origin}")


def _few(keys: list[str], n: int = 8) -> str:
    shown = ", ".join(keys[:n])
    return shown + (f" ... (+{len(keys) - n} more)" if len(keys) > n else "")


# ---- config.json against the weights, before anything is allocated -----------------------------------------------
# A config.json is trusted to size the model, so a wrong one (or a hostile one: a million layers) would allocate
# gigabytes before the weights are compared with it. Instead the model is first built on the "meta" device (shapes
# only, no memory) and its tensors' shapes compared with the safetensors header; the layer count is compared before
# that, from the names in the header, since even a meta model of a million layers is millions of Python objects.
Build = Callable[[BertConfig], torch.nn.Module]


def read_folder_config(config_class: type, folder: Path, build: Build, shapes: dict[str, tuple[int, ...]],
                       source: Path, **overrides: Any) -> BertConfig:
    """The folder's config.json as `config_class` with `overrides`, checked against the weights' shapes (see
    :func:`check_weights_fit`)."""
    config_file = folder / CONFIG_NAME
    if not has_config(folder):
        raise CheckpointError(f"{folder}: no {CONFIG_NAME}; pass config= or save the model's config there")
    raw = None
    try:
        raw = read_config_json(config_file)
        config = config_class.from_json_dict(raw, config_file)
    except ConfigError as err:
        if raw is not None:
            _explain_layer_count(config_class, raw, config_file, build, shapes, source)
        raise CheckpointError(str(err)) from None
    config = config.replace(**overrides) if overrides else config
    check_weights_fit(build, config, shapes, source, config_file)
    return config


def check_weights_fit(build: Build, config: BertConfig, shapes: dict[str, tuple[int, ...]], source: Path | str,
                      config_file: Path | str) -> None:
    """Refuse a config whose sizes differ from the weights' (the header's `shapes`), naming the config.json
    field and what the weights hold. `build` makes the model from a config; it runs on the meta device only."""
    layers = _weights_layer_count(build, config, shapes)
    if layers is not None and layers != config.num_hidden_layers:
        raise _field_error(config_file, config, "num_hidden_layers", config.num_hidden_layers, source,
                           f"{layers} layers")
    probe = on_meta(build, config)
    mismatches = _shape_mismatches(probe, shapes)
    if not mismatches:
        return
    key, got, want = mismatches[0]
    named = _field_behind(build, config, key, got, want)
    if named is not None:
        name, value = named
        raise _field_error(config_file, config, name, getattr(config, name) or config.embedding_dim, source,
                           f"{value:,} ({key} has shape {got})")
    raise CheckpointError(f"{source}: tensors that do not fit {type(probe).__name__} (check {config_file}): "
                          + "; ".join(f"{k}: shape {g} in the checkpoint, the model expects {w}"
                                      for k, g, w in mismatches[:8])
                          + (f" (+{len(mismatches) - 8} more)" if len(mismatches) > 8 else ""))


def _field_error(config_file: Path | str, config: BertConfig, name: str, value: int, source: Path | str,
                 held: str) -> CheckpointError:
    return CheckpointError(f"{config_file}: '{type(config).json_name(name)}' is {value:,} but the weights "
                           f"({source}) hold {held}; config.json and the weights do not belong together")


# torch.nn.init's functions that draw or fill values; a shape probe skips them all
_INIT_FUNCTIONS = ("normal_", "trunc_normal_", "uniform_", "constant_", "ones_", "zeros_", "eye_", "dirac_",
                   "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_",
                   "sparse_")


@contextlib.contextmanager
def _no_init_values() -> Iterator[None]:
    """torch.nn.init's functions as no-ops (transformers' `no_init_weights` does the same): a meta tensor has no
    values to draw, and `normal_` on one imports torch._dynamo, seconds in every process that loads a folder."""
    init = torch.nn.init
    saved = {name: getattr(init, name) for name in _INIT_FUNCTIONS if hasattr(init, name)}
    for name in saved:
        setattr(init, name, lambda tensor, *args, **kwargs: tensor)
    try:
        yield
    finally:
        for name, function in saved.items():
            setattr(init, name, function)


def on_meta(build: Callable[[Any], torch.nn.Module], config: Any) -> torch.nn.Module:
    """`build(config)` on the meta device, without initial values: its shapes and parameter counts only."""
    with torch.device("meta"), _no_init_values():
        return build(config)


def _shape_mismatches(probe: torch.nn.Module, shapes: dict[str, tuple[int, ...]]
                      ) -> list[tuple[str, tuple[int, ...], tuple[int, ...]]]:
    """(checkpoint key, its shape, the shape `probe` expects) for every tensor both have with other shapes."""
    names = _name_map(probe)
    expected = _expected_hf_names(probe)
    own = probe.state_dict()
    out = []
    for key, original in _normalised_keys(probe, shapes).items():
        if key not in expected or key in names.tied:
            continue
        internal, _, n_chunks = expected[key]
        want = (own[internal].shape[0] // n_chunks, *own[internal].shape[1:])
        if tuple(shapes[original]) != want:
            out.append((original, tuple(shapes[original]), want))
    return out


def _field_behind(build: Build, config: BertConfig, key: str, got: tuple[int, ...], want: tuple[int, ...]
                  ) -> tuple[str, int] | None:
    """The size field whose change makes the model expect `got` for `key`, and the value it would take. Only
    fields that explain a differing dim of `want` are tried (a dim is the field or a multiple of it: 2 x
    intermediate_size for a gated feed-forward block), each on the meta device."""
    for name in MAX_SIZES:
        value = config.embedding_dim if name == "embedding_size" else getattr(config, name)
        if name == "num_hidden_layers" or not isinstance(value, int) or value <= 0:
            continue
        for have, need in zip(got, want):
            multiple = need // value
            if have == need or need % value or have % multiple:
                continue
            try:
                trial = on_meta(build, config.replace(**{name: have // multiple}))
            except (ConfigError, ValueError, TypeError):
                continue
            if _expected_shape(trial, key) == got:
                return name, have // multiple
    return None


def _expected_shape(model: torch.nn.Module, key: str) -> tuple[int, ...] | None:
    """The shape `model` expects for the checkpoint tensor `key` (None: not one of its tensors)."""
    expected = _expected_hf_names(model)
    normalised = next(iter(_normalised_keys(model, [key])))
    if normalised not in expected:
        return None
    internal, _, n_chunks = expected[normalised]
    shape = model.state_dict()[internal].shape
    return (shape[0] // n_chunks, *shape[1:])


def _weights_layer_count(build: Build, config: BertConfig, shapes: dict[str, tuple[int, ...]]) -> int | None:
    """How many layers the weights hold, from their names (None when the layers share their weights, or no
    name is a layer's)."""
    try:
        one, two = (on_meta(build, config.replace(num_hidden_layers=n)) for n in (1, 2))
    except (ConfigError, ValueError, TypeError):
        return None
    first, both = set(_expected_hf_names(one)), set(_expected_hf_names(two))
    patterns = {_layer_pattern(key, first) for key in both - first} - {None}
    indices = {int(m.group(1)) for key in _normalised_keys(one, shapes) for pattern in patterns
               if (m := pattern.fullmatch(key))}
    return max(indices) + 1 if indices else None


def _layer_pattern(key: str, first_layer_keys: set[str]) -> re.Pattern | None:
    """For a key of layer 1, a pattern of that key in any layer, the layer index its group."""
    parts = key.split(".")
    for i, part in enumerate(parts):
        if part == "1" and ".".join(parts[:i] + ["0"] + parts[i + 1:]) in first_layer_keys:
            return re.compile(r"\.".join([*map(re.escape, parts[:i]), r"(\d+)", *map(re.escape, parts[i + 1:])]))
    return None


def _explain_layer_count(config_class: type, raw: dict[str, Any], config_file: Path, build: Build,
                         shapes: dict[str, tuple[int, ...]], source: Path) -> None:
    """A layer count past the bound is refused by the config itself; when the weights hold another count,
    say that instead, which is what is wrong."""
    name = config_class.json_name("num_hidden_layers")
    value = raw.get(name, raw.get("num_hidden_layers"))
    if isinstance(value, bool) or not isinstance(value, int) or value <= MAX_SIZES["num_hidden_layers"]:
        return
    try:
        config = config_class.from_json_dict({**raw, name: 1, "num_hidden_layers": 1}, config_file)
    except (ConfigError, TypeError):
        return
    layers = _weights_layer_count(build, config, shapes)
    if layers is not None and layers != value:
        raise _field_error(config_file, config, "num_hidden_layers", value, source, f"{layers} layers")


def load_pretrained(cls, path: str | Path, config: Optional[BertConfig] = None, strict: bool = False,
                    **config_overrides: Any):
    """`cls` with the folder's weights. The config's sizes are checked against the weights' shapes (read from
    the safetensors header) before the model is built."""
    config, state, source = read_checkpoint(cls, path, config, **config_overrides)
    model = cls(config)
    load_hf_state_dict(model, state, source=source, strict=strict)
    return model


def read_checkpoint(build: Build, path: str | Path, config: Optional[BertConfig] = None,
                    config_class: Optional[type] = None, **config_overrides: Any
                    ) -> tuple[BertConfig, dict[str, torch.Tensor], Path]:
    """(config, HF-named tensors, weights file) of a checkpoint folder whose config fits its weights, for the
    model `build` makes (a model class, by default also giving the config class)."""
    folder = resolve_folder(path)
    if config is None and not has_config(folder):
        raise CheckpointError(f"{folder}: no {CONFIG_NAME}; pass config= or save the model's config there")
    weights = find_weights(folder)
    shapes = read_weight_shapes(weights)
    if config is None:
        config = read_folder_config(config_class or build.config_class, folder, build, shapes, weights.source,
                                    **config_overrides)
    else:
        config = config.replace(**config_overrides) if config_overrides else config
        check_weights_fit(build, config, shapes, weights.source, "the config given")
    return config, read_tensors(weights), weights.source


def newly_initialized(model: Any) -> list[str]:
    """The weights `model`'s checkpoint did not hold (initialised fresh by `load_hf_state_dict`, Hugging Face names):
    [] for a model that was not loaded from a checkpoint."""
    return list((getattr(model, "loading_info", None) or {}).get("newly_initialized") or [])


def load_hf_state_dict(model: torch.nn.Module, hf_state: dict[str, torch.Tensor], source: Path | str = "<state dict>",
                       strict: bool = False) -> dict[str, list[str]]:
    """Copy HF-named tensors into `model`; returns (and stores in `model.loading_info`) what was missing/unused."""
    names = _name_map(model)
    _, hf_prefix = _base_prefix(model)
    expected = _expected_hf_names(model)

    normalised = {key: hf_state[original] for key, original in _normalised_keys(model, hf_state).items()}

    own_state = model.state_dict()
    assembled: dict[str, list[Optional[torch.Tensor]]] = {}
    unused, unknown, problems = [], [], []
    for key, tensor in normalised.items():
        bare = key[len(hf_prefix):] if hf_prefix and key.startswith(hf_prefix) else key
        if bare in names.ignored or key in names.tied:
            continue
        if key not in expected:
            (unused if bare.startswith(names.head_prefixes) else unknown).append(key)
            continue
        internal, index, n_chunks = expected[key]
        target = own_state[internal]
        want_shape = (target.shape[0] // n_chunks, *target.shape[1:])
        if tuple(tensor.shape) != tuple(want_shape):
            problems.append(f"{key}: shape {tuple(tensor.shape)} in the checkpoint, the model expects "
                            f"{tuple(want_shape)}")
            continue
        if tensor.dtype.is_floating_point != target.dtype.is_floating_point:
            problems.append(f"{key}: dtype {tensor.dtype} in the checkpoint, the model expects {target.dtype}")
            continue
        assembled.setdefault(internal, [None] * n_chunks)[index] = tensor

    if unknown:
        raise CheckpointError(f"{source}: keys that no {type(model).__name__} parameter matches: {_few(sorted(unknown))}"
                              " (is this a BERT checkpoint of the same family?)")
    if problems:
        raise CheckpointError(f"{source}: tensors that do not fit {type(model).__name__} "
                              f"(check config.json): {'; '.join(problems[:8])}"
                              + (f" (+{len(problems) - 8} more)" if len(problems) > 8 else ""))

    to_load: dict[str, torch.Tensor] = {}
    partial = []
    for internal, parts in assembled.items():
        if any(p is None for p in parts):
            partial += [hf for hf, (name, i, _) in expected.items() if name == internal and parts[i] is None]
            continue
        tensor = torch.cat(parts, dim=0) if len(parts) > 1 else parts[0]
        to_load[internal] = tensor.to(own_state[internal].dtype)
    if partial:
        raise CheckpointError(f"{source}: the encoder's weights are incomplete; missing {_few(sorted(partial))}")

    missing = sorted(set(own_state) - set(to_load))
    inner_prefix, _ = _base_prefix(model)
    # a new pooler, or new cross-attention in a decoder warm-started from an encoder, is expected (and reported)
    base_missing = [m for m in missing if _is_base_param(m, inner_prefix, type(model).head_names)
                    and ".pooler." not in f".{m}" and ".cross_attention" not in m]
    if base_missing:
        raise CheckpointError(f"{source}: the encoder's weights are incomplete; missing "
                              f"{_few([' / '.join(_hf_names_of(m, expected)) for m in base_missing])}")
    if missing and strict:
        raise CheckpointError(f"{source}: missing {_few(missing)} (strict=True)")

    model.load_state_dict(to_load, strict=False)
    info = {"newly_initialized": [" / ".join(_hf_names_of(m, expected)) for m in missing], "unused": sorted(unused)}
    model.loading_info = info
    if info["newly_initialized"]:
        logger.warning("%s: newly initialised (not in the checkpoint; train them before use): %s",
                       type(model).__name__, ", ".join(info["newly_initialized"]))
    if info["unused"]:
        logger.warning("%s: checkpoint weights not used by this class: %s", type(model).__name__,
                       _few(info["unused"]))
    return info


def _normalised_keys(model: torch.nn.Module, keys) -> dict[str, str]:
    """The checkpoint's names as the model's table has them (legacy gamma/beta renamed, the base-model prefix
    added where it is missing) -> the names in the checkpoint."""
    names = _name_map(model)
    _, hf_prefix = _base_prefix(model)
    family_prefix = getattr(type(model), "hf_base_prefix", "bert") + "."
    out = {}
    for original in keys:
        key = _legacy_rename(original)
        bare = key[len(family_prefix):] if key.startswith(family_prefix) else key
        out[hf_prefix + bare if not _is_hf_head(bare, names) else bare] = original
    return out


def _is_hf_head(bare_key: str, names: NameMap) -> bool:
    return bare_key.startswith(names.head_prefixes) and not bare_key.startswith(names.base_modules)


def _is_base_param(internal: str, inner_prefix: str, head_names: dict[str, str]) -> bool:
    if inner_prefix:
        return internal.startswith(inner_prefix)
    return not _is_head(internal, head_names)


def _hf_names_of(internal: str, expected: dict[str, tuple[str, int, int]]) -> list[str]:
    return [hf for hf, (name, _, _) in expected.items() if name == internal] or [internal]

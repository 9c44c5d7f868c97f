"""Checkpoints in the Hugging Face layout: `config.json` + `model.safetensors` with HF's parameter names.

Inside, bertforge names its parts freely (and fuses Q/K/V into one projection); this module is the one place
that translates, through a `NameMap` per family. Everything that can go wrong with a checkpoint folder —
missing files, corrupt or truncated tensors, wrong shapes or dtypes, keys nobody knows — becomes a
`CheckpointError` that names the file and the keys, never a bare traceback from inside torch.
"""
from __future__ import annotations

import contextlib
import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional

import torch

from bertforge.atomic import atomic_write_text, atomic_save_safetensors
from bertforge.config import CONFIG_NAME, BertConfig, ConfigError

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
TORCH_WEIGHTS = "pytorch_model.bin"
TORCH_INDEX = "pytorch_model.bin.index.json"


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


def read_state_dict(folder: Path) -> tuple[dict[str, torch.Tensor], Path]:
    """All tensors of the folder's weights (single or sharded, safetensors preferred) and the file read."""
    if (folder / SAFE_WEIGHTS).exists():
        return _read_safetensors(folder / SAFE_WEIGHTS), folder / SAFE_WEIGHTS
    if (folder / SAFE_INDEX).exists():
        return _read_index(folder / SAFE_INDEX, _read_safetensors), folder / SAFE_INDEX
    if (folder / TORCH_WEIGHTS).exists():
        return _read_torch(folder / TORCH_WEIGHTS), folder / TORCH_WEIGHTS
    if (folder / TORCH_INDEX).exists():
        return _read_index(folder / TORCH_INDEX, _read_torch), folder / TORCH_INDEX
    if (folder / "model.onnx").is_file():
        raise CheckpointError(onnx_export_message(folder))
    raise CheckpointError(f"{folder}: no weights file; expected one of {SAFE_WEIGHTS}, {SAFE_INDEX}, "
                          f"{TORCH_WEIGHTS}, {TORCH_INDEX}")


def onnx_export_message(folder: Path) -> str:
    """What to do with an ONNX export given where PyTorch weights are needed: which verbs run it, and which
    folder to give instead (the one `export` read, named in its onnx.json)."""
    source = None
    with contextlib.suppress(OSError, ValueError):
        info = json.loads((folder / "onnx.json").read_text(encoding="utf-8")[:65536])
        source = info.get("exported_from") if isinstance(info, dict) else None
    origin = f" (its onnx.json names {source!r})" if isinstance(source, str) and 0 < len(source) < 200 else ""
    return (f"{folder} is an ONNX export (model.onnx, no PyTorch weights): `bertforge serve --model {folder} "
            f"--backend onnx` runs it, and `bertforge embed --backend onnx` for an encoder; every other command "
            f"needs the model folder it was exported from{origin}")


def _read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors import SafetensorError
    from safetensors.torch import load_file
    try:
        return load_file(str(path))
    except (SafetensorError, OSError, ValueError, RuntimeError) as err:
        raise CheckpointError(f"{path}: not a readable safetensors file (truncated or corrupted?): {err}") from None


def _read_torch(path: Path) -> dict[str, torch.Tensor]:
    try:
        data = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises many kinds here (UnpicklingError, RuntimeError, EOFError...)
        raise CheckpointError(f"{path}: cannot be read as a weights-only PyTorch state dict "
                              f"(corrupted, or it contains code, which is never executed): {err}") from None
    if not isinstance(data, dict) or not all(isinstance(v, torch.Tensor) for v in data.values()):
        raise CheckpointError(f"{path}: expected a dict of tensor name -> tensor")
    return data


def _read_index(index_path: Path, reader) -> dict[str, torch.Tensor]:
    try:
        weight_map = json.loads(index_path.read_text(encoding="utf-8"))["weight_map"]
    except (json.JSONDecodeError, KeyError, TypeError) as err:
        raise CheckpointError(f"{index_path}: not a valid shard index (need a 'weight_map' object): {err}") from None
    tensors: dict[str, torch.Tensor] = {}
    for shard in sorted(set(weight_map.values())):
        shard_path = index_path.parent / shard
        if not shard_path.exists():
            raise CheckpointError(f"{index_path}: lists shard {shard}, which is missing")
        tensors.update(reader(shard_path))
    missing = sorted(set(weight_map) - set(tensors))
    if missing:
        raise CheckpointError(f"{index_path}: keys listed but absent from their shards: {_few(missing)}")
    return tensors


def _few(keys: list[str], n: int = 8) -> str:
    shown = ", ".join(keys[:n])
    return shown + (f" ... (+{len(keys) - n} more)" if len(keys) > n else "")


def load_pretrained(cls, path: str | Path, config: Optional[BertConfig] = None, strict: bool = False,
                    **config_overrides: Any):
    folder = resolve_folder(path)
    if config is None:
        if not (folder / CONFIG_NAME).exists():
            raise CheckpointError(f"{folder}: no {CONFIG_NAME}; pass config= or save the model's config there")
        try:
            config = cls.config_class.from_json_file(folder / CONFIG_NAME)
        except (ConfigError, FileNotFoundError) as err:
            raise CheckpointError(str(err)) from None
    if config_overrides:
        config = config.replace(**config_overrides)
    state, source = read_state_dict(folder)
    model = cls(config)
    load_hf_state_dict(model, state, source=source, strict=strict)
    return model


def load_hf_state_dict(model: torch.nn.Module, hf_state: dict[str, torch.Tensor], source: Path | str = "<state dict>",
                       strict: bool = False) -> dict[str, list[str]]:
    """Copy HF-named tensors into `model`; returns (and stores in `model.loading_info`) what was missing/unused."""
    names = _name_map(model)
    _, hf_prefix = _base_prefix(model)
    family_prefix = getattr(type(model), "hf_base_prefix", "bert") + "."
    expected = _expected_hf_names(model)

    # Normalise the checkpoint's names: legacy gamma/beta, and the base-model prefix present or not.
    normalised: dict[str, torch.Tensor] = {}
    for key, tensor in hf_state.items():
        key = _legacy_rename(key)
        bare = key[len(family_prefix):] if key.startswith(family_prefix) else key
        normalised[hf_prefix + bare if not _is_hf_head(bare, names) else bare] = tensor

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


def _is_hf_head(bare_key: str, names: NameMap) -> bool:
    return bare_key.startswith(names.head_prefixes) and not bare_key.startswith(names.base_modules)


def _is_base_param(internal: str, inner_prefix: str, head_names: dict[str, str]) -> bool:
    if inner_prefix:
        return internal.startswith(inner_prefix)
    return not _is_head(internal, head_names)


def _hf_names_of(internal: str, expected: dict[str, tuple[str, int, int]]) -> list[str]:
    return [hf for hf, (name, _, _) in expected.items() if name == internal] or [internal]

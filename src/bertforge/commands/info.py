"""`bertforge info`: parameter counts and FLOPs of a preset, a config.json or a checkpoint folder."""
from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from bertforge.commands import add_common
from bertforge.commands.flags import add_settings_arguments, settings_from_args
from bertforge.config import config_file
from bertforge.settings import MAX_LENGTH, check_settings, setting


@dataclass
class InfoSettings:
    """The model to describe and the length its FLOPs figure is for. (No library function runs them: the
    counting is a few calls on a meta-device model, here.)"""

    model: str = setting(help="preset name, config.json or checkpoint folder")
    seq_len: int = setting(128, "sequence length for the FLOPs figure", positive=True, maximum=MAX_LENGTH)


def register(sub) -> None:
    p = sub.add_parser("info", help="parameter count and FLOPs per token of a model",
                       description="Print the shape, parameter counts (total, embeddings, encoder layers) and "
                       "training FLOPs per token of a model preset (tiny ... large, or with a family: bert-base, "
                       "albert-base, albert-xxlarge, roberta-mini ...), a config.json or a checkpoint folder.")
    add_settings_arguments(p, InfoSettings)
    add_common(p)
    p.set_defaults(run=run)


def load_config(spec: str):
    """A preset name (optionally family-prefixed), a config.json path or a folder holding one."""
    from bertforge.config import PRESETS
    from bertforge.model.auto import AutoConfig, preset_config
    path = Path(spec)
    kinds = f"a preset ({', '.join(PRESETS)}, or e.g. albert-base), a config.json or a checkpoint folder"
    if path.exists():
        _check_config_file(config_file(path), spec, kinds)
        return AutoConfig.from_pretrained(path)
    if "/" in spec or "\\" in spec or spec.endswith(".json"):
        raise FileNotFoundError(f"--model {spec}: no such file or folder; expected {kinds}")
    return preset_config(spec)


def _check_config_file(file: Path, spec: str, kinds: str) -> None:
    """A file that is not a model's config.json (a text file, some other JSON) is named as such, instead of
    failing as bad JSON or, worse, being read as a BERT-base config with every field at its default. A .json
    file that does not parse is left to the loader, which names the line."""
    if not file.is_file():
        return  # a folder without config.json: the loader names what is missing
    from bertforge.folder_files import SETTINGS_MAX_BYTES, read_folder_bytes
    data = read_folder_bytes(file.parent, file.name, SETTINGS_MAX_BYTES)  # a regular file: no FIFO, no device
    try:
        data = json.loads(data)
    except ValueError:
        if file.suffix.lower() == ".json":
            return
        data = None
    if not isinstance(data, dict) or not ({"model_type", "hidden_size"} & set(data)):
        raise ValueError(f"--model {spec}: {file} is not a model's config.json (no model_type or hidden_size); "
                         f"expected {kinds}")


def _millions(n: int) -> str:
    return f"{n / 1e6:.2f}M"


def run(args: argparse.Namespace) -> int:
    from bertforge.checkpoint import on_meta
    from bertforge.model.auto import family
    settings = settings_from_args(InfoSettings, args)
    check_settings(settings)
    config = load_config(settings.model)
    fam = family(config.model_type)
    encoder = on_meta(fam.model_class("base"), config)  # shapes only: counting even xxlarge allocates nothing
    full = on_meta(fam.model_class("pretraining"), config)
    shape = (f"layers {config.num_hidden_layers}  hidden {config.hidden_size}  heads {config.num_attention_heads}  "
             f"intermediate {config.intermediate_size}  vocab {config.vocab_size}")
    if config.embedding_projection:
        shape += f"  embedding {config.embedding_dim}"
    if config.layer_sharing != "none":
        shape += f"  shared {config.layer_sharing}"
    print(f"{config.model_type}: {shape}")
    print(f"parameters: encoder {_millions(encoder.num_parameters())} "
          f"(without embeddings {_millions(encoder.num_parameters(exclude_embeddings=True))}), "
          f"with pre-training heads {_millions(full.num_parameters())}")
    embeddings = sum(p.numel() for p in encoder.embeddings.parameters())
    layers = sum(p.numel() for p in encoder.encoder.parameters())
    pooler = sum(p.numel() for p in encoder.pooler.parameters()) if encoder.pooler is not None else 0
    projection = encoder.embeddings.projection
    detail = f" (projection E->H {_millions(sum(p.numel() for p in projection.parameters()))})" if projection else ""
    sharing = f", sharing {config.layer_sharing}" if config.layer_sharing != "none" else ""
    print(f"  = embeddings {_millions(embeddings)}{detail} + transformer layers {_millions(layers)} "
          f"({config.num_hidden_layers} layers{sharing}) + pooler {_millions(pooler)}")
    print(f"training FLOPs per token at length {settings.seq_len} (15% masked): "
          f"{full.flops_per_token(settings.seq_len) / 1e6:.1f} MFLOP")
    return 0

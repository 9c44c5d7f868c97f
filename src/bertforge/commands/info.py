"""`bertforge info`: parameter counts and FLOPs of a preset, a config.json or a checkpoint folder."""
from __future__ import annotations

import argparse
from pathlib import Path

from bertforge.commands import add_common


def register(sub) -> None:
    p = sub.add_parser("info", help="parameter count and FLOPs per token of a model",
                       description="Print the shape, parameter count and training FLOPs per token of a model preset "
                       "(tiny, mini, small, medium, base, large), a config.json or a checkpoint folder.")
    p.add_argument("--model", required=True, help="preset name, config.json or checkpoint folder")
    p.add_argument("--seq-len", type=int, default=128)
    add_common(p)
    p.set_defaults(run=run)


def load_config(spec: str):
    """A preset name, a config.json path or a folder holding one."""
    from bertforge.config import PRESETS, BertConfig
    if spec in PRESETS:
        return BertConfig.preset(spec)
    path = Path(spec)
    if not path.exists():
        raise FileNotFoundError(f"--model {spec}: neither a preset ({', '.join(PRESETS)}) nor an existing path")
    return BertConfig.from_pretrained(path)


def run(args: argparse.Namespace) -> int:
    from bertforge import BertForPreTraining, BertModel
    config = load_config(args.model)
    encoder = BertModel(config)
    full = BertForPreTraining(config)
    print(f"layers {config.num_hidden_layers}  hidden {config.hidden_size}  heads {config.num_attention_heads}  "
          f"intermediate {config.intermediate_size}  vocab {config.vocab_size}")
    print(f"parameters: encoder {encoder.num_parameters() / 1e6:.2f}M "
          f"(without embeddings {encoder.num_parameters(exclude_embeddings=True) / 1e6:.2f}M), "
          f"with pre-training heads {full.num_parameters() / 1e6:.2f}M")
    print(f"training FLOPs per token at length {args.seq_len} (15% masked): "
          f"{full.flops_per_token(args.seq_len) / 1e6:.1f} MFLOP")
    return 0

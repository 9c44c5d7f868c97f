"""`bertforge export`: a model folder as ONNX (optionally int8-quantized), ready for `serve --backend onnx`."""
from __future__ import annotations

import argparse
import sys

from bertforge.commands import add_common
from bertforge.commands.flags import add_settings_arguments, settings_from_args


def register(sub) -> None:
    from bertforge.serving.export_settings import ExportSettings
    p = sub.add_parser("export", help="export a model folder to ONNX",
                       description="Write OUTPUT/model.onnx with dynamic batch and sequence axes, plus the "
                                   "folder's config, tokenizer and task files. An encoder folder's first output "
                                   "is last_hidden_state, its second the sentence vectors (pooled and "
                                   "normalised as the folder declares); a fine-tuned folder's are its task "
                                   "logits. --optimize fuses attention, layer norms and GELU with ONNX "
                                   "Runtime's transformer optimizer; --quantize int8 stores onnxruntime's "
                                   "dynamic int8 quantization instead.")
    add_settings_arguments(p, ExportSettings)
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bertforge.serving.export_settings import ExportSettings, export_folder
    from bertforge.serving.onnx_backend import read_info
    path = export_folder(settings_from_args(ExportSettings, args))
    size = path.stat().st_size / 2**20
    print(f"wrote {path} ({size:.1f} MiB{', int8' if args.quantize else ''})", file=sys.stderr)
    price = read_info(path.parent).get("int8_price")
    if price:
        from bertforge.serving.int8_price import Int8Price
        fields = {k: price[k] for k in ("metric", "fp32", "int8", "examples", "fp32_seconds", "int8_seconds", "file")}
        note = f" (over --max-drop {price['max_drop']:g}, kept by --force)" if price["forced"] else ""
        print(Int8Price(**fields).summary() + note, file=sys.stderr)
    if args.optimize:
        fused = read_info(path.parent).get("fused", {})
        print("fused: " + (", ".join(f"{n} {name}" for name, n in fused.items()) or "nothing"), file=sys.stderr)
    return 0

"""`bertforge export`: a model folder as ONNX (optionally int8-quantized), ready for `serve --backend onnx`."""
from __future__ import annotations

import argparse
import sys

from bertforge.commands import add_common
from bertforge.commands.options import add_output_arguments
from bertforge.commands.options import bounded_float, bounded_int


def register(sub) -> None:
    p = sub.add_parser("export", help="export a model folder to ONNX",
                       description="Write OUTPUT/model.onnx with dynamic batch and sequence axes, plus the "
                                   "folder's config, tokenizer and task files. An encoder folder's first output "
                                   "is last_hidden_state, its second the sentence vectors (pooled and "
                                   "normalised as the folder declares); a fine-tuned folder's are its task "
                                   "logits. --optimize fuses attention, layer norms and GELU with ONNX "
                                   "Runtime's transformer optimizer; --quantize int8 stores onnxruntime's "
                                   "dynamic int8 quantization instead.")
    p.add_argument("--model", required=True, metavar="DIR", help="model folder (encoder or fine-tuned)")
    p.add_argument("--format", choices=("onnx",), default="onnx", help="export format")
    add_output_arguments(p, help="folder for the exported model (new or empty, unless --overwrite)")
    p.add_argument("--quantize", choices=("int8",), default=None,
                   help="int8: dynamic quantization of the matrix products' weights (default: none, fp32)")
    p.add_argument("--calibrate-on", metavar="FILE|DIR", default=None,
                   help="with --quantize int8: a labelled dev file (a classifier's or regression predictor's task "
                        "data; scored pairs for an embedding model) or, for an embedding model, a BEIR folder "
                        "(nDCG@10 on its dev or test qrels), to measure the metric and speed int8 costs")
    p.add_argument("--max-drop", type=bounded_float(-100.0, 100.0), default=1.0, metavar="POINTS",
                   help="with --calibrate-on: refuse to write an int8 model that loses more than this many points "
                        "(accuracy, Spearman or nDCG@10 x100; default 1.0)")
    p.add_argument("--force", action="store_true", help="write the int8 model even when it loses more than --max-drop")
    p.add_argument("--optimize", action="store_true",
                   help="apply ONNX Runtime's transformer optimizer (fused attention, skip-layer-norm, GELU)")
    p.add_argument("--opset", type=bounded_int(7, 30), default=17, help="ONNX opset version")
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bertforge.data.identity import check_input_content, record_input_content
    from bertforge.outputs import fresh_output
    from bertforge.serving.onnx_backend import read_info
    from bertforge.serving.onnx_export import export_onnx
    settings = {"model": args.model, "format": args.format, "quantize": args.quantize, "opset": args.opset,
                "optimize": args.optimize, "calibrate_on": args.calibrate_on, "max_drop": args.max_drop,
                "force": args.force}
    if args.calibrate_on is not None and args.quantize is None:
        raise ValueError("--calibrate-on measures what int8 costs: it needs --quantize int8")
    content = check_input_content(args.output, "export", (args.model, args.calibrate_on), args.overwrite)
    with fresh_output(args.output, verb="export", overwrite=args.overwrite, settings=settings,
                      inputs=(args.model, args.calibrate_on)) as output:
        record_input_content(output, content)
        path = export_onnx(args.model, output, quantize=args.quantize, opset=args.opset, optimize=args.optimize,
                           calibrate_on=args.calibrate_on, max_drop=args.max_drop, force=args.force)
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

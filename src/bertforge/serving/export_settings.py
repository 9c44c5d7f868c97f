"""`ExportSettings`: one model folder exported for serving, each setting declared once (default, range, help)
for `export_folder` and the `bertforge export` flags; `export_folder` claims the output and exports into it."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bertforge.settings import SettingError, check_settings, setting

__all__ = ["ExportSettings", "export_folder"]

# settings that do not change the exported files: left out of the record a re-run is compared with
_NOT_RECORDED = ("output", "overwrite")


@dataclass
class ExportSettings:
    """A model folder as ONNX (optionally int8-quantized), ready for `serve --backend onnx`."""

    model: str = setting(help="model folder (encoder or fine-tuned)", metavar="DIR")
    output: str = setting(help="folder for the exported model (new or empty, unless --overwrite)", metavar="DIR")
    format: str = setting("onnx", "export format", choices=("onnx",))
    quantize: str | None = setting(None, "int8: dynamic quantization of the matrix products' weights (default: none, "
                                   "fp32)", choices=("int8",))
    calibrate_on: str | None = setting(
        None, "with --quantize int8: a labelled dev file (a classifier's or regression predictor's task data; scored "
        "pairs for an embedding model) or, for an embedding model, a BEIR folder (nDCG@10 on its dev or test "
        "qrels), to measure the metric and speed int8 costs", metavar="FILE|DIR")
    max_drop: float = setting(1.0, "with --calibrate-on: refuse to write an int8 model that loses more than this many "
                              "points (accuracy, Spearman or nDCG@10 x100)", kind="range", minimum=-100.0,
                              maximum=100.0, metavar="POINTS")
    force: bool = setting(False, "write the int8 model even when it loses more than --max-drop")
    optimize: bool = setting(False, "apply ONNX Runtime's transformer optimizer (fused attention, skip-layer-norm, "
                             "GELU)")
    opset: int = setting(17, "ONNX opset version", kind="range", minimum=7, maximum=30)
    overwrite: bool = setting(False, "empty an existing, non-empty --output folder first (default: refuse it)")


def export_folder(settings: ExportSettings) -> Path:
    """`bertforge export`: claim `settings.output` (a finished export of the same settings there is kept), then
    write model.onnx and the folder's files into it (`onnx_export.export_onnx`); returns the model.onnx path."""
    from bertforge.data.identity import check_input_content, record_input_content
    from bertforge.outputs import fresh_output
    from bertforge.serving.onnx_export import export_onnx
    check_settings(settings)
    if settings.calibrate_on is not None and settings.quantize is None:
        raise SettingError("{calibrate_on} measures what int8 costs: it needs {quantize} int8", owner=ExportSettings)
    inputs = (settings.model, settings.calibrate_on)
    recorded = {k: v for k, v in vars(settings).items() if k not in _NOT_RECORDED}
    content = check_input_content(settings.output, "export", inputs, settings.overwrite)
    with fresh_output(settings.output, verb="export", overwrite=settings.overwrite, settings=recorded,
                      inputs=inputs) as output:
        record_input_content(output, content)
        return export_onnx(settings.model, output, quantize=settings.quantize, opset=settings.opset,
                           optimize=settings.optimize, calibrate_on=settings.calibrate_on, max_drop=settings.max_drop,
                           force=settings.force)

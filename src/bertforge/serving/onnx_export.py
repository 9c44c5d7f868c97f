"""ONNX export of a folder: its model traced into a graph (optionally optimized and int8-quantized) beside copies
of its config, tokenizer and task files, so the output serves with `--backend onnx` (`serving.onnx_backend`).

Export traces the plain padded path of the encoder: the packed (unpadded) fast path plans its layout from
the actual padding of a batch in Python, which a trace would freeze to the example batch.
"""
from __future__ import annotations

import contextlib
import inspect
import json
import logging
import math
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from bertforge.config import CONFIG_NAME, has_config
from bertforge.folder_files import (SETTINGS_MAX_BYTES, SPIECE_MODEL_MAX_BYTES, TOKENIZER_JSON_MAX_BYTES,
                                    VOCAB_MAX_BYTES, check_folder_dir, check_folder_file, copy_folder_file,
                                    folder_has)
from bertforge.serving.onnx_backend import ONNX_FILE, ONNX_INFO, OUTPUTS, SENTENCE_OUTPUT, folder_head
from bertforge.tasks.embedding.pooling import Pooling, pool
from bertforge.tasks.embedding.st_folder import ST_DIRS, ST_FILES
from bertforge.tasks.heads import HEADS
from bertforge.tasks.predictor import TASK_FILE
from bertforge.settings import SettingError
from bertforge.tokenization.auto import TOKENIZER_FOLDER_FILES

# what a served/exported folder carries besides the weights
FOLDER_FILES = (CONFIG_NAME, TASK_FILE, *TOKENIZER_FOLDER_FILES, *ST_FILES)
FOLDER_DIRS = ST_DIRS
QUANTIZE = ("int8",)


class ExportError(SettingError, RuntimeError):
    """An export that cannot be done as asked; the message names the setting to change."""
# the fused kernels ONNX Runtime's transformer optimizer can put in a BERT-family graph
FUSED_OPS = ("EmbedLayerNormalization", "Attention", "MultiHeadAttention", "SkipLayerNormalization", "BiasGelu",
             "Gelu", "FastGelu", "LayerNormalization")


class _ExportWrapper(torch.nn.Module):
    """Positional tensors in, a tuple of the head's outputs out (what the tracer records). With `pooling`, an
    encoder's sentence vectors follow its token vectors: pooled over real tokens and normalised as the folder
    declares, so one call of the graph gives what `SentenceEncoder.encode` computes."""

    def __init__(self, model: torch.nn.Module, input_names: list[str], output_names: tuple[str, ...],
                 pooling: Pooling | None = None) -> None:
        super().__init__()
        self.model, self.input_names, self.output_names, self.pooling = model, input_names, output_names, pooling
        self.extra = {"unpad": False} if accepts(model.forward, "unpad") else {}

    def forward(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        inputs = dict(zip(self.input_names, tensors))
        out = self.model(**inputs, **self.extra)
        values = tuple(getattr(out, name) for name in self.output_names if name != SENTENCE_OUTPUT)
        if self.pooling is None:
            return values
        vectors = pool(values[0], inputs["attention_mask"], self.pooling.mode)
        if self.pooling.normalize:
            # F.normalize's arithmetic, spelled without its expand_as (a Shape and an Expand node in the graph)
            vectors = vectors / vectors.norm(p=2, dim=1, keepdim=True).clamp_min(1e-12)
        return (*values, vectors)


@contextlib.contextmanager
def padded_reference_path(model: torch.nn.Module) -> Iterator[None]:
    """Let `model` take its plain padded reference path in the export layout (`Kernels.export()`: [batch, seq,
    hidden] through the stack, attention spelled out, torch's dropout and decoder) for a while: what a trace can
    record for any batch shape, in the shapes ONNX Runtime's transformer optimizer fuses."""
    from bertforge.model.kernels import Kernels
    if not hasattr(model, "set_kernels"):
        raise ValueError(f"{type(model).__name__} has no reference path to export")
    before = model.kernels
    model.set_kernels(Kernels.export())
    try:
        yield
    finally:
        model.set_kernels(before)


def _load_torch_model(directory: Path, head: str) -> torch.nn.Module:
    from bertforge.model.auto import model_class_for
    role = "base" if head == "encoder" else HEADS[head].model_role
    return model_class_for(directory, role).from_pretrained(directory).eval()


def export_onnx(directory: str | Path, output: str | Path, quantize: str | None = None,
                opset: int = 17, optimize: bool = False, calibrate_on: str | Path | None = None,
                max_drop: float = 1.0, force: bool = False) -> Path:
    """Write `output/model.onnx` (dynamic batch and sequence axes) plus the folder's config, tokenizer and
    task files, so the output serves with `--backend onnx`. An encoder's graph gives its token vectors and its
    sentence vectors (pooled and normalised as the folder declares). `optimize=True` applies ONNX Runtime's
    transformer optimizer (fused attention, skip-layer-norm, embedding and GELU kernels); `quantize="int8"`
    stores the dynamically quantized model (per-channel int8 weights of the matrix products) instead.

    With `calibrate_on` (a labelled file), the int8 graph is scored and timed against the fp32 one on it
    (`int8_price.price_int8`, recorded in onnx.json as "int8_price"); when it loses more than `max_drop` points
    and not `force`, `Int8TooCostly` is raised (the caller removes the output: nothing is kept)."""
    directory, output = Path(directory), Path(output)
    if quantize not in (None, *QUANTIZE):
        raise SettingError("{quantize} {got!r}: choose one of {known}", got=quantize, known=", ".join(QUANTIZE))
    if not has_config(directory):
        raise FileNotFoundError(f"{directory}: no config.json; expected a model folder")
    if output.resolve() == directory.resolve():
        raise SettingError("{output} must be a new folder, not the model folder itself")
    refuse_sparse_attention(directory)
    if calibrate_on is not None and quantize is None:
        raise SettingError("{calibrate_on} measures what int8 costs: it needs {quantize} int8")
    if not math.isfinite(max_drop):  # nan compares false: `drop > nan` would let any int8 graph pass
        raise SettingError("{max_drop} must be a finite number of points; got {got}", got=max_drop)
    copied = folder_files_to_copy(directory)  # every file checked before any work
    output.mkdir(parents=True, exist_ok=True)
    _copy_folder_files(directory, output, copied)
    with tempfile.TemporaryDirectory(dir=output) as tmp:
        fp32 = Path(tmp) / ONNX_FILE
        info = trace_to_onnx(directory, fp32, opset)
        if optimize:
            info["fused"] = optimize_onnx(fp32, fp32, info["num_heads"], info["hidden_size"])
        info.update(optimized=optimize, quantize=quantize, exported_from=directory.name)
        write_info(output, info)  # the folder's export info, read when the graphs are scored
        if quantize == "int8":
            quantize_int8(fp32, output / ONNX_FILE)
            if calibrate_on is not None:
                info["int8_price"] = _checked_price(output, fp32, calibrate_on, max_drop, force)
        else:
            shutil.move(str(fp32), output / ONNX_FILE)
    write_info(output, info)
    return output / ONNX_FILE


#: model types whose attention is planned per batch in Python (windows, global tokens, random blocks)
SPARSE_ATTENTION = {"longformer": "Longformer", "big_bird": "BigBird"}


def refuse_sparse_attention(directory: Path) -> None:
    """Longformer's and BigBird's attention have no ONNX form: a trace would freeze one batch's chunk plan,
    global tokens and random blocks into the graph, wrong for every other batch."""
    from bertforge.config import read_model_config
    family = SPARSE_ATTENTION.get(read_model_config(directory).get("model_type"))
    if family is not None:
        raise ExportError("{model} {path}: a " + family + " folder has no ONNX export (its sparse attention is "
                          "planned from each batch, which a trace would freeze to the example batch); serve it with "
                          "the PyTorch backend", path=str(directory))


def _checked_price(output: Path, fp32: Path, data_file: str | Path, max_drop: float, force: bool) -> dict[str, Any]:
    from bertforge.serving.int8_price import Int8TooCostly, price_int8
    price = price_int8(output, fp32, output / ONNX_FILE, data_file)
    if not all(math.isfinite(v) for v in (price.fp32, price.int8)):  # e.g. Spearman of constant scores
        raise SettingError("{calibrate_on} {file}: the {metric} is undefined on it (fp32 {fp32}, int8 {int8}), so "
                           "int8's cost cannot be measured; no model written (give a file with varied labels or "
                           "scores)", file=data_file, metric=price.metric, fp32=price.fp32, int8=price.int8)
    if price.drop > max_drop and not force:
        raise Int8TooCostly("{price}: loses more than {max_drop} {drop:g} points; no model written ({force} keeps it "
                            "anyway)", price=price.summary(), drop=max_drop)
    return {**price.to_dict(), "max_drop": max_drop, "forced": force and price.drop > max_drop}


def trace_to_onnx(directory: Path, target: Path, opset: int = 17) -> dict[str, Any]:
    """Trace the folder's model (padded export layout, `Kernels.export`) into `target`; returns what onnx.json
    records about the graph: head, inputs, outputs, opset, the sentence pooling, heads and width."""
    from bertforge.tokenization import load_tokenizer
    head = folder_head(directory)
    model = _load_torch_model(directory, head)
    tokenizer = load_tokenizer(directory)
    # two texts of different lengths: the example batch has padding, as served batches do
    enc = tokenizer(["an example sentence to trace the export with", "short"], padding=True,
                    return_tensors="pt")
    input_names = [k for k in ("input_ids", "attention_mask", "token_type_ids")
                   if k in enc and (k != "token_type_ids" or _uses_token_types(model))]
    tensors = [enc[k] for k in input_names]
    axes = {0: "batch", 1: "sequence"}
    if head != "encoder" and HEADS[head].inputs == "choices":
        tensors = [t[:, None].expand(-1, 2, -1).contiguous() for t in tensors]
        axes = {0: "batch", 1: "choices", 2: "sequence"}
    output_names = OUTPUTS[head]
    per_token = head == "encoder" or HEADS[head].per_token
    out_axes = {name: ({0: "batch", 1: "sequence"} if per_token and name != SENTENCE_OUTPUT else {0: "batch"})
                for name in output_names}
    pooling = Pooling.from_folder(directory) if head == "encoder" else None
    wrapper = _ExportWrapper(model, input_names, output_names, pooling)
    with padded_reference_path(model), torch.no_grad(), warnings.catch_warnings():
        # the trace records the padded path for any batch; its Python shape checks are what it warns about
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        torch.onnx.export(wrapper, tuple(tensors), str(target), input_names=input_names,
                          output_names=list(output_names), opset_version=opset, dynamo=False,
                          dynamic_axes={**{n: axes for n in input_names}, **out_axes})
    info: dict[str, Any] = {"head": head, "inputs": input_names, "outputs": list(output_names), "opset": opset,
                            "num_heads": model.config.num_attention_heads, "hidden_size": model.config.hidden_size}
    if pooling is not None:
        info[SENTENCE_OUTPUT] = {"pooling": pooling.mode, "normalize": pooling.normalize}
    return info


def optimize_onnx(source: Path, target: Path, num_heads: int, hidden_size: int) -> dict[str, int]:
    """ONNX Runtime's transformer optimizer (model type bert) over `source`, saved to `target`; returns how
    many of each fused kernel the graph holds. The attention kernels read the raw 0/1 mask, so a batch padded
    on either side is attended correctly. The optimized graph must keep the inputs and the outputs of the
    original on a probe batch: its embedding fusion drops the segment table of an encoder whose embeddings
    are projected (ALBERT, ELECTRA), so when it changes anything the graph is optimized again without it."""
    import onnx
    from onnxruntime.transformers.fusion_options import AttentionMaskFormat, FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model
    reference = _probe_outputs(onnx.load(str(source)))
    for embedding_fusion in (True, False):
        options = FusionOptions("bert")
        options.attention_mask_format = AttentionMaskFormat.AttentionMask
        options.enable_embed_layer_norm = embedding_fusion
        with quantizer_errors_only(), _warnings_and_errors_only():
            optimized = optimize_model(str(source), model_type="bert", num_heads=num_heads, hidden_size=hidden_size,
                                       optimization_options=options)
        if _same_outputs(reference, _probe_outputs(optimized.model)):
            optimized.save_model_to_file(str(target))
            return count_fused(optimized.model)
    raise ExportError("{source}: ONNX Runtime's optimizer changed what the graph computes; export without "
                      "{optimize}", source=source)


def _probe_outputs(model) -> dict[str, Any]:
    """The graph's outputs on a small padded batch (ids 1-5: every vocabulary has them), by input name."""
    import numpy as np
    import onnxruntime as ort
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    ids = np.array([[2, 3, 4, 5, 3, 2, 1], [2, 4, 5, 1, 0, 0, 0]], dtype=np.int64)
    given = {"input_ids": ids, "attention_mask": (ids > 0).astype(np.int64), "token_type_ids": np.zeros_like(ids)}
    feed = {}
    for graph_input in session.get_inputs():
        value = given[graph_input.name]
        if len(graph_input.shape) == 3:  # multiple choice: [batch, choices, sequence]
            value = np.repeat(value[:, None], 2, axis=1)
        feed[graph_input.name] = value
    names = [o.name for o in session.get_outputs()]
    return {"inputs": sorted(feed), **dict(zip(names, session.run(names, feed)))}


def _same_outputs(a: dict[str, Any], b: dict[str, Any], atol: float = 1e-3) -> bool:
    import numpy as np
    if a.keys() != b.keys() or a["inputs"] != b["inputs"]:
        return False
    return all(np.allclose(a[k], b[k], atol=atol) for k in a if k != "inputs")


def count_fused(model) -> dict[str, int]:
    """{fused kernel: nodes} for the kernels in `FUSED_OPS` that `model` (an onnx ModelProto) holds."""
    counts = {name: 0 for name in FUSED_OPS}
    for node in model.graph.node:
        if node.op_type in counts:
            counts[node.op_type] += 1
    return {name: n for name, n in counts.items() if n}


def quantize_int8(source: Path, target: Path) -> None:
    """onnxruntime's dynamic int8 quantization: int8 weights per output channel, activations quantized per call."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    # per-channel scales: on SST-2 they kept accuracy that one scale per matrix lost
    with quantizer_errors_only():
        quantize_dynamic(str(source), str(target), weight_type=QuantType.QInt8, per_channel=True)


def write_info(output: Path, info: dict[str, Any]) -> Path:
    from bertforge.atomic import atomic_write_text
    # allow_nan=False: a bare NaN is not JSON (strict readers refuse the file), and a NaN score is no score
    atomic_write_text(output / ONNX_INFO, json.dumps(info, indent=2, allow_nan=False) + "\n")
    return output / ONNX_INFO


@contextlib.contextmanager
def _warnings_and_errors_only() -> Iterator[None]:
    """ONNX Runtime's optimizer logs each fusion step and the file it saves through loggers named after its own
    modules (they are imported without their package name); for the call, records below WARNING are dropped."""
    before = logging.root.manager.disable
    logging.disable(logging.INFO)
    try:
        yield
    finally:
        logging.disable(before)


def accepts(func, name: str) -> bool:
    """Whether `func` takes a keyword argument `name` (the families' forwards differ in what they take)."""
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


class _ErrorsOnly(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR


@contextlib.contextmanager
def quantizer_errors_only() -> Iterator[None]:
    """onnxruntime's quantizer reports every tensor and matrix product it leaves alone (about 40 lines for a small
    BERT) through the root logger itself (`logging.info`, `logging.warning`); while it runs, the root logger passes
    on its errors only. Named loggers (bertforge's own) are untouched: their records reach the handlers without
    going through the root logger's filters."""
    root, only_errors = logging.getLogger(), _ErrorsOnly()
    root.addFilter(only_errors)
    try:
        yield
    finally:
        root.removeFilter(only_errors)


def _uses_token_types(model: torch.nn.Module) -> bool:
    relative = getattr(model.config, "model_type", None) == "xlnet"  # relative segments: read, though no table
    return accepts(model.forward, "token_type_ids") and (relative or getattr(model.config, "type_vocab_size", 0) > 0)


def folder_files_to_copy(source: Path) -> list[str]:
    """The folder's config, task, tokenizer and sentence-transformers files that export copies, each checked as a
    file of the folder (a regular file inside it, of bounded size) before any work: never a file a link points
    to outside the folder, a FIFO or a device."""
    names = [name for name in FOLDER_FILES if folder_has(source, name)]
    for name in FOLDER_DIRS:
        if folder_has(source, name):
            check_folder_dir(source, name)
            # the loaders read files of these folders only
            names += [f"{name}/{entry.name}" for entry in sorted((source / name).iterdir())
                      if not (entry.is_dir() and not entry.is_symlink())]
    for name in names:
        check_folder_file(source, name, _max_bytes(name))
    return names


def _copy_folder_files(source: Path, target: Path, names: list[str]) -> None:
    for name in names:
        (target / name).parent.mkdir(exist_ok=True)
        copy_folder_file(source, name, target / name, _max_bytes(name))  # checked again as it is read


def _max_bytes(name: str) -> int:
    if name in ("vocab.txt", "vocab.json", "merges.txt"):
        return VOCAB_MAX_BYTES
    return {"tokenizer.json": TOKENIZER_JSON_MAX_BYTES, "spiece.model": SPIECE_MODEL_MAX_BYTES}.get(
        name, SETTINGS_MAX_BYTES)

"""ONNX export of a folder and an onnxruntime model that stands in for the PyTorch one.

Export traces the plain padded path of the encoder: the packed (unpadded) fast path plans its layout from
the actual padding of a batch in Python, which a trace would freeze to the example batch. `OnnxModel` is
called like a bertforge model (`model(**inputs).logits` / `.last_hidden_state` / `.start_logits`), so the
`Predictor` and `SentenceEncoder` run on it unchanged.
"""
from __future__ import annotations

import contextlib
import inspect
import json
import logging
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from bertforge.folder_files import (SETTINGS_MAX_BYTES, SPIECE_MODEL_MAX_BYTES, TOKENIZER_JSON_MAX_BYTES,
                                    VOCAB_MAX_BYTES, WEIGHTS_MAX_BYTES, check_folder_dir, check_folder_file,
                                    copy_folder_file, folder_has, read_folder_json)

ONNX_FILE = "model.onnx"
ONNX_INFO = "onnx.json"
# what a served/exported folder carries besides the weights
FOLDER_FILES = ("config.json", "task.json", "vocab.txt", "tokenizer.json", "tokenizer_config.json",
                "special_tokens_map.json", "vocab.json", "merges.txt", "spiece.model", "modules.json",
                "sentence_bert_config.json", "config_sentence_transformers.json")
FOLDER_DIRS = ("1_Pooling", "2_Normalize")
QUANTIZE = ("int8",)

# head -> output names, in the order the model returns them
OUTPUTS = {"encoder": ("last_hidden_state",), "sequence_classification": ("logits",), "regression": ("logits",),
           "token_classification": ("logits",), "multiple_choice": ("logits",),
           "question_answering": ("start_logits", "end_logits")}


class _ExportWrapper(torch.nn.Module):
    """Positional tensors in, a tuple of the head's outputs out (what the tracer records)."""

    def __init__(self, model: torch.nn.Module, input_names: list[str], output_names: tuple[str, ...]) -> None:
        super().__init__()
        self.model, self.input_names, self.output_names = model, input_names, output_names
        self.extra = {"unpad": False} if accepts(model.forward, "unpad") else {}

    def forward(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = self.model(**dict(zip(self.input_names, tensors)), **self.extra)
        return tuple(getattr(out, name) for name in self.output_names)


@contextlib.contextmanager
def padded_reference_path(model: torch.nn.Module) -> Iterator[None]:
    """Let `model` take its plain padded reference path (`Kernels.reference()`: one [batch, seq] attention grid,
    plain reshapes, torch's dropout and decoder) for a while: what a trace can record for any batch shape."""
    from bertforge.model.kernels import Kernels
    if not hasattr(model, "set_kernels"):
        raise ValueError(f"{type(model).__name__} has no reference path to export")
    before = model.kernels
    model.set_kernels(Kernels.reference())
    try:
        yield
    finally:
        model.set_kernels(before)


def folder_head(directory: Path) -> str:
    """"encoder" for a plain/embedding/MLM folder, else the head named in task.json."""
    task_file = directory / "task.json"
    if not folder_has(directory, "task.json"):
        return "encoder"
    task = read_folder_json(directory, "task.json")
    head = task.get("head") if isinstance(task, dict) else None
    if not isinstance(head, str):
        raise ValueError(f"{task_file}: expected a JSON object with a \"head\" field")
    if head not in OUTPUTS:
        raise ValueError(f"{task_file}: head {head!r} cannot be exported; known heads: {', '.join(OUTPUTS)}")
    return head


def _load_torch_model(directory: Path, head: str) -> torch.nn.Module:
    from bertforge.model.auto import model_class_for
    return model_class_for(directory, "base" if head == "encoder" else head).from_pretrained(directory).eval()


def export_onnx(directory: str | Path, output: str | Path, quantize: str | None = None,
                opset: int = 17) -> Path:
    """Write `output/model.onnx` (dynamic batch and sequence axes) plus the folder's config, tokenizer and
    task files, so the output serves with `--backend onnx`. `quantize="int8"` stores the dynamically
    quantized model (per-channel int8 weights of the matrix products) instead of the fp32 one."""
    from bertforge.tokenization import load_tokenizer
    directory, output = Path(directory), Path(output)
    if quantize not in (None, *QUANTIZE):
        raise ValueError(f"--quantize {quantize!r}: choose one of {', '.join(QUANTIZE)}")
    if not folder_has(directory, "config.json"):
        raise FileNotFoundError(f"{directory}: no config.json; expected a model folder")
    if output.resolve() == directory.resolve():
        raise ValueError("--output must be a new folder, not the model folder itself")
    head = folder_head(directory)
    copied = folder_files_to_copy(directory)
    model = _load_torch_model(directory, head)
    tokenizer = load_tokenizer(directory)
    # two texts of different lengths: the example batch has padding, as served batches do
    enc = tokenizer(["an example sentence to trace the export with", "short"], padding=True,
                    return_tensors="pt")
    input_names = [k for k in ("input_ids", "attention_mask", "token_type_ids")
                   if k in enc and (k != "token_type_ids" or _uses_token_types(model))]
    tensors = [enc[k] for k in input_names]
    axes = {0: "batch", 1: "sequence"}
    if head == "multiple_choice":
        tensors = [t[:, None].expand(-1, 2, -1).contiguous() for t in tensors]
        axes = {0: "batch", 1: "choices", 2: "sequence"}
    output_names = OUTPUTS[head]
    out_axes = {name: ({0: "batch", 1: "sequence"} if head in ("encoder", "token_classification",
                                                                 "question_answering") else {0: "batch"})
                for name in output_names}
    output.mkdir(parents=True, exist_ok=True)
    wrapper = _ExportWrapper(model, input_names, output_names)
    with tempfile.TemporaryDirectory(dir=output) as tmp:
        fp32 = Path(tmp) / ONNX_FILE
        with padded_reference_path(model), torch.no_grad(), warnings.catch_warnings():
            # the trace records the padded path for any batch; its Python shape checks are what it warns about
            warnings.simplefilter("ignore", torch.jit.TracerWarning)
            torch.onnx.export(wrapper, tuple(tensors), str(fp32), input_names=input_names,
                              output_names=list(output_names), opset_version=opset, dynamo=False,
                              dynamic_axes={**{n: axes for n in input_names}, **out_axes})
        if quantize == "int8":
            from onnxruntime.quantization import QuantType, quantize_dynamic
            # per-channel scales: on SST-2 they kept accuracy that one scale per matrix lost
            with quantizer_errors_only():
                quantize_dynamic(str(fp32), str(output / ONNX_FILE), weight_type=QuantType.QInt8, per_channel=True)
        else:
            shutil.move(str(fp32), output / ONNX_FILE)
    _copy_folder_files(directory, output, copied)
    info = {"head": head, "inputs": input_names, "outputs": list(output_names), "opset": opset,
            "quantize": quantize, "exported_from": directory.name}
    (output / ONNX_INFO).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return output / ONNX_FILE


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
    return accepts(model.forward, "token_type_ids") and getattr(model.config, "type_vocab_size", 0) > 0


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


class OnnxModel:
    """An onnxruntime session that answers like a bertforge model: `model(**inputs).<output name>` tensors."""

    def __init__(self, session, config, path: Path | None = None) -> None:
        self.session = session
        self.config = config
        self.path = path
        self.input_names = [i.name for i in session.get_inputs()]
        self.output_names = [o.name for o in session.get_outputs()]

    @classmethod
    def from_pretrained(cls, directory: str | Path, device: str = "cpu", threads: int | None = None) -> OnnxModel:
        import onnxruntime as ort

        from bertforge.model.auto import AutoConfig
        directory = Path(directory)
        if not folder_has(directory, ONNX_FILE):
            raise FileNotFoundError(f"{directory}: no {ONNX_FILE}; make one with `bertforge export --format onnx`")
        file = check_folder_file(directory, ONNX_FILE, WEIGHTS_MAX_BYTES)  # no link out of the folder, FIFO, device
        if device in ("auto", "cpu"):
            providers = ["CPUExecutionProvider"]
        elif device.startswith("cuda"):
            if "CUDAExecutionProvider" not in ort.get_available_providers():
                raise RuntimeError("--device cuda with --backend onnx needs onnxruntime-gpu")
            providers = ["CUDAExecutionProvider", "CPUExecutionProvider"]
        else:
            raise ValueError(f"unknown device {device!r} for the onnx backend; choose cpu or cuda")
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or torch.get_num_threads()
        session = ort.InferenceSession(str(file), options, providers=providers)
        return cls(session, AutoConfig.from_pretrained(directory), directory)

    def eval(self) -> OnnxModel:
        return self

    def to(self, *args: Any, **kwargs: Any) -> OnnxModel:
        return self

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                 token_type_ids: torch.Tensor | None = None, **_: Any) -> SimpleNamespace:
        given = {"input_ids": input_ids,
                 "attention_mask": attention_mask if attention_mask is not None else torch.ones_like(input_ids),
                 "token_type_ids": token_type_ids if token_type_ids is not None else torch.zeros_like(input_ids)}
        feed = {name: given[name].detach().cpu().numpy().astype("int64") for name in self.input_names}
        values = self.session.run(self.output_names, feed)
        return SimpleNamespace(**{name: torch.from_numpy(v) for name, v in zip(self.output_names, values)})

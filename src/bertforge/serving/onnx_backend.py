"""An onnxruntime model that stands in for the PyTorch one, and what an exported folder declares about its graph.

`OnnxModel` is called like a bertforge model (`model(**inputs).logits` / `.last_hidden_state` / `.start_logits`),
so the `Predictor` and `SentenceEncoder` run on it unchanged. Export (tracing, optimizing, quantizing, copying the
folder's files) is `serving.onnx_export`.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from bertforge.device import DeviceError
from bertforge.folder_files import WEIGHTS_MAX_BYTES, check_folder_file, folder_has, read_folder_json
from bertforge.tasks.heads import HEADS

ONNX_FILE = "model.onnx"
ONNX_INFO = "onnx.json"
SENTENCE_OUTPUT = "sentence_embedding"

# head -> output names, in the order the graph returns them (an encoder's sentence vectors are pooled in the graph)
OUTPUTS = {"encoder": ("last_hidden_state", SENTENCE_OUTPUT), **{name: h.onnx_outputs for name, h in HEADS.items()}}


def folder_head(directory: Path) -> str:
    """"encoder" for a plain/embedding/MLM folder, else the head of its predictor's task.json (read and checked by
    `tasks.predictor.read_task_file`, as `Predictor.load` reads it)."""
    from bertforge.tasks.predictor import TASK_FILE, is_predictor_folder, read_task_file
    if not is_predictor_folder(directory):
        return "encoder"
    head = read_task_file(directory)["head"]
    if head not in OUTPUTS:
        raise ValueError(f"{directory / TASK_FILE}: head {head!r} cannot be exported; known heads: {', '.join(OUTPUTS)}")
    return head


def read_info(directory: Path) -> dict[str, Any]:
    """onnx.json of an exported folder, or {} when it has none."""
    if not folder_has(Path(directory), ONNX_INFO):
        return {}
    info = read_folder_json(Path(directory), ONNX_INFO)
    return info if isinstance(info, dict) else {}


class OnnxModel:
    """An onnxruntime session that answers like a bertforge model: `model(**inputs).<output name>` tensors."""

    def __init__(self, session, config, path: Path | None = None) -> None:
        self.session = session
        self.config = config
        self.path = path
        self.input_names = [i.name for i in session.get_inputs()]
        self.output_names = [o.name for o in session.get_outputs()]
        # (mode, normalize) of the graph's own sentence vectors, or None when it has none
        pooled = read_info(path).get(SENTENCE_OUTPUT) if path is not None else None
        self.sentence_pooling = ((pooled.get("pooling"), bool(pooled.get("normalize")))
                                 if isinstance(pooled, dict) and SENTENCE_OUTPUT in self.output_names else None)

    @classmethod
    def from_pretrained(cls, directory: str | Path, device: str = "cpu", threads: int | None = None,
                        file: str | Path | None = None) -> OnnxModel:
        """`file`: another graph than the folder's model.onnx, with the folder's config and export info."""
        import onnxruntime as ort

        from bertforge.model.auto import AutoConfig
        directory = Path(directory)
        if file is not None:
            file = Path(file)
        elif not folder_has(directory, ONNX_FILE):
            raise FileNotFoundError(f"{directory}: no {ONNX_FILE}; make one with `bertforge export --format onnx`")
        else:
            file = check_folder_file(directory, ONNX_FILE, WEIGHTS_MAX_BYTES)  # no link out of the folder, FIFO
        if device in ("auto", "cpu"):
            providers = ["CPUExecutionProvider"]
        elif device.startswith("cuda"):
            if "CUDAExecutionProvider" not in ort.get_available_providers():
                raise DeviceError("{device} cuda with {backend} onnx needs onnxruntime-gpu")
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
                 token_type_ids: torch.Tensor | None = None, outputs: Sequence[str] | None = None,
                 **_: Any) -> SimpleNamespace:
        """`outputs`: the graph outputs to fetch (default all)."""
        given = {"input_ids": input_ids,
                 "attention_mask": attention_mask if attention_mask is not None else torch.ones_like(input_ids),
                 "token_type_ids": token_type_ids if token_type_ids is not None else torch.zeros_like(input_ids)}
        feed = {name: given[name].detach().cpu().numpy().astype("int64") for name in self.input_names}
        names = list(outputs) if outputs is not None else self.output_names
        values = self.session.run(names, feed)
        return SimpleNamespace(**{name: torch.from_numpy(v) for name, v in zip(names, values)})

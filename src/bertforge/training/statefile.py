"""Nested training state on disk without pickle: tensors in a safetensors file, the rest in JSON.

A training state mixes tensors (optimizer moments, torch's RNG), numpy arrays (numpy's RNG), tuples
(Python's RNG, Adam's betas), dicts with int keys (optimizer state by parameter index) and plain numbers.
`torch.save` keeps all of that by pickling, and loading a pickle runs whatever code it names, so a checkpoint
folder someone hands you could run code. Here every container and scalar becomes JSON, every tensor or array
becomes an entry of the safetensors file referenced from the JSON by name, and loading only ever builds those
few types back: reading a tampered file gives a `CheckpointError` naming the file and the field, never code.

Encoding (JSON objects with one reserved ``__key__`` mark everything JSON has no type for)::

    {"__tensor__": name}   torch tensor stored under `name`      {"__tuple__": [...]}       a tuple
    {"__ndarray__": name}  numpy array stored under `name`       {"__dict__": [[k, v], ..]} a dict whose keys
    {"__numpy__": [dtype, value]}  a numpy scalar                  are not all plain strings (int keys)
    {"__float__": "nan" | "inf" | "-inf"}  a non-finite float

Floats are written with Python's shortest round-tripping repr, so every value comes back bit for bit.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bertforge.checkpoint import CheckpointError

FORMAT = "bertforge-training-state"
VERSION = 1
_TAGS = ("__tensor__", "__ndarray__", "__tuple__", "__dict__", "__numpy__", "__float__")
_NUMPY_SCALAR_KINDS = "biuf"  # bool, int, unsigned, float: what a numpy scalar in a training state can be
_KEY_TYPES = (str, int, float, bool, type(None))


# ---- writing -------------------------------------------------------------------------------------------------
class _Encoder:
    def __init__(self) -> None:
        self.tensors: dict[str, torch.Tensor] = {}
        self._storages: set[tuple[int, int]] = set()

    def _name(self, path: str) -> str:
        name, n = path or "<root>", 1
        while name in self.tensors:
            n += 1
            name = f"{path}#{n}"
        return name

    def _store(self, tensor: torch.Tensor, path: str) -> str:
        t = tensor.detach().cpu()
        storage = (t.untyped_storage().data_ptr(), t.untyped_storage().nbytes())
        owns_storage = t.is_contiguous() and t.storage_offset() == 0 and storage[1] == t.numel() * t.element_size()
        if not owns_storage or storage in self._storages or t.numel() == 0:
            t = t.clone(memory_format=torch.contiguous_format)  # safetensors refuses views and shared memory
        else:
            self._storages.add(storage)
        name = self._name(path)
        self.tensors[name] = t
        return name

    def encode(self, value: Any, path: str) -> Any:
        if value is None or isinstance(value, (bool, int, str)):
            return value
        if isinstance(value, float):
            return value if math.isfinite(value) else {"__float__": repr(value)}
        if isinstance(value, torch.Tensor):
            return {"__tensor__": self._store(value, path)}
        if isinstance(value, np.ndarray):
            if value.dtype.kind not in _NUMPY_SCALAR_KINDS or not value.dtype.isnative:
                raise TypeError(f"training state at {path or '<root>'}: cannot store a numpy array of dtype "
                                f"{value.dtype}")
            return {"__ndarray__": self._store(torch.from_numpy(np.ascontiguousarray(value)), path)}
        if isinstance(value, np.generic):
            if value.dtype.kind not in _NUMPY_SCALAR_KINDS:
                raise TypeError(f"training state at {path or '<root>'}: cannot store a numpy {value.dtype} scalar")
            return {"__numpy__": [value.dtype.str, self.encode(value.item(), path)]}
        if isinstance(value, tuple):
            return {"__tuple__": [self.encode(v, f"{path}/{i}") for i, v in enumerate(value)]}
        if isinstance(value, list):
            return [self.encode(v, f"{path}/{i}") for i, v in enumerate(value)]
        if isinstance(value, dict):
            for k in value:
                if not isinstance(k, _KEY_TYPES):
                    raise TypeError(f"training state at {path or '<root>'}: cannot store a dict key of type "
                                    f"{type(k).__name__}")
            if all(isinstance(k, str) and not k.startswith("__") for k in value):
                return {k: self.encode(v, f"{path}/{k}") for k, v in value.items()}
            return {"__dict__": [[self.encode(k, path), self.encode(v, f"{path}/{k}")] for k, v in value.items()]}
        raise TypeError(f"training state at {path or '<root>'}: cannot store a {type(value).__name__} "
                        "(tensors, numpy arrays and scalars, dicts, lists, tuples, numbers, str, bool, None only)")


def dump_state(state: Any) -> tuple[str, dict[str, torch.Tensor]]:
    """(JSON text, tensors by name) for `state`; write the tensors with safetensors."""
    encoder = _Encoder()
    body = encoder.encode(state, "")
    text = json.dumps({"format": FORMAT, "version": VERSION, "state": body}, indent=1, allow_nan=False)
    return text + "\n", encoder.tensors


def save_state(state: Any, json_path: str | Path, tensors_path: str | Path) -> None:
    """Write `state` as JSON + safetensors (plain writes: the caller makes the folder atomic)."""
    from safetensors.torch import save_file
    text, tensors = dump_state(state)
    save_file(tensors, str(tensors_path), metadata={"format": "pt", "producer": FORMAT})
    Path(json_path).write_text(text, encoding="utf-8")


# ---- reading -------------------------------------------------------------------------------------------------
class _Decoder:
    def __init__(self, tensors: dict[str, torch.Tensor], source: Path) -> None:
        self.tensors, self.source = tensors, source

    def fail(self, path: str, why: str) -> CheckpointError:
        return CheckpointError(f"{self.source}: field {path or '<root>'}: {why}")

    def tensor(self, name: Any, path: str) -> torch.Tensor:
        if not isinstance(name, str):
            raise self.fail(path, f"expected a tensor name (a string), got {type(name).__name__}")
        if name not in self.tensors:
            raise self.fail(path, f"refers to tensor {name!r}, which the tensors file does not hold")
        return self.tensors[name]

    def decode(self, value: Any, path: str) -> Any:
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, list):
            return [self.decode(v, f"{path}/{i}") for i, v in enumerate(value)]
        if not isinstance(value, dict):
            raise self.fail(path, f"unexpected JSON value of type {type(value).__name__}")
        tag = next(iter(value)) if len(value) == 1 else None
        if tag is None or tag not in _TAGS:
            bad = [k for k in value if k.startswith("__")]
            if bad:
                raise self.fail(path, f"unknown or misplaced mark {bad[0]!r} (expected one of {', '.join(_TAGS)})")
            return {k: self.decode(v, f"{path}/{k}") for k, v in value.items()}
        body = value[tag]
        if tag == "__tensor__":
            return self.tensor(body, path)
        if tag == "__ndarray__":
            try:
                return self.tensor(body, path).numpy().copy()
            except (TypeError, RuntimeError) as err:
                raise self.fail(path, f"tensor {body!r} cannot be a numpy array: {err}") from None
        if tag == "__tuple__":
            if not isinstance(body, list):
                raise self.fail(path, f"__tuple__ must hold a list, got {type(body).__name__}")
            return tuple(self.decode(v, f"{path}/{i}") for i, v in enumerate(body))
        if tag == "__float__":
            if body not in ("nan", "inf", "-inf"):
                raise self.fail(path, f"__float__ must be 'nan', 'inf' or '-inf', got {body!r}")
            return float(body)
        if tag == "__numpy__":
            return self._numpy_scalar(body, path)
        return self._dict(body, path)

    def _numpy_scalar(self, body: Any, path: str) -> np.generic:
        if not (isinstance(body, list) and len(body) == 2 and isinstance(body[0], str)):
            raise self.fail(path, "__numpy__ must hold [dtype string, value]")
        try:
            dtype = np.dtype(body[0])
        except TypeError:
            raise self.fail(path, f"unknown numpy dtype {body[0]!r}") from None
        number = self.decode(body[1], path)
        if dtype.kind not in _NUMPY_SCALAR_KINDS or not isinstance(number, (bool, int, float)):
            raise self.fail(path, f"a numpy scalar must be a bool/int/float of a numeric dtype, got {body!r}")
        return dtype.type(number)

    def _dict(self, body: Any, path: str) -> dict:
        if not isinstance(body, list) or not all(isinstance(p, list) and len(p) == 2 for p in body):
            raise self.fail(path, "__dict__ must hold a list of [key, value] pairs")
        out = {}
        for key, item in body:
            if not isinstance(key, _KEY_TYPES):
                raise self.fail(path, f"a dict key must be a string, number, bool or null, got {key!r}")
            out[key] = self.decode(item, f"{path}/{key}")
        return out


def load_state(json_path: str | Path, tensors_path: str | Path) -> Any:
    """The state `save_state` wrote. Anything malformed raises `CheckpointError` (a one-line message)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file
    json_path, tensors_path = Path(json_path), Path(tensors_path)
    try:
        doc = json.loads(json_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{json_path}: missing") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{json_path}: not valid JSON ({err})") from None
    except RecursionError:
        raise CheckpointError(f"{json_path}: nested too deeply to be a training state") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or "state" not in doc:
        raise CheckpointError(f"{json_path}: not a bertforge training state (expected an object with "
                              f"\"format\": \"{FORMAT}\" and \"state\")")
    if doc.get("version") != VERSION:
        raise CheckpointError(f"{json_path}: training-state version {doc.get('version')!r}; this bertforge "
                              f"reads version {VERSION}")
    try:
        tensors = load_file(str(tensors_path))
    except FileNotFoundError:
        raise CheckpointError(f"{tensors_path}: missing (it holds the tensors {json_path.name} refers to)") from None
    except (SafetensorError, OSError, ValueError, RuntimeError) as err:
        raise CheckpointError(f"{tensors_path}: not a readable safetensors file (truncated or corrupted?): "
                              f"{err}") from None
    try:
        return _Decoder(tensors, json_path).decode(doc["state"], "")
    except RecursionError:
        raise CheckpointError(f"{json_path}: nested too deeply to be a training state") from None

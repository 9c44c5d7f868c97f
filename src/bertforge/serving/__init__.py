"""Serving and export: sentence embeddings, an HTTP server with dynamic batching, and ONNX export.

Names are imported lazily so `import bertforge.serving` does not pull in FastAPI or onnxruntime.
"""
from __future__ import annotations

import importlib
from typing import Any

_NAMES = {
    "SentenceEncoder": "bertforge.serving.embeddings",
    "Pooling": "bertforge.serving.embeddings",
    "OnnxModel": "bertforge.serving.onnx_backend",
    "export_onnx": "bertforge.serving.onnx_export",
    "ServedModel": "bertforge.serving.served_model",
    "ServeSettings": "bertforge.serving.settings",
    "ServerSettings": "bertforge.serving.settings",
    "serve_folder": "bertforge.serving.server",
    "create_app": "bertforge.serving.app",
}

__all__ = ["OnnxModel", "Pooling", "SentenceEncoder", "ServeSettings", "ServedModel", "ServerSettings", "create_app",
           "export_onnx", "serve_folder"]


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module 'bertforge.serving' has no attribute {name!r}")
    return getattr(importlib.import_module(_NAMES[name]), name)

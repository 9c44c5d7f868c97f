"""The sentence-transformers folder: the files beside a model folder that say how it embeds, read and written here.

`modules.json` lists the modules in order; a `Pooling` module's `config.json` (in `1_Pooling/` as bertforge and
sentence-transformers write it) names the pooling, as one `pooling_mode` (sentence-transformers >= 6: a name, or
a list of names) or one `pooling_mode_*` boolean per mode (the older layout); a `Normalize` module asks for
unit-length vectors; `sentence_bert_config.json` gives the length it truncates to. Every file is read through
`bertforge.folder_files` (a regular file inside the folder, of bounded size).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bertforge.atomic import atomic_write_text
from bertforge.folder_files import folder_has, read_folder_json

POOLING_MODES = ("mean", "cls", "max")
MODULES_FILE = "modules.json"
POOLING_DIR = "1_Pooling"
NORMALIZE_DIR = "2_Normalize"
SBERT_CONFIG = "sentence_bert_config.json"
ST_CONFIG = "config_sentence_transformers.json"
ST_FILES = (MODULES_FILE, SBERT_CONFIG, ST_CONFIG)  # at the folder's top, beside config.json
ST_DIRS = (POOLING_DIR, NORMALIZE_DIR)


def is_sentence_transformers_folder(directory: str | Path) -> bool:
    """Whether `directory` holds a modules.json (a regular file inside it)."""
    return folder_has(directory, MODULES_FILE)


def read_pooling_settings(directory: str | Path) -> tuple[str, bool, int | None] | None:
    """(pooling mode, normalize, max_seq_length) a sentence-transformers folder declares; None for a folder
    without modules.json. Errors name the file and what was expected."""
    folder = Path(directory)
    if not is_sentence_transformers_folder(folder):
        return None
    modules = read_folder_json(folder, MODULES_FILE)
    if not isinstance(modules, list):
        raise ValueError(f"{folder / MODULES_FILE}: expected a JSON list of modules")  # noqa: TRY004 - bad file
    mode, normalize = "mean", False
    for module in modules:
        kind = str(module.get("type", "")).rsplit(".", 1)[-1] if isinstance(module, dict) else ""
        if kind == "Pooling":
            mode = read_pooling_mode(folder, str(Path(str(module.get("path", ""))) / "config.json"))
        elif kind == "Normalize":
            normalize = True
    return mode, normalize, read_max_seq_length(folder)


def read_pooling_mode(folder: Path, name: str) -> str:
    """The one pooling mode a Pooling module's config file (`name`, relative to `folder`) asks for."""
    config_file = folder / name
    config = read_folder_json(folder, name)
    if not isinstance(config, dict):
        raise ValueError(f"{config_file}: expected a JSON object of pooling settings")  # noqa: TRY004 - bad file
    if "pooling_mode" in config:  # sentence-transformers >= 6: one name, or a list of names to concatenate
        named = config["pooling_mode"]
        names = [named] if isinstance(named, str) else named if isinstance(named, list) else [repr(named)]
        chosen = [str(n) for n in names if n in POOLING_MODES]
        unsupported = [f"pooling_mode {n!r}" for n in names if n not in POOLING_MODES]
    else:  # the older layout: one boolean per mode
        flags = {"cls": config.get("pooling_mode_cls_token"), "mean": config.get("pooling_mode_mean_tokens"),
                 "max": config.get("pooling_mode_max_tokens")}
        chosen = [mode for mode, on in flags.items() if on]
        unsupported = [k for k in ("pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens",
                                   "pooling_mode_lasttoken") if config.get(k)]
    if unsupported or len(chosen) != 1:
        raise ValueError(f"{config_file}: bertforge pools with exactly one of {', '.join(POOLING_MODES)}; "
                         f"this file asks for {', '.join(chosen + unsupported) or 'none'}")
    return chosen[0]


def read_max_seq_length(folder: Path) -> int | None:
    """`max_seq_length` of sentence_bert_config.json, or None without one."""
    if not folder_has(folder, SBERT_CONFIG):
        return None
    sbert = read_folder_json(folder, SBERT_CONFIG)
    max_len = sbert.get("max_seq_length") if isinstance(sbert, dict) else None
    if max_len is None:
        return None
    if isinstance(max_len, float) and max_len.is_integer():
        max_len = int(max_len)
    if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 1:
        raise ValueError(f"{folder / SBERT_CONFIG}: field 'max_seq_length' must be a positive integer, got "
                         f"{max_len!r}")
    return max_len


def write_sentence_transformers_files(directory: str | Path, mode: str, normalize: bool, max_seq_length: int | None,
                                      dimension: int) -> None:
    """The sentence-transformers files beside a saved encoder (model and tokenizer already in `directory`):
    `SentenceTransformer(directory)` then embeds as bertforge does. Pooling is written in the older boolean
    layout, which every sentence-transformers version reads."""
    import torch
    folder = Path(directory)
    modules: list[dict[str, Any]] = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": POOLING_DIR, "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": NORMALIZE_DIR, "type": "sentence_transformers.models.Normalize"})
        (folder / NORMALIZE_DIR).mkdir(parents=True, exist_ok=True)
    (folder / POOLING_DIR).mkdir(parents=True, exist_ok=True)
    pooling = {"word_embedding_dimension": int(dimension), "pooling_mode_cls_token": mode == "cls",
               "pooling_mode_mean_tokens": mode == "mean", "pooling_mode_max_tokens": mode == "max",
               "pooling_mode_mean_sqrt_len_tokens": False}
    sbert = {"max_seq_length": max_seq_length or 512, "do_lower_case": False}
    # the oldest sentence-transformers that reads this layout (a newer one warns about nothing)
    versions = {"sentence_transformers": "2.0.0", "pytorch": torch.__version__}
    config = {"__version__": versions, "prompts": {}, "default_prompt_name": None, "similarity_fn_name": "cosine"}
    for path, value in ((folder / MODULES_FILE, modules), (folder / POOLING_DIR / "config.json", pooling),
                        (folder / SBERT_CONFIG, sbert), (folder / ST_CONFIG, config)):
        atomic_write_text(path, json.dumps(value, indent=2) + "\n")

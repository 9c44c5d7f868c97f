"""docs/REFERENCE.md's generated tables are current, and their numbers agree with independent counts."""
from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path

import pytest
import torch

from needs import require_module

REPO_ROOT = Path(__file__).resolve().parents[2]


@lru_cache(maxsize=1)
def _generator():
    spec = importlib.util.spec_from_file_location("gen_reference", REPO_ROOT / "tools" / "gen_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@lru_cache(maxsize=1)
def _rows() -> dict[str, dict]:
    return {row["name"]: row for row in _generator().preset_rows()}


def test_reference_is_current():
    page = (REPO_ROOT / "docs" / "REFERENCE.md").read_text(encoding="utf-8")
    assert "<!-- begin generated: presets -->" in page and "<!-- begin generated: config-fields -->" in page
    assert page == _generator().render(page), "docs/REFERENCE.md is not current: run python tools/gen_reference.py"


# one preset per family, each built by transformers' own class from the config.json bertforge writes
HF_CLASSES = {"base": ("BertConfig", "BertModel"), "roberta-mini": ("RobertaConfig", "RobertaModel"),
              "albert-base": ("AlbertConfig", "AlbertModel"), "distilbert-small": ("DistilBertConfig", "DistilBertModel"),
              "electra-small": ("ElectraConfig", "ElectraModel"), "modernbert-base": ("ModernBertConfig", "ModernBertModel")}


@pytest.mark.parametrize("name", list(HF_CLASSES))
def test_preset_parameters_equal_transformers_count(name: str):
    transformers = require_module("transformers")
    from bertforge.model.auto import preset_config
    config_class, model_class = (getattr(transformers, n) for n in HF_CLASSES[name])
    with torch.device("meta"):
        reference = model_class(config_class.from_dict(preset_config(name).to_dict()))
    assert _rows()[name]["parameters"] == reference.num_parameters()


def test_forward_flops_are_the_matmuls_of_each_layer():
    """Per token of a 128-token sequence, each layer does Q, K, V and output projections (4 H x H), the
    feed-forward (H x I and I x H; a GLU's up-projection is twice as wide), QK^T and attention x V (2 x 128 x H),
    a multiply-add counted as 2; a factorised embedding adds its E x H projection."""
    seq_len = _generator().SEQ_LEN
    for name, row in _rows().items():
        H, I, E = row["hidden"], row["intermediate"], row["embedding"]
        ffn = 3 * H * I if row["glu"] else 2 * H * I
        per_layer = 2 * (4 * H * H + ffn) + 2 * 2 * seq_len * H
        projection = 2 * E * H if E != H or row["family"] == "albert" else 0
        assert row["forward_flops"] == pytest.approx(row["layers"] * per_layer + projection, rel=1e-9), name

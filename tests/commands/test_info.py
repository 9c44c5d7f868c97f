"""`bertforge info`: parameter counts of presets (any family) and folders, checked against the papers."""
from __future__ import annotations

import re

import pytest

from bertforge.cli import main


def counts(capsys, model: str) -> dict[str, float]:
    """The printed figures, in millions: encoder (whole base model), embeddings, layers, pooler, with heads."""
    assert main(["info", "--model", model]) == 0
    out = capsys.readouterr().out
    found = {key: float(re.search(rf"{pattern} ([\d.]+)M", out).group(1)) for key, pattern in (
        ("encoder", "encoder"), ("embeddings", "= embeddings"), ("layers", "transformer layers"),
        ("pooler", "pooler"), ("pretraining", "with pre-training heads"))}
    assert abs(found["encoder"] - found["embeddings"] - found["layers"] - found["pooler"]) < 0.015  # rounding
    return found


@pytest.mark.parametrize("model,paper", [
    ("albert-base", 12), ("albert-large", 18), ("albert-xlarge", 60), ("albert-xxlarge", 235),
    ("bert-base", 110), ("base", 110),
])
def test_paper_sizes(capsys, model, paper):
    """ALBERT Table 1 / BERT's 110M. The released ALBERT configs count 58.7M (xlarge) and 222.6M (xxlarge):
    transformers counts the same (see test_albert.py); the paper's 60M and 235M are rounded up further."""
    found = counts(capsys, model)
    assert abs(found["encoder"] - paper) / paper < 0.06, found


def test_exact_albert_base_breakdown(capsys):
    found = counts(capsys, "albert-base")
    # V x E + P x E + 2E + 2E (LayerNorm) + E x H + H (projection); one shared layer; the pooler
    assert found == {"encoder": 11.68, "embeddings": 4.01, "layers": 7.09, "pooler": 0.59, "pretraining": 11.81}


def test_small_presets_and_a_folder(capsys, tmp_path):
    assert counts(capsys, "tiny")["encoder"] == 4.39
    assert counts(capsys, "mini")["encoder"] == 11.17
    from bertforge.model.albert import AlbertConfig, AlbertForMaskedLM
    AlbertForMaskedLM(AlbertConfig.preset("tiny", vocab_size=1000, layer_sharing="ffn")).save_pretrained(tmp_path)
    assert main(["info", "--model", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("albert:") and "embedding 64" in out and "sharing ffn" in out


def test_unknown_family_preset_is_one_line(capsys):
    assert main(["info", "--model", "albert-huge"]) == 1
    err = capsys.readouterr().err
    assert "unknown ALBERT preset 'huge'" in err and "Traceback" not in err


@pytest.mark.parametrize("name, content", [("texts.txt", "hello world\n"), ("other.json", '{"a": 1}')])
def test_a_file_that_is_not_a_config_is_named_as_such(tmp_path, capsys, name, content):
    """Not "not valid JSON", and never a BERT-base config made of defaults for a JSON that describes no model."""
    (tmp_path / name).write_text(content)
    assert main(["info", "--model", str(tmp_path / name)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip() == (
        f"bertforge info: error: --model {tmp_path / name}: {tmp_path / name} is not a model's config.json (no "
        "model_type or hidden_size); expected a preset (tiny, mini, small, medium, base, large, or e.g. "
        "albert-base), a config.json or a checkpoint folder")

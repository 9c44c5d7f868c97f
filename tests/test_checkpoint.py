"""Checkpoint folders: the HF layout, and a clear CheckpointError for everything that can go wrong."""
from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from bertforge import BertConfig, BertForMaskedLM, BertForPreTraining, BertModel, CheckpointError


@pytest.fixture()
def saved(tmp_path):
    model = BertForPreTraining(BertConfig.preset("tiny", vocab_size=64))
    model.save_pretrained(tmp_path)
    return tmp_path, model


def test_layout_and_names(saved):
    folder, _ = saved
    keys = set(load_file(folder / "model.safetensors"))
    assert "bert.embeddings.word_embeddings.weight" in keys
    assert "bert.encoder.layer.1.attention.self.value.bias" in keys
    assert "cls.predictions.transform.LayerNorm.weight" in keys and "cls.seq_relationship.weight" in keys
    assert not any("qkv" in k or "decoder" in k for k in keys)
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "bert" and config["architectures"] == ["BertForPreTraining"]
    assert not list(folder.glob("*.tmp"))  # atomic writes leave no temporaries


def test_round_trip_is_exact(saved):
    folder, model = saved
    again = BertForPreTraining.from_pretrained(folder)
    for (name, a), (_, b) in zip(model.state_dict().items(), again.state_dict().items()):
        assert torch.equal(a, b), name


def test_prefix_free_and_legacy_names_load(saved, tmp_path):
    folder, model = saved
    tensors = load_file(folder / "model.safetensors")
    renamed = {}
    for key, value in tensors.items():
        key = key.removeprefix("bert.")
        if key.endswith("LayerNorm.weight"):
            key = key[: -len("weight")] + "gamma"
        renamed[key] = value
    out = tmp_path / "legacy"
    out.mkdir()
    (out / "config.json").write_text((folder / "config.json").read_text())
    save_file(renamed, out / "model.safetensors")
    again = BertForPreTraining.from_pretrained(out)
    assert torch.equal(again.bert.embeddings.norm.weight, model.bert.embeddings.norm.weight)


def test_pytorch_bin_is_read_weights_only(saved, tmp_path):
    folder, model = saved
    out = tmp_path / "bin"
    out.mkdir()
    (out / "config.json").write_text((folder / "config.json").read_text())
    torch.save(load_file(folder / "model.safetensors"), out / "pytorch_model.bin")
    assert torch.equal(BertModel.from_pretrained(out).embeddings.word_embeddings.weight,
                       model.bert.embeddings.word_embeddings.weight)

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))
    torch.save({"x": Evil()}, out / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match="pytorch_model.bin"):
        BertModel.from_pretrained(out)


def test_missing_folder_and_hub_names():
    with pytest.raises(CheckpointError, match="never downloads"):
        BertModel.from_pretrained("bert-base-uncased")


def test_missing_files(saved):
    folder, _ = saved
    (folder / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="no weights file"):
        BertModel.from_pretrained(folder)
    (folder / "config.json").unlink()
    with pytest.raises(CheckpointError, match="config.json"):
        BertModel.from_pretrained(folder)


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_corrupted_safetensors(saved, damage):
    folder, _ = saved
    path = folder / "model.safetensors"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if damage == "truncate" else b"\x00" * 100)
    with pytest.raises(CheckpointError, match="model.safetensors"):
        BertForPreTraining.from_pretrained(folder)


def test_shape_mismatch_names_the_key(saved):
    folder, _ = saved
    with pytest.raises(CheckpointError, match=r"word_embeddings.weight: shape \(64, 128\)"):
        BertForPreTraining.from_pretrained(folder, vocab_size=65)


def test_wrong_dtype_and_unknown_keys(saved):
    folder, _ = saved
    tensors = load_file(folder / "model.safetensors")
    tensors["bert.pooler.dense.bias"] = torch.zeros(128, dtype=torch.int64)
    save_file(tensors, folder / "model.safetensors")
    with pytest.raises(CheckpointError, match="pooler.dense.bias: dtype torch.int64"):
        BertForPreTraining.from_pretrained(folder)
    tensors["bert.pooler.dense.bias"] = torch.zeros(128)
    tensors["bert.encoder.layer.0.mystery.weight"] = torch.zeros(3)
    save_file(tensors, folder / "model.safetensors")
    with pytest.raises(CheckpointError, match="mystery"):
        BertForPreTraining.from_pretrained(folder)


def test_half_precision_checkpoints_are_cast(saved):
    folder, model = saved
    tensors = {k: v.half() for k, v in load_file(folder / "model.safetensors").items()}
    save_file(tensors, folder / "model.safetensors")
    again = BertForPreTraining.from_pretrained(folder)
    assert again.dtype == torch.float32
    assert torch.allclose(again.nsp.classifier.weight, model.nsp.classifier.weight, atol=1e-3)


def test_missing_encoder_weights_is_an_error_but_missing_heads_are_reported(saved):
    folder, _ = saved
    tensors = load_file(folder / "model.safetensors")
    del tensors["cls.seq_relationship.weight"], tensors["cls.seq_relationship.bias"]
    del tensors["bert.pooler.dense.weight"], tensors["bert.pooler.dense.bias"]
    save_file(tensors, folder / "model.safetensors")
    model = BertForPreTraining.from_pretrained(folder)
    assert set(model.loading_info["newly_initialized"]) == {
        "cls.seq_relationship.weight", "cls.seq_relationship.bias", "bert.pooler.dense.weight",
        "bert.pooler.dense.bias"}
    with pytest.raises(CheckpointError, match="strict"):
        BertForPreTraining.from_pretrained(folder, strict=True)
    del tensors["bert.encoder.layer.0.attention.self.key.weight"]
    save_file(tensors, folder / "model.safetensors")
    with pytest.raises(CheckpointError, match="attention.self"):
        BertForPreTraining.from_pretrained(folder)


def test_masked_lm_loads_from_pretraining_and_reports_unused(saved):
    folder, _ = saved
    model = BertForMaskedLM.from_pretrained(folder)
    assert "cls.seq_relationship.weight" in model.loading_info["unused"]
    assert "bert.pooler.dense.weight" not in model.loading_info["newly_initialized"]


def test_bad_config_json(saved):
    folder, _ = saved
    (folder / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="config.json: not valid JSON"):
        BertModel.from_pretrained(folder)
    (folder / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 30,
                                                    "num_attention_heads": 4}))
    with pytest.raises(CheckpointError, match="divisible"):
        BertModel.from_pretrained(folder)

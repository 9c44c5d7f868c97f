"""Checkpoint folders: the HF layout, and a clear CheckpointError for everything that can go wrong."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from bertforge import BertConfig, BertForMaskedLM, BertForPreTraining, BertModel, CheckpointError

from needs import require_module


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


@pytest.mark.parametrize("names", [["pytorch_model.bin"], ["model.pt"], ["pytorch_model.bin.index.json",
                                                                        "pytorch_model-00001-of-00002.bin"]])
def test_pickle_only_weights_are_refused_unopened(saved, tmp_path, monkeypatch, names):
    folder, _ = saved
    out = tmp_path / "pickled"
    out.mkdir()
    (out / "config.json").write_text((folder / "config.json").read_text())

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))
    for name in names:
        torch.save({"x": Evil()}, out / name)
    opened = []
    monkeypatch.setattr(torch, "load", lambda *a, **k: opened.append(a))  # even weights_only=True is not reached
    with pytest.raises(CheckpointError) as err:
        BertModel.from_pretrained(out)
    assert opened == []
    message = str(err.value)
    assert "\n" not in message and names[-1] in message and "never loads" in message
    assert "save_pretrained" in message and "safe_serialization=True" in message  # what to do instead
    # beside safetensors weights, a pickle is simply not read
    save_file(load_file(folder / "model.safetensors"), out / "model.safetensors")
    assert isinstance(BertModel.from_pretrained(out), BertModel) and opened == []


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


def test_shape_mismatch_names_the_field_and_the_key(saved):
    folder, _ = saved
    with pytest.raises(CheckpointError, match=r"'vocab_size' is 65 but the weights .* hold 64 "
                                              r"\(bert.embeddings.word_embeddings.weight has shape \(64, 128\)\)"):
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


# ---- config.json against the weights, before anything is built ---------------------------------------------------
FAMILIES = ("bert", "roberta", "albert", "distilbert", "electra", "modernbert")


def _family_folder(tmp_path, name: str):
    from bertforge.model.auto import family
    fam = family(name)
    model = fam.model_class("masked_lm")(fam.config_class.preset("tiny", vocab_size=96, pad_token_id=0))
    folder = tmp_path / name
    model.save_pretrained(folder)
    return folder, fam.model_class("masked_lm"), json.loads((folder / "config.json").read_text())


def _refusal(folder, cls, monkeypatch, **changes) -> str:
    """The one-line refusal of the folder once config.json has `changes`; no tensor is read."""
    import bertforge.checkpoint as checkpoint
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **changes}))
    read = []
    monkeypatch.setattr(checkpoint, "read_tensors", lambda weights: read.append(weights) or {})
    try:
        with pytest.raises(CheckpointError) as err:
            cls.from_pretrained(folder)
    finally:
        (folder / "config.json").write_text(json.dumps(config))
        monkeypatch.undo()
    assert read == [], "the weights were read before the config was found not to fit them"
    assert "\n" not in str(err.value)
    return str(err.value)


@pytest.mark.parametrize("name", FAMILIES)
def test_config_sizes_that_differ_from_the_weights_are_named_before_loading(tmp_path, monkeypatch, name):
    folder, cls, config = _family_folder(tmp_path, name)
    layers = "n_layers" if name == "distilbert" else "num_hidden_layers"
    intermediate = "hidden_dim" if name == "distilbert" else "intermediate_size"
    message = _refusal(folder, cls, monkeypatch, vocab_size=1000)
    assert str(folder / "config.json") in message and "'vocab_size' is 1,000" in message and "hold 96 (" in message
    message = _refusal(folder, cls, monkeypatch, **{intermediate: 2 * config[intermediate]})
    assert f"'{intermediate}' is {2 * config[intermediate]:,}" in message and f"hold {config[intermediate]} (" in message
    if name != "albert":  # ALBERT's layers share one set of weights: the count is not in the weights
        # ModernBERT's layer_types lists every layer: left out here, as transformers 4 folders do
        extra = {"layer_types": None} if name == "modernbert" else {}
        for wrong in (1, 3, 10 ** 6):
            message = _refusal(folder, cls, monkeypatch, **{layers: wrong}, **extra)
            assert f"'{layers}' is {wrong:,} but the weights" in message and "hold 2 layers" in message
    else:
        assert "at most 512" in _refusal(folder, cls, monkeypatch, num_hidden_layers=10 ** 6)
    assert isinstance(cls.from_pretrained(folder), cls)  # the folder as saved loads


def test_transformers_folder_with_a_wrong_size_is_refused(tmp_path, monkeypatch):
    transformers = require_module("transformers")
    config = transformers.BertConfig(vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=64)
    transformers.BertForMaskedLM(config).save_pretrained(tmp_path, safe_serialization=True)
    message = _refusal(tmp_path, BertForMaskedLM, monkeypatch, max_position_embeddings=4096)
    assert "'max_position_embeddings' is 4,096 but the weights" in message and "hold 512" in message
    message = _refusal(tmp_path, BertForMaskedLM, monkeypatch, num_hidden_layers=10 ** 6)
    assert "hold 2 layers" in message


MILLION_LAYERS = """
import json, resource, sys
from bertforge import BertConfig, BertModel, CheckpointError
folder = sys.argv[1]
BertModel(BertConfig.preset("tiny", vocab_size=64)).save_pretrained(folder)
config = json.load(open(folder + "/config.json"))
json.dump({**config, "num_hidden_layers": 10 ** 6}, open(folder + "/config.json", "w"))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
# a tiny BERT layer holds 200k parameters: a million of them would need 800 GB; give the process 2 GB more
soft, hard = resource.getrlimit(resource.RLIMIT_AS)
pages = int(open("/proc/self/statm").read().split()[0])
resource.setrlimit(resource.RLIMIT_AS, (pages * resource.getpagesize() + (2 << 30), hard))
try:
    BertModel.from_pretrained(folder)
except CheckpointError as err:
    print(err)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
"""


@pytest.mark.slow  # a fresh interpreter, so that its peak memory is its own
def test_a_million_layers_fail_fast_without_allocating(tmp_path):
    import subprocess
    import sys
    if not Path("/proc/self/statm").exists():
        pytest.skip("needs Linux's /proc to bound the child's memory")
    done = subprocess.run([sys.executable, "-c", MILLION_LAYERS, str(tmp_path)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    message, grown_mb = done.stdout.strip().splitlines()
    assert "'num_hidden_layers' is 1,000,000 but the weights" in message and "hold 2 layers" in message
    assert int(grown_mb) < 100, f"peak memory grew by {grown_mb} MB while refusing the config"


# ---- the folder's files: regular files inside it, of bounded size ----------------------------------------------
def _plant(folder, name: str, hostile: str, outside, stack) -> None:
    """Replace folder/name with a hostile entry of the kind `hostile` (`outside`: a folder elsewhere)."""
    from hostile_files import fifo, sparse_file, zero_device_link
    path = folder / name
    if hostile == "link_out":
        path.rename(outside / name)
        path.symlink_to(outside / name)
    elif hostile == "fifo":
        path.unlink()
        stack.enter_context(fifo(path))
    elif hostile == "dev_zero":
        path.unlink()
        zero_device_link(path)
    else:  # oversized
        path.unlink()
        sparse_file(path, {"config.json": 16 << 20, "model.safetensors": 256 << 30}[name] + 1)


@pytest.mark.parametrize("name", ["config.json", "model.safetensors"])
@pytest.mark.parametrize("hostile", ["link_out", "fifo", "dev_zero", "oversized"])
def test_hostile_config_and_weights_files_are_refused_in_one_line(saved, tmp_path_factory, name, hostile):
    import contextlib
    folder, _ = saved
    expected = {"link_out": "outside the folder", "fifo": "a FIFO", "dev_zero": "a character device",
                "oversized": "expected at most"}[hostile]
    with contextlib.ExitStack() as stack:
        _plant(folder, name, hostile, tmp_path_factory.mktemp("outside"), stack)
        with pytest.raises(ValueError) as err:
            BertForPreTraining.from_pretrained(folder)
    message = str(err.value)
    assert str(folder / name) in message and expected in message and "\n" not in message


def test_shard_index_naming_a_file_outside_the_folder_is_refused(saved):
    folder, _ = saved
    outside = folder.parent / f"{folder.name}-elsewhere.safetensors"
    (folder / "model.safetensors").rename(outside)
    keys = list(load_file(outside))
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {key: f"../{outside.name}" for key in keys}}))
    with pytest.raises(ValueError, match="outside the folder"):
        BertForPreTraining.from_pretrained(folder)
    (folder / "shard.safetensors").symlink_to(outside)
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {k: "shard.safetensors"
                                                                                  for k in keys}}))
    with pytest.raises(ValueError, match="outside the folder"):
        BertForPreTraining.from_pretrained(folder)
    (folder / "shard.safetensors").unlink()
    outside.rename(folder / "shard.safetensors")  # the same shard inside the folder loads
    assert isinstance(BertForPreTraining.from_pretrained(folder), BertForPreTraining)


# ---- orientation: a loaded tensor is the file's own, never a transposed copy -----------------------------------
# A square matrix stored transposed has the shape it should have: no loader can tell from the file alone (only a
# reference implementation reading the same file can, as the transformers parity tests do). What a test can
# pin is that loading itself is faithful: every tensor comes back bit for bit under its own name, through every
# path that loads weights — from_pretrained, the engine's resume and keep-best (`Stage.load_weights`), and the
# ELECTRA pair — on models whose random square matrices are not symmetric.
def _square_2d(state: dict[str, torch.Tensor]) -> list[str]:
    return [k for k, v in state.items() if v.dim() == 2 and v.shape[0] == v.shape[1] and not torch.equal(v, v.T)]


def _assert_same_files(a: Path, b: Path) -> None:
    first, second = load_file(str(a / "model.safetensors")), load_file(str(b / "model.safetensors"))
    assert sorted(first) == sorted(second)
    assert _square_2d(first), "the test needs square matrices to mean anything"
    for key in first:
        assert torch.equal(first[key], second[key]), key


@pytest.mark.parametrize("name", ["bert", "roberta", "albert", "distilbert", "electra", "modernbert"])
def test_every_family_loads_each_tensor_as_saved(tmp_path, name):
    from bertforge.checkpoint import load_hf_state_dict, read_state_dict
    from bertforge.model.auto import family, preset_config
    cls = family(name).model_class("masked_lm")
    config = preset_config("tiny" if name == "bert" else f"{name}-tiny")
    torch.manual_seed(0)
    model = cls(config)
    model.save_pretrained(tmp_path / "a")
    torch.manual_seed(1)
    fresh = cls(config)
    load_hf_state_dict(fresh, read_state_dict(tmp_path / "a")[0], source=tmp_path / "a")
    for key, tensor in model.state_dict().items():
        assert torch.equal(fresh.state_dict()[key], tensor), key
    fresh.save_pretrained(tmp_path / "b")
    _assert_same_files(tmp_path / "a", tmp_path / "b")


def test_resume_and_keep_best_load_each_tensor_as_saved(tmp_path):
    """The engine's Stage.load_weights: what a resumed run and keep=best put back into the model."""
    from bertforge.training.engine import Stage
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig.preset("tiny", vocab_size=99))
    model.save_pretrained(tmp_path / "a")
    torch.manual_seed(1)
    stage = Stage()
    stage.model = BertForMaskedLM(BertConfig.preset("tiny", vocab_size=99))
    stage.load_weights(tmp_path / "a")
    stage.model.save_pretrained(tmp_path / "b")
    _assert_same_files(tmp_path / "a", tmp_path / "b")


def test_electra_pair_loads_each_tensor_as_saved(tmp_path):
    from bertforge.model.electra import ElectraConfig
    from bertforge.model.electra_pretraining import build_electra_pretraining
    config = ElectraConfig.preset("tiny", vocab_size=99, hidden_size=64, intermediate_size=128, embedding_size=32)
    torch.manual_seed(0)
    pair = build_electra_pretraining(config)
    pair.save_pretrained(tmp_path / "a")
    torch.manual_seed(1)
    fresh = build_electra_pretraining(config)
    fresh.load_weights(tmp_path / "a")
    fresh.save_pretrained(tmp_path / "b")
    _assert_same_files(tmp_path / "a", tmp_path / "b")
    _assert_same_files(tmp_path / "a" / "generator", tmp_path / "b" / "generator")


LOAD_WITHOUT_DYNAMO = """
import sys
from bertforge import BertConfig, BertForSequenceClassification
folder = sys.argv[1]
BertForSequenceClassification(BertConfig.preset("tiny", vocab_size=64)).save_pretrained(folder)
sys.modules.pop("torch._dynamo", None)
BertForSequenceClassification.from_pretrained(folder)
print("torch._dynamo" in sys.modules)
"""


@pytest.mark.slow  # a fresh interpreter, so that what is imported is the load's own doing
def test_loading_a_folder_does_not_import_torch_dynamo(tmp_path):
    """The config-fits-weights probe builds the model on the meta device with torch.nn.init turned off: drawing
    normal_ on a meta tensor imports torch._dynamo, seconds in every process that loads a folder."""
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-c", LOAD_WITHOUT_DYNAMO, str(tmp_path / "m")], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False"]


def test_the_meta_probe_has_the_models_shapes_and_leaves_init_as_it_was():
    from bertforge.checkpoint import on_meta
    config = BertConfig.preset("tiny", vocab_size=64)
    before = {name: getattr(torch.nn.init, name) for name in ("normal_", "uniform_", "zeros_", "ones_")}
    probe = on_meta(BertForPreTraining, config)
    real = BertForPreTraining(config)
    assert {k: v.shape for k, v in probe.state_dict().items()} == {k: v.shape for k, v in real.state_dict().items()}
    assert all(t.is_meta for t in probe.state_dict().values())
    assert {name: getattr(torch.nn.init, name) for name in before} == before
    weight = torch.empty(3, 4)
    torch.nn.init.normal_(weight)  # drawing again after the probe
    assert weight.std() > 0

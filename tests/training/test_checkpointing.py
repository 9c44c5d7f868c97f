"""Training checkpoints without pickle: exact round trips, bitwise resume, and hostile folders refused."""
from __future__ import annotations

import json
import math
from pathlib import Path
import pickle
import random

import numpy as np
import pytest
import torch
import warm_cli

from bertforge.checkpoint import CheckpointError, load_hf_state_dict, read_state_dict
from bertforge.config import BertConfig
from bertforge.model import BertForPreTraining
from bertforge.training import checkpointing as ckpt
from bertforge.training.optim import build_optimizer, linear_warmup_decay
from bertforge.training.statefile import dump_state, load_state, save_state

VOCAB, SEQ, BATCH = 64, 12, 3


def _same(a, b) -> bool:
    """Equal in value AND type, tensors and arrays bit for bit (NaN equals NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, torch.Tensor):
        def raw(t):
            return t.reshape(-1).contiguous().view(torch.uint8)
        return a.dtype == b.dtype and a.shape == b.shape and torch.equal(raw(a), raw(b))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    if isinstance(a, dict):
        return list(a) == list(b) and all(type(k) is type(j) for k, j in zip(a, b)) \
            and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, np.generic):
        return a.dtype == b.dtype and a.tobytes() == b.tobytes()
    return a == b


def test_statefile_round_trips_every_supported_type(tmp_path):
    base = torch.arange(12, dtype=torch.float32)
    state = {
        "ints": {0: 1, 7: {"nested": (1, 2.5, None, True)}}, "mixed": {1: "a", "b": 2},
        "floats": [0.1, -0.0, 1e-310, float("nan"), float("inf"), -float("inf"), 2 ** 0.5],
        "big": 2 ** 80, "neg": -3, "text": "ünïcode \"quoted\"", "__dunder": "kept", "empty": ({}, [], ()),
        "tensors": [base, base[2:5], base.view(3, 4).t(), torch.zeros(0), torch.tensor(3.0),
                    torch.randn(3, dtype=torch.bfloat16), torch.tensor([True, False]),
                    torch.randint(0, 255, (7,), dtype=torch.uint8), torch.tensor([2 ** 40], dtype=torch.int64)],
        "arrays": [np.arange(5, dtype=np.uint32), np.array([[1.5, 2.0]], dtype=np.float16), np.zeros(0)],
        "numpy_scalars": [np.int64(5), np.float32(0.1), np.bool_(True), np.uint8(255)],
        "rng": ckpt.capture_rng(),
    }
    save_state(state, tmp_path / "s.json", tmp_path / "s.safetensors")
    back = load_state(tmp_path / "s.json", tmp_path / "s.safetensors")
    assert _same(state, back)
    json.loads((tmp_path / "s.json").read_text())  # standard JSON (no NaN literals)
    assert "NaN" not in (tmp_path / "s.json").read_text()


def test_statefile_refuses_what_it_cannot_store():
    for bad in ({"x": object()}, {"x": np.array(["a"])}, {(1, 2): 3}, {"x": {1, 2}}):
        with pytest.raises(TypeError, match="training state at"):
            dump_state(bad)


# ---- bitwise resume of a real model, AdamW, scheduler and every RNG -------------------------------------------
def _model() -> BertForPreTraining:
    config = BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                        max_position_embeddings=32)
    return BertForPreTraining(config)


def _step(model, optimizer, scheduler) -> float:
    """One training step that draws from Python's, numpy's and torch's generators (batch, mask, dropout)."""
    ids = torch.tensor(np.random.randint(5, VOCAB, size=(BATCH, SEQ)))
    lengths = [random.randint(4, SEQ) for _ in range(BATCH)]
    mask = (torch.arange(SEQ)[None, :] < torch.tensor(lengths)[:, None]).long()
    labels = torch.where((torch.rand(BATCH, SEQ) < 0.3) & (mask == 1), ids, torch.full_like(ids, -100))
    out = model(input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids), labels=labels,
                next_sentence_label=torch.tensor([random.randint(0, 1) for _ in range(BATCH)]))
    optimizer.zero_grad()
    out.loss.backward()
    optimizer.step()
    scheduler.step()
    return out.loss.item()


def _fresh():
    model = _model().train()
    optimizer = build_optimizer(model, 1e-3, weight_decay=0.01)
    return model, optimizer, linear_warmup_decay(optimizer, 2, 10)


def test_resume_from_a_saved_checkpoint_is_bitwise_identical(tmp_path):
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    model, optimizer, scheduler = _fresh()
    for _ in range(3):
        _step(model, optimizer, scheduler)
    state = {"step": 3, "elapsed": 1.25, "skipped": 0, "bad_in_row": 0, "warmup_ended_at": None,
             "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
             "stage": {"epoch": 0, "index": 9}, "rng": [ckpt.capture_rng()],
             "run": {"objective": "mlm+nsp", "schedule": (64, 0.5), "lr": 1e-3}, "world_size": 1}
    folder = ckpt.save_checkpoint(tmp_path, 3, model, None, state)
    assert all((folder / f).is_file() for f in ckpt.REQUIRED_FILES)
    assert not list(folder.glob("*.pt")) and ckpt.latest_checkpoint(tmp_path) == folder
    assert _same(ckpt.load_training_state(folder), state), "values or types changed (int keys, tuples, ...)"
    expected = [_step(model, optimizer, scheduler) for _ in range(3)]

    # a different process state before loading, so nothing carries over by accident
    random.seed(99), np.random.seed(99), torch.manual_seed(99)
    saved = ckpt.load_training_state(folder)
    resumed, optimizer2, scheduler2 = _fresh()
    load_hf_state_dict(resumed, read_state_dict(folder)[0], source=folder)
    optimizer2.load_state_dict(saved["optimizer"])
    scheduler2.load_state_dict(saved["scheduler"])
    ckpt.restore_rng(saved["rng"][0])
    got = [_step(resumed, optimizer2, scheduler2) for _ in range(3)]

    assert got == expected
    for (name, a), (_, b) in zip(model.state_dict().items(), resumed.state_dict().items()):
        assert torch.equal(a, b), name
    for a, b in zip(optimizer.state.values(), optimizer2.state.values()):
        assert all(torch.equal(a[k], b[k]) for k in ("exp_avg", "exp_avg_sq", "step"))
    assert scheduler.get_last_lr() == scheduler2.get_last_lr()


# ---- hostile and broken folders -------------------------------------------------------------------------------
class _CreatesFile:
    """Unpickling this calls open(path, "w"): the file appears if the pickle is ever loaded."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return open, (self.path, "w")


def _saved(tmp_path, step: int = 2, keep: int = 3):
    torch.manual_seed(0)
    model, optimizer, scheduler = _fresh()
    _step(model, optimizer, scheduler)
    state = {"step": step, "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
             "stage": {"index": 0}, "rng": ckpt.capture_rng(), "run": {}, "world_size": 1}
    return ckpt.save_checkpoint(tmp_path, step, model, None, state, keep=keep)


def _one_line_error(folder, match: str) -> str:
    with pytest.raises(CheckpointError, match=match) as info:
        ckpt.load_training_state(folder)
    message = str(info.value)
    assert isinstance(info.value, ValueError) and "\n" not in message
    return message


def test_a_pickled_training_state_is_never_unpickled(tmp_path):
    marker = tmp_path / "pwned"
    payload = pickle.dumps({"step": 2, "x": _CreatesFile(marker)})
    probe = tmp_path / "probe"
    pickle.loads(pickle.dumps(_CreatesFile(probe))).close()
    assert probe.exists(), "the payload must really run code when unpickled, or this test proves nothing"

    # an old-layout folder: config + weights + only a pickle
    folder = _saved(tmp_path / "old")
    for name in (ckpt.TRAINING_STATE, ckpt.TRAINING_TENSORS):
        (folder / name).unlink()
    (folder / ckpt.LEGACY_TRAINING_STATE).write_bytes(payload)
    assert ckpt.sweep_partial_saves(tmp_path / "old") == [], "an old run's checkpoints must not be swept away"
    assert ckpt.latest_checkpoint(tmp_path / "old") == folder
    message = _one_line_error(folder, "never loaded")
    assert "training_state.pt" in message
    # a folder that has the new files as well: the pickle beside them is ignored
    folder = _saved(tmp_path / "new")
    (folder / ckpt.LEGACY_TRAINING_STATE).write_bytes(payload)
    assert ckpt.load_training_state(folder)["step"] == 2
    assert not marker.exists()


@pytest.mark.slow
def test_pretrain_refuses_to_resume_from_a_pickle(train_data, vocab_dir, tmp_path):
    out, marker = tmp_path / "run", tmp_path / "pwned"
    folder = _saved(out)
    for name in (ckpt.TRAINING_STATE, ckpt.TRAINING_TENSORS):
        (folder / name).unlink()
    (folder / ckpt.LEGACY_TRAINING_STATE).write_bytes(pickle.dumps(_CreatesFile(marker)))
    (out / "run_config.json").write_text('{"verb": "pretrain"}')  # someone's run folder, handed over
    done = warm_cli.run(["pretrain", "--data", str(train_data), "--vocab", str(vocab_dir), "--model", "tiny",
                         "--output", str(out), "--max-steps", "1", "--batch-size", "2", "--seq-len-schedule", "64:1",
                         "--eval-batches", "0", "--no-progress"], timeout=120)
    assert done.returncode != 0
    assert "training_state.pt" in done.stderr and "never loaded" in done.stderr
    assert "Traceback" not in done.stderr
    assert not marker.exists()
    assert folder.is_dir(), "the old checkpoint is left in place"


def _edit_json(folder, edit) -> None:
    path = folder / ckpt.TRAINING_STATE
    doc = json.loads(path.read_text())
    edit(doc["state"])
    path.write_text(json.dumps(doc))


def _retarget_first_tensor(state) -> None:
    state["optimizer"]["state"]["__dict__"][0][1]["exp_avg"]["__tensor__"] = "no/such/tensor"


TAMPERED = {
    "step of the wrong type": (lambda s: s.update(step="2"), "field 'step' has type str"),
    "bool step": (lambda s: s.update(step=True), "field 'step' has type bool"),
    "optimizer missing": (lambda s: s.pop("optimizer"), "field 'optimizer' is missing"),
    "counter of the wrong type": (lambda s: s.update(elapsed="1.5"),
                                  "field 'elapsed' has type str, expected int or float"),
    "world size of the wrong type": (lambda s: s.update(world_size=[1]), "field 'world_size' has type list"),
    "rng missing": (lambda s: s.pop("rng"), "field 'rng' is missing"),
    "tensor key absent": (lambda s: s["rng"].update(torch={"__tensor__": "gone"}),
                          "refers to tensor 'gone'"),
    "numpy state not a tuple": (lambda s: s["rng"].update(numpy=[1, 2]), "field rng: numpy"),
    "python state garbage": (lambda s: s["rng"].update(python={"__tuple__": [3, "x", None]}), "field rng: python"),
    "python state out of range": (lambda s: s["rng"]["python"]["__tuple__"][1]["__tuple__"].__setitem__(0, 2 ** 40),
                                  "field rng: python"),
    "bad tuple": (lambda s: s["run"].update(x={"__tuple__": 5}), "__tuple__ must hold a list"),
    "bad dict pairs": (lambda s: s["run"].update(x={"__dict__": [[1]]}), "__dict__ must hold"),
    "unknown mark": (lambda s: s["run"].update(x={"__import__": "os"}), "unknown or misplaced mark"),
    "bad float": (lambda s: s["run"].update(x={"__float__": "1e9"}), "__float__ must be"),
    "object numpy scalar": (lambda s: s["run"].update(x={"__numpy__": ["O", 1]}), "numpy scalar"),
}


@pytest.mark.parametrize("case", list(TAMPERED))
def test_a_tampered_training_state_gives_a_one_line_error(tmp_path, case):
    edit, match = TAMPERED[case]
    folder = _saved(tmp_path)
    _edit_json(folder, edit)
    message = _one_line_error(folder, match)
    assert str(folder / ckpt.TRAINING_STATE) in message


def test_a_tensor_reference_retargeted_or_files_broken_give_one_line_errors(tmp_path):
    folder = _saved(tmp_path)
    good = (folder / ckpt.TRAINING_STATE).read_text()
    _edit_json(folder, _retarget_first_tensor)
    _one_line_error(folder, "refers to tensor 'no/such/tensor'")
    (folder / ckpt.TRAINING_STATE).write_text(good[: len(good) // 2])
    _one_line_error(folder, "not valid JSON")
    (folder / ckpt.TRAINING_STATE).write_text(json.dumps({"format": "something else", "state": {}}))
    _one_line_error(folder, "not a bertforge training state")
    (folder / ckpt.TRAINING_STATE).write_text(good)
    tensors = folder / ckpt.TRAINING_TENSORS
    tensors.write_bytes(tensors.read_bytes()[:100])
    _one_line_error(folder, "not a readable safetensors file")
    tensors.unlink()
    _one_line_error(folder, "missing")


def test_a_kill_while_pruning_leaves_only_a_hidden_folder(tmp_path, monkeypatch):
    """Pruning renames an old checkpoint out of sight before deleting it: a kill mid-delete leaves a hidden
    folder the next start sweeps, never a visible step folder with files missing (which is the user's, and kept)."""
    import shutil
    for step in (2, 4):
        _saved(tmp_path, step)
    deleted = []

    def killed_midway(path, ignore_errors=False):  # the kill: the first file is gone, the rest never will be
        path = Path(path)
        deleted.append(path.name)
        next(p for p in sorted(path.iterdir()) if p.is_file()).unlink()

    monkeypatch.setattr(shutil, "rmtree", killed_midway)
    folder = _saved(tmp_path, 6, keep=2)
    monkeypatch.undo()
    assert deleted == [".step-2.pruned"]
    root = tmp_path / ckpt.CHECKPOINTS
    assert sorted(p.name for p in root.iterdir()) == [".step-2.pruned", "step-4", "step-6"]
    assert ckpt.incomplete_checkpoints(tmp_path) == [] and ckpt.latest_checkpoint(tmp_path) == folder
    assert [p.name for p in ckpt.sweep_partial_saves(tmp_path)] == [".step-2.pruned"]
    assert sorted(p.name for p in root.iterdir()) == ["step-4", "step-6"]

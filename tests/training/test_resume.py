"""SIGKILL at any moment, resume, and end with the same weights bit for bit as an uninterrupted run."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from bertforge.training.checkpointing import list_checkpoints, load_training_state

STEPS = 8
RUNNER = Path(__file__).with_name("fault_runner.py")


def command(data: Path, vocab: Path, output: Path, *faults: str) -> list[str]:
    return [sys.executable, str(RUNNER), *faults, "--", "pretrain", "--data", str(data), "--vocab", str(vocab),
            "--model", "tiny", "--output", str(output), "--objective", "mlm+nsp", "--batch-size", "4",
            "--grad-accum", "2", "--lr", "1e-3", "--warmup-steps", "3", "--max-steps", str(STEPS),
            "--seq-len-schedule", "64:0.5,128:0.5", "--save-every", "2", "--eval-every", "4", "--eval-batches", "1",
            "--keep-checkpoints-at-end", "--log-every", "1", "--seed", "3", "--no-progress", "--debug"]


def env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1"}


def run_to_end(cmd: list[str]) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def kill_when(cmd: list[str], ready, timeout: float = 120) -> None:
    """Start `cmd`, SIGKILL it as soon as `ready(proc)` is true."""
    proc = subprocess.Popen(cmd, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + timeout
    try:
        while not ready(proc):
            assert proc.poll() is None, f"finished before it could be killed: {proc.stderr.read()[-2000:]}"
            if time.monotonic() > deadline:  # a guard against a hang, not a claim about speed
                raise TimeoutError(f"the kill point was not reached in {timeout} s")
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


def logged_step(output: Path) -> int:
    path = output / "metrics.jsonl"
    if not path.exists():
        return 0
    steps = [json.loads(line)["step"] for line in path.read_text().splitlines() if line.strip().endswith("}")]
    return max(steps, default=0)


@pytest.mark.slow
def test_sigkill_anywhere_then_resume_is_bitwise_identical(train_data, vocab_dir, tmp_path):
    reference = tmp_path / "reference"
    run_to_end(command(train_data, vocab_dir, reference))

    out = tmp_path / "killed"
    cmd = command(train_data, vocab_dir, out)
    # 1. in the middle of the first checkpoint save: the test hook prints, then sleeps before the rename
    def in_save(proc):
        line = proc.stderr.readline()
        return "inside checkpoint save of step-2" in line
    kill_when(command(train_data, vocab_dir, out, "--sleep-in-save", "30"), in_save)
    assert list_checkpoints(out) == [], "a killed save must not leave a checkpoint that looks complete"
    assert any(p.name.startswith(".step-2") for p in (out / "checkpoints").iterdir())
    # 2. between checkpoints, in the middle of a step (step 3 logged, step-2 is the newest checkpoint)
    kill_when(cmd, lambda proc: logged_step(out) >= 3)
    # 3. during a later save, after the sequence length switched to 128 at step 4
    kill_when(command(train_data, vocab_dir, out, "--sleep-in-save", "30"),
              lambda proc: "inside checkpoint save of step-6" in proc.stderr.readline())
    assert max(s for s, _ in list_checkpoints(out)) == 4
    # 4. resume to the end
    run_to_end(cmd)

    a = (reference / "model.safetensors").read_bytes()
    b = (out / "model.safetensors").read_bytes()
    ref, got = load_file(str(reference / "model.safetensors")), load_file(str(out / "model.safetensors"))
    assert ref.keys() == got.keys()
    for key in ref:
        assert torch.equal(ref[key], got[key]), key
    assert a == b
    assert not any(p.name.startswith(".") for p in (out / "checkpoints").iterdir()), "partial saves are swept"
    # the optimizer state at the end matches too
    sa = load_training_state(reference / "checkpoints" / f"step-{STEPS}")
    sb = load_training_state(out / "checkpoints" / f"step-{STEPS}")
    for (ka, va), (kb, vb) in zip(sa["optimizer"]["state"].items(), sb["optimizer"]["state"].items()):
        assert torch.equal(va["exp_avg"], vb["exp_avg"]) and torch.equal(va["exp_avg_sq"], vb["exp_avg_sq"])
    assert sa["stage"] == sb["stage"]

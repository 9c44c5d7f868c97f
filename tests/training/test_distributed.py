"""Training under torchrun on CPU (gloo).

Every objective and recipe, trained by two ranks, equals one process replaying both ranks' batches (gradients
averaged, logged loss, grad norm and MLM loss included). A group killed with SIGKILL and restarted by torchrun,
and a run spread over two launchers ("nodes"), end bitwise equal to an uninterrupted run. A rank that cannot
join, or a resume with another number of processes, ends in one line.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist
from safetensors.torch import load_file

from bertforge.data import MaskingConfig, PretrainingDataset
from bertforge.training import distributed as dist_
from bertforge.training.checkpointing import load_training_state
from bertforge.training.optim import build_optimizer, linear_warmup_decay

SEED, BATCH, STEPS = 5, 4, 3
HERE = Path(__file__).parent
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_rank_slices_are_disjoint_and_cover_the_epoch(train_data, vocab_dir):
    slices = [PretrainingDataset(train_data, str(vocab_dir), batch_size=BATCH, max_seq_length=64, seed=SEED,
                                 rank=r, world_size=2).example_indices(0) for r in range(2)]
    single = PretrainingDataset(train_data, str(vocab_dir), batch_size=BATCH, max_seq_length=64, seed=SEED)
    assert len(slices[0]) == len(slices[1])
    assert not set(slices[0].tolist()) & set(slices[1].tolist())
    union = np.sort(np.concatenate(slices))
    assert len(union) >= len(single.example_indices(0)) - 1  # at most one example dropped to keep lockstep


# ---- every objective and recipe: two ranks = one process replaying both ranks' batches ---------------------------
# No dropout, so that one process can replay both ranks exactly (ELECTRA's sampling replays each rank's RNG).
CASES = {
    "mlm+nsp": {"objective": "mlm+nsp"},
    "mlm+sop": {"objective": "mlm+sop"},
    "mlm": {"objective": "mlm"},                          # RoBERTa's objective in the BERT layout
    "ltr": {"objective": "ltr"},
    "electra": {"objective": "electra"},
    "albert-mlm": {"model": "albert-tiny", "objective": "mlm"},
    "recipe-fast": {"recipe": "fast"},                    # ModernBERT layout, MLM at 30 %, 1 warmup step
}
COMMON = {"model": "tiny", "batch_size": BATCH, "seq_len_schedule": "64:1", "eval_batches": 0, "dropout": 0.0,
          "max_steps": STEPS, "lr": 1e-3, "seed": SEED, "log_every": 1, "save_every": 0, "device": "cpu",
          "keep_checkpoints_at_end": True}


def case_options(case: str) -> dict:
    return {**COMMON, **CASES[case]}


def flags(options: dict) -> list[str]:
    out = []
    for key, value in options.items():
        out += [f"--{key.replace('_', '-')}"] + ([] if value is True else [str(value)])
    return out


@pytest.fixture(scope="module")
def ddp_runs(train_data, vocab_dir, tmp_path_factory) -> Path:
    """Every case trained by one torchrun launch of two ranks (one run after another)."""
    root = tmp_path_factory.mktemp("ddp-cases")
    commands = [["pretrain", "--data", str(train_data), "--vocab", str(vocab_dir), "--output", str(root / case),
                 "--no-progress", *flags(case_options(case))] for case in CASES]
    (root / "commands.json").write_text(json.dumps(commands), encoding="utf-8")
    done = subprocess.run([*TORCHRUN, "--standalone", "--nproc_per_node", "2", str(HERE / "run_many.py"),
                           str(root / "commands.json")], env=ENV, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.count("final model and tokenizer") == len(CASES), "rank 0 alone reports each run"
    return root


def replay(options: dict, train_data: Path, vocab_dir: Path, folder: Path) -> list[dict]:
    """One process, no DDP: each step backpropagates both ranks' batches at half weight, then clips and steps.
    Saves the model to `folder`; returns per step the mean loss, the grad norm and both ranks' MLM loss. On the
    ranks' one thread (`ENV`): another thread count sums inside the matmuls in another order."""
    threads = torch.get_num_threads()
    torch.set_num_threads(int(ENV["OMP_NUM_THREADS"]))
    try:
        return _replay(options, train_data, vocab_dir, folder)
    finally:
        torch.set_num_threads(threads)


def _replay(options: dict, train_data: Path, vocab_dir: Path, folder: Path) -> list[dict]:
    from bertforge.tokenization import load_tokenizer
    from bertforge.pretraining.pretrain import (PretrainConfig, add_pretraining_metrics, build_model, model_inputs,
                                             next_batch, summarize_pretraining)
    cfg = PretrainConfig.from_options(data=str(train_data), output=str(folder), vocab=str(vocab_dir), **options)
    opts = cfg.train
    tokenizer = load_tokenizer(vocab_dir)
    torch.manual_seed(opts.seed)
    model = build_model(cfg, tokenizer, 64)
    optimizer = build_optimizer(model, opts.lr, weight_decay=opts.weight_decay, kind=opts.optimizer)
    scheduler = linear_warmup_decay(optimizer, opts.warmup_steps, opts.max_steps)
    masking = MaskingConfig(rate=cfg.mask_rate, whole_word=cfg.whole_word, mode=cfg.masking,
                            dupe_factor=cfg.dupe_factor, spans=cfg.span_masking)
    data = [PretrainingDataset(cfg.data, tokenizer, objective="mlm" if cfg.objective == "electra" else cfg.objective,
                               packing=cfg.packing, max_seq_length=64, batch_size=cfg.batch_size, masking=masking,
                               seed=opts.seed, rank=rank, world_size=2) for rank in range(2)]
    rng = []
    for rank in range(2):  # each rank's own random stream (ELECTRA samples its replacements from it)
        torch.manual_seed(opts.seed + 1_000_003 * rank)
        rng.append(torch.get_rng_state())
    logged, seen = [], [set(), set()]
    for _ in range(opts.max_steps):
        sums, losses = {}, []
        for rank in range(2):
            torch.set_rng_state(rng[rank])
            batch = next_batch(data[rank])
            seen[rank] |= {tuple(row.tolist()) for row in batch["input_ids"]}
            out = model(**model_inputs(batch, cfg.objective, torch.device("cpu")))
            (out.loss / 2).backward()
            rng[rank] = torch.get_rng_state()
            losses.append(float(out.loss.detach()))
            add_pretraining_metrics(sums, out, batch)
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), opts.max_grad_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        scheduler.step()
        logged.append({"loss": sum(losses) / 2, "grad_norm": float(norm),
                       "mlm_loss": summarize_pretraining(sums)["mlm_loss"]})
    assert not seen[0] & seen[1], "the ranks trained on different examples"
    model.save_pretrained(folder)
    return logged


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_two_ranks_equal_one_process_replaying_both(case, ddp_runs, train_data, vocab_dir, tmp_path):
    out = ddp_runs / case
    expected = replay(case_options(case), train_data, vocab_dir, tmp_path / "replay")
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["split"] == "train"]
    assert [r["step"] for r in train] == list(range(1, STEPS + 1))
    for got, want in zip(train, expected):  # averaged, not summed: the grad norm before clipping says so
        for key in ("loss", "grad_norm", "mlm_loss"):
            assert got[key] == pytest.approx(want[key], rel=1e-5), (got["step"], key)
    files = sorted(p.relative_to(tmp_path / "replay") for p in (tmp_path / "replay").rglob("*.safetensors"))
    assert files, "the replay saved weights"
    for name in files:  # ELECTRA: the discriminator and generator/
        want, got = load_file(str(tmp_path / "replay" / name)), load_file(str(out / name))
        assert set(got) == set(want), name
        for key, tensor in want.items():
            assert torch.allclose(got[key], tensor, atol=2e-6, rtol=0), (name, key)
    state = load_training_state(out / "checkpoints" / f"step-{STEPS}")
    assert state["world_size"] == 2 and len(state["rng"]) == 2 and state["stage"]["index"] == STEPS * BATCH


# ---- elastic restarts and two nodes: bitwise equal to an uninterrupted run -----------------------------------------
# Dropout stays on: a resumed rank must also get its own random stream back.
RUN_STEPS = 8


def pretrain_flags(train_data: Path, vocab_dir: Path, out: Path, steps: int = RUN_STEPS, timeout: str = "60") -> list[str]:
    return ["pretrain", "--data", str(train_data), "--vocab", str(vocab_dir), "--model", "tiny", "--output", str(out),
            "--batch-size", str(BATCH), "--seq-len-schedule", "64:1", "--max-steps", str(steps),
            "--save-every", "2", "--eval-batches", "0", "--lr", "1e-3", "--seed", str(SEED), "--no-progress",
            "--device", "cpu", "--dist-timeout", timeout]


@pytest.fixture(scope="module")
def uninterrupted(train_data, vocab_dir, tmp_path_factory) -> bytes:
    out = tmp_path_factory.mktemp("uninterrupted") / "run"
    done = subprocess.run([*TORCHRUN, "--standalone", "--nproc_per_node", "2", "-m", "bertforge",
                           *pretrain_flags(train_data, vocab_dir, out)],
                          env=ENV, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    return (out / "model.safetensors").read_bytes()


class Launch:
    """A torchrun launcher whose stderr is read line by line while it runs."""

    def __init__(self, cmd: list[str]) -> None:
        self.proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self.out: list[str] = []
        self.readers = [threading.Thread(target=self._read, args=(stream, into), daemon=True)
                        for stream, into in ((self.proc.stderr, self.lines), (self.proc.stdout, self.out))]
        for reader in self.readers:
            reader.start()

    def _read(self, stream, into: list[str]) -> None:
        for line in stream:
            into.append(line)

    def wait_for(self, predicate, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            assert self.proc.poll() is None, "".join(self.lines)[-4000:]
            assert time.monotonic() < deadline, "".join(self.lines)[-4000:]
            time.sleep(0.02)

    def pid(self, rank: int, attempt: int) -> int:
        tag = f"[test hook] rank {rank} pid "
        lines = [line for line in self.lines if line.startswith(tag) and line.strip().endswith(f"attempt {attempt}")]
        return int(lines[-1][len(tag):].split()[0]) if lines else 0

    def finish(self, timeout: float = 300) -> int:
        code = self.proc.wait(timeout=timeout)
        for reader in self.readers:
            reader.join(timeout=10)
        return code


@pytest.mark.slow
def test_elastic_restarts_after_kill_9_resume_bitwise(uninterrupted, train_data, vocab_dir, tmp_path):
    """torchrun --max-restarts 2: rank 1 killed mid-run, then rank 0 killed inside a checkpoint save; the group
    restarts twice, resumes from its newest complete checkpoint each time, and ends as if never interrupted."""
    out = tmp_path / "run"
    port = free_port()
    run = Launch([*TORCHRUN, "--max-restarts", "2", "--nproc_per_node", "2", "--master-addr", "127.0.0.1",
                  "--master-port", str(port), str(HERE / "fault_runner.py"), "--announce", "--attempt", "1",
                  "--sleep-in-save", "60", "--", *pretrain_flags(train_data, vocab_dir, out)])
    run.wait_for(lambda: (out / "checkpoints" / "step-4").is_dir() and run.pid(1, 0))
    os.kill(run.pid(1, 0), signal.SIGKILL)                        # mid-run, after the step-4 checkpoint
    run.wait_for(lambda: any("inside checkpoint save" in line for line in run.lines) and run.pid(0, 1))
    os.kill(run.pid(0, 1), signal.SIGKILL)                        # inside the first save after the restart
    assert run.finish() == 0, "".join(run.lines)[-4000:]
    log = "".join(run.lines) + "".join(run.out)
    assert log.count("resuming from") == 2, log[-4000:]
    assert "removed an interrupted checkpoint save" in log
    assert (out / "model.safetensors").read_bytes() == uninterrupted


@pytest.mark.slow
def test_two_launchers_as_two_nodes_equal_one_launcher(uninterrupted, train_data, vocab_dir, tmp_path):
    out = tmp_path / "run"
    rendezvous = ["--nnodes", "2", "--nproc_per_node", "1", "--rdzv-backend", "c10d",
                  "--rdzv-endpoint", f"127.0.0.1:{free_port()}", "--rdzv-id", "two-nodes", "--local-addr", "127.0.0.1"]
    nodes = [Launch([*TORCHRUN, *rendezvous, "-m", "bertforge", *pretrain_flags(train_data, vocab_dir, out)])
             for _ in range(2)]
    codes = [node.finish() for node in nodes]
    assert codes == [0, 0], "".join(nodes[0].lines + nodes[1].lines)[-4000:]
    assert sum("".join(node.out).count("final model and tokenizer") for node in nodes) == 1, "rank 0 alone writes"
    assert (out / "model.safetensors").read_bytes() == uninterrupted


@pytest.mark.slow
def test_resuming_with_another_number_of_processes_ends_in_one_line(train_data, vocab_dir, tmp_path):
    from bertforge.cli import main
    from bertforge.training.engine import FaultHooks

    def fail_in_second_save(step: int) -> None:
        if step == 4:
            raise RuntimeError("stopped inside the save of step 4")

    out = tmp_path / "run"
    args = pretrain_flags(train_data, vocab_dir, out, steps=4)
    assert main(args, hooks=FaultHooks(inside_save=fail_in_second_save)) == 1  # one process, stopped after step 2
    before = sorted(p.name for p in (out / "checkpoints").iterdir())
    done = subprocess.run([*TORCHRUN, "--standalone", "--nproc_per_node", "2", "-m", "bertforge", *args],
                          env=ENV, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.startswith("bertforge pretrain: error:")]
    assert errors == [f"bertforge pretrain: error: {out / 'checkpoints' / 'step-2'} was written by a run of 1 "
                      "process and this run has 2; resume with 1 in all (torchrun: --nnodes x --nproc_per_node), "
                      "or start again with --overwrite"], done.stderr[-4000:]
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == before


# ---- joining: bounded, restartable ----------------------------------------------------------------------------------
def test_a_rank_that_cannot_reach_the_rendezvous_ends_in_one_line(train_data, vocab_dir, tmp_path, monkeypatch,
                                                                   capsys):
    from bertforge.cli import main
    port = free_port()  # nobody listens there
    for key, value in {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": str(port)}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)
    out = tmp_path / "run"
    status = main(pretrain_flags(train_data, vocab_dir, out, timeout="1"))
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 1
    assert err[-1].startswith(f"bertforge pretrain: error: rank 1 of 2 cannot reach the rendezvous at 127.0.0.1:{port}"
                              " (MASTER_ADDR:MASTER_PORT) within 1 s (--dist-timeout)"), err
    assert not out.exists(), "nothing written"


def with_env(monkeypatch, port: int, agent_store: bool) -> None:
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    monkeypatch.setenv("WORLD_SIZE", "2")
    if agent_store:
        monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", "True")
    else:
        monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)


@pytest.mark.parametrize("agent_store", [False, True])
def test_rank_0_waits_for_the_others_a_bounded_time(monkeypatch, agent_store):
    server = dist.TCPStore("127.0.0.1", 0, None, True, wait_for_workers=False) if agent_store else None
    with_env(monkeypatch, server.port if server else free_port(), agent_store)
    info = dist_.DistInfo(rank=0, world_size=2, timeout=1.0)
    with pytest.raises(dist_.DistributedError, match="rank 0 of 2: (rank 1 did not join|the other processes did not "
                                                     "all join).* within 1 s \\(--dist-timeout\\)"):
        dist_._group_store(info)


def test_a_rank_waits_for_rank_0_a_bounded_time(monkeypatch):
    server = dist.TCPStore("127.0.0.1", 0, None, True, wait_for_workers=False)  # the launcher's store
    server.set("bertforge/leader", "a-group-that-died")
    with_env(monkeypatch, server.port, agent_store=True)
    with pytest.raises(dist_.DistributedError, match="rank 1 of 2: rank 0 did not open the group at 127.0.0.1:\\d+ "
                                                     "within 1 s"):
        dist_._group_store(dist_.DistInfo(rank=1, world_size=2, timeout=1.0))


def form_group(delays: list[float]) -> list:
    """Ranks 0 and 1 (threads, each after its delay) join through the launcher's store and all-reduce."""
    results: list = [None, None]

    def join(rank: int) -> None:
        time.sleep(delays[rank])
        try:
            store = dist_._group_store(dist_.DistInfo(rank=rank, world_size=2, timeout=20.0))
            group = dist.ProcessGroupGloo(store, rank, 2, timedelta(seconds=20))
            value = torch.tensor([rank + 1.0])
            group.allreduce([value]).wait()
            results[rank] = (group, float(value))
        except Exception as err:  # noqa: BLE001 - reported by the assert below
            results[rank] = err

    threads = [threading.Thread(target=join, args=(rank,)) for rank in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_a_restarted_group_forms_where_the_dead_group_left_its_keys(monkeypatch):
    """torchrun's store outlives a worker group: the next group must not dial the dead group's addresses (the
    elastic restart that hung on 'connection refused')."""
    server = dist.TCPStore("127.0.0.1", 0, None, True, wait_for_workers=False)
    with_env(monkeypatch, server.port, agent_store=True)
    first = form_group([0.0, 0.0])
    assert [r[1] if isinstance(r, tuple) else r for r in first] == [3.0, 3.0]
    del first  # the group dies; its keys stay in the store
    # rank 1 comes first and finds the dead group's token; rank 0 of the new group publishes later
    second = form_group([0.5, 0.0])
    assert [r[1] if isinstance(r, tuple) else r for r in second] == [3.0, 3.0]
    second = form_group([0.0, 0.5])
    assert [r[1] if isinstance(r, tuple) else r for r in second] == [3.0, 3.0]


@pytest.mark.parametrize("delays", [[0.0, 0.5], [0.5, 0.0]])
def test_a_group_forms_by_environment_variables_alone(monkeypatch, delays):
    """Without torchrun's store (a launch by RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, as from a batch scheduler)
    rank 0 serves the store; whichever rank comes first waits for the other."""
    with_env(monkeypatch, free_port(), agent_store=False)
    group = form_group(delays)
    assert [r[1] if isinstance(r, tuple) else r for r in group] == [3.0, 3.0]


def test_lost_contact_is_named_only_for_distributed_failures():
    info = dist_.DistInfo(rank=1, world_size=2, timeout=30.0)
    gloo = RuntimeError("[/x/gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:57492: Connection reset by peer. "
                        "This is typically caused by a remote worker hanging")
    lost = dist_.lost_contact(gloo, info)
    assert str(lost) == ("rank 1 of 2 lost contact with the other processes: one of them stopped, or did not answer "
                         "within 30 s (--dist-timeout) (Read error [127.0.0.1]:57492: Connection reset by peer)")
    assert dist_.lost_contact(ValueError("bad flag"), info) is None
    assert dist_.lost_contact(RuntimeError("the training split yields no batches"), info) is None
    assert dist_.lost_contact(gloo, dist_.DistInfo()) is None  # one process: no group to lose

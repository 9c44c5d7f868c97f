"""The training engine on a toy stage: accumulation, precision, best weights, early stopping, resume, outputs."""
from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
import torch
from safetensors.torch import load_file, save_file
from torch.optim.optimizer import register_optimizer_step_pre_hook

from run_folders import copy_as_interrupted
from bertforge.training import checkpointing as ckpt
from bertforge.training.engine import FaultHooks, Session, Stage, Stepper, TrainOptions, fit
from bertforge.training.run_output import claim_run_output

from needs import require_module


class ToyStage(Stage):
    """Linear regression on a fixed data set; evaluation returns a scripted score sequence and records the
    weights it saw, so a test knows which weights the best evaluation had."""

    name = "toy"

    def __init__(self, rows: int = 8, scores: list[float] | None = None, dropout: float = 0.0, rank: int = 0,
                 world_size: int = 1) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(64, 6, generator=g)
        self.y = self.x @ torch.randn(6, 1, generator=g) + 0.1 * torch.randn(64, 1, generator=g)
        torch.manual_seed(1)
        self.model = torch.nn.Sequential(torch.nn.Dropout(dropout), torch.nn.Linear(6, 1))
        self.rows, self.index = rows, 0
        self.rank, self.world_size = rank, world_size  # rank r serves micro-batches r, r + w, ...: disjoint rows
        self.scores, self.evals = list(scores or []), []

    def next_batch(self):
        i = (self.index * self.world_size + self.rank) % (64 // self.rows)
        self.index += 1
        return {"x": self.x[i * self.rows:(i + 1) * self.rows], "y": self.y[i * self.rows:(i + 1) * self.rows]}

    def loss(self, net, batch):
        class Out:
            pass
        out = Out()
        out.loss = torch.nn.functional.mse_loss(net(batch["x"]), batch["y"])
        return out

    def add_metrics(self, sums, out, batch):
        sums["mse"] = sums.get("mse", 0.0) + float(out.loss.detach()) * len(batch["x"])
        sums["n"] = sums.get("n", 0.0) + len(batch["x"])

    def summarize(self, sums):
        return {"mse": sums["mse"] / sums["n"]} if sums.get("n") else {}

    def evaluate(self):
        if not self.scores:
            return {}
        self.evals.append({k: v.clone() for k, v in self.model.state_dict().items()})
        return {"score": self.scores.pop(0)}

    def score(self, metrics):
        return metrics.get("score")

    def state_dict(self):
        return {"index": self.index}

    def load_state_dict(self, state):
        self.index = int(state["index"])

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        save_file({k: v.contiguous() for k, v in self.model.state_dict().items()}, str(folder / "model.safetensors"))
        (folder / "config.json").write_text("{}")

    def load_weights(self, folder: Path) -> None:
        self.model.load_state_dict(load_file(str(folder / "model.safetensors")))


def run(stage: Stage, out: Path, hooks: FaultHooks | None = None, **options):
    opts = TrainOptions(**{"max_steps": 6, "lr": 0.05, "log_every": 1, "progress": False, "device": "cpu",
                           "save_every": 0, "keep_checkpoints_at_end": True, **options})
    with Session("cpu") as session, claim_run_output(out, "toy", opts, session,
                                                     keep_checkpoints=opts.keep_checkpoints_at_end) as folder:
        return fit(stage, opts, session, folder, hooks=hooks, say=lambda _msg: None)


def weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(str(folder / "model.safetensors"))


def train_records(folder: Path) -> list[dict]:
    records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    return [r for r in records if r["split"] == "train"]


@contextlib.contextmanager
def optimizer_inputs() -> Iterator[list[dict[int, torch.Tensor]]]:
    """The gradients every optimizer step is handed (after accumulation, DDP and clipping), by parameter id."""
    steps: list[dict[int, torch.Tensor]] = []

    def record(optimizer, args, kwargs):
        steps.append({id(p): p.grad.clone() for g in optimizer.param_groups for p in g["params"] if p.grad is not None})
    handle = register_optimizer_step_pre_hook(record)
    try:
        yield steps
    finally:
        handle.remove()


def assert_close(got: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-7, msg=lambda detail: f"{what}: {detail}")


def reference_step(rows: int) -> tuple[torch.nn.Module, float, dict[str, torch.Tensor]]:
    """Plain PyTorch, independent of the engine: the toy model at its starting weights, the mean squared error over
    the first `rows` rows of its data as ONE batch, and that loss's gradient by parameter name."""
    stage = ToyStage(rows=rows)
    model = stage.model
    loss = torch.nn.functional.mse_loss(model(stage.x[:rows]), stage.y[:rows])
    loss.backward()
    return model, float(loss.detach()), {name: p.grad.clone() for name, p in model.named_parameters()}


def test_the_loss_falls_and_a_train_only_run_draws_its_curves(tmp_path):
    result = run(ToyStage(), tmp_path / "run", max_steps=30)
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    mse = [r["mse"] for r in records if r["split"] == "train"]
    assert len(mse) == 30 and sum(mse[-5:]) < 0.5 * sum(mse[:5]), "the model learns"
    assert result.stopped_by == "max-steps" and not result.final_eval
    assert (tmp_path / "run" / "curves.png").stat().st_size > 0, "curves without any evaluation"
    summary = json.loads((tmp_path / "run" / "training_summary.json").read_text())
    assert summary["step"] == 30 and summary["precision"] == "fp32"


def test_a_stepper_takes_fits_steps_one_call_at_a_time(tmp_path):
    fit_stage = ToyStage()
    run(fit_stage, tmp_path / "fit", max_steps=6, optimizer="adamw")
    stage = ToyStage()
    opts = TrainOptions(max_steps=6, lr=0.05, log_every=1, progress=False, device="cpu", save_every=0,
                        optimizer="adamw")
    with Session("cpu") as session:
        step = Stepper(stage, opts, session, tmp_path / "stepped")
        losses = [step() for _ in range(6)]
    assert step.steps == 6 and losses[-1] < losses[0]
    for key, value in fit_stage.model.state_dict().items():
        assert torch.equal(value, stage.model.state_dict()[key]), key


def test_gradient_accumulation_equals_the_big_batch(tmp_path):
    big = run(ToyStage(rows=8), tmp_path / "big", grad_accum=1, optimizer="adamw")
    small = run(ToyStage(rows=4), tmp_path / "small", grad_accum=2, optimizer="adamw")
    assert big.step == small.step == 6
    a, b = weights(tmp_path / "big"), weights(tmp_path / "small")
    for key in a:
        assert torch.allclose(a[key], b[key], atol=1e-6), key


@pytest.mark.parametrize("accum", [2, 4])
def test_accumulated_gradient_is_the_gradient_of_the_whole_batch_mean(tmp_path, accum):
    # Compared before the optimizer, not after it: clipping and Adam both undo a gradient's scale, so weights after
    # a step cannot tell a mean from a sum over micro-batches.
    stage = ToyStage(rows=8 // accum)
    with optimizer_inputs() as steps:
        run(stage, tmp_path / "run", grad_accum=accum, max_steps=1, max_grad_norm=math.inf)
    _, loss, expected = reference_step(rows=8)
    got = {name: steps[0][id(p)] for name, p in stage.model.named_parameters()}
    for name, grad in expected.items():
        assert_close(got[name], grad, name)
    logged = train_records(tmp_path / "run")[0]
    norm = torch.linalg.vector_norm(torch.cat([g.flatten() for g in expected.values()]))
    assert logged["loss"] == pytest.approx(loss, rel=1e-6) and logged["grad_norm"] == pytest.approx(float(norm), rel=1e-5)


@pytest.mark.slow
def test_two_ranks_average_gradients_like_one_process_on_both_ranks_rows(tmp_path):
    # 2 ranks x 2 micro-batches of 2 rows = the first 8 rows; DDP must average (not sum) the ranks' gradients.
    out = tmp_path / "ddp"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           str(Path(__file__).with_name("ddp_toy_runner.py")), str(out)]
    done = subprocess.run(cmd, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    model, loss, expected = reference_step(rows=8)
    norm = torch.linalg.vector_norm(torch.cat([g.flatten() for g in expected.values()]))
    for rank in range(2):
        got = load_file(str(out / f"optimizer-input-rank{rank}.safetensors"))
        for name, grad in expected.items():
            assert_close(got[name], grad, f"rank {rank}: {name}")
    logged = train_records(out / "run")[0]
    assert logged["grad_norm"] == pytest.approx(float(norm), rel=1e-5), "the norm of the averaged gradient"
    assert logged["loss"] == pytest.approx(loss, rel=1e-6), "the loss over both ranks' rows"


@pytest.mark.parametrize("budget", [None, 1e6], ids=["steps", "time-budget"])
def test_the_logged_lr_is_warmup_then_linear_decay_computed_by_hand(tmp_path, budget):
    peak, warmup, total = 0.05, 3, 8
    run(ToyStage(), tmp_path / "run", lr=peak, warmup_steps=warmup, max_steps=total, time_budget=budget)
    logged = [r["lr"] for r in train_records(tmp_path / "run")]
    # the lr the s-th update uses (s = 1..total): s/warmup of the peak while warming up, then a straight line
    # from the peak down to 0 at step total + 1
    by_hand = [peak * s / warmup if s <= warmup else peak * (total + 1 - s) / (total + 1 - (warmup + 1))
               for s in range(1, total + 1)]
    assert logged[:warmup] == pytest.approx(by_hand[:warmup], rel=1e-12)
    if budget is None:
        assert logged == pytest.approx(by_hand, rel=1e-12)
    else:  # after warmup the lr decays with the time spent: a few steps of a 1e6 s budget leave it at the peak
        assert logged[warmup:] == pytest.approx([peak] * (total - warmup), rel=1e-3)


def test_one_lamb_step_of_a_real_run_is_the_papers_update(tmp_path):
    # You et al. 2019, Algorithm 2, first step (m = (1-b1) g, v = (1-b2) g^2, bias-corrected), weight decay 0.01 on
    # the matrix, none on the bias; each tensor's update is rescaled by ||w|| / ||r|| (1 when a norm is 0).
    stage, lr, decay = ToyStage(rows=8), 0.05, 0.01
    start = {name: p.detach().clone() for name, p in stage.model.named_parameters()}
    run(stage, tmp_path / "lamb", optimizer="lamb", lr=lr, weight_decay=decay, max_steps=1, max_grad_norm=math.inf)
    _, _, grads = reference_step(rows=8)
    got, trusts = weights(tmp_path / "lamb"), {}
    for name, w in start.items():
        g, b1, b2, eps = grads[name].double(), 0.9, 0.999, 1e-6
        m_hat = (1 - b1) * g / (1 - b1)
        v_hat = (1 - b2) * g * g / (1 - b2)
        r = m_hat / (v_hat.sqrt() + eps) + (decay if w.ndim >= 2 else 0.0) * w.double()
        w_norm, r_norm = w.double().norm(), r.norm()
        trusts[name] = float(w_norm / r_norm) if w_norm > 0 and r_norm > 0 else 1.0
        expected = w.double() - lr * trusts[name] * r
        assert_close(got[name].double(), expected, name)
    assert abs(trusts["1.weight"] - 1) > 0.5, "the trust ratio is far from 1 here, so an update without it differs"


def test_one_adamw_step_uses_the_adam_epsilon_setting(tmp_path):
    # torch's AdamW, first step: m_hat = g, v_hat = g^2, so w <- w (1 - lr decay) - lr g / (|g| + eps); an eps as
    # large as the gradients makes the step far from the default 1e-6's sign-like step
    stage, lr, decay, eps = ToyStage(rows=8), 0.05, 0.01, 0.5
    start = {name: p.detach().clone() for name, p in stage.model.named_parameters()}
    run(stage, tmp_path / "adamw", lr=lr, weight_decay=decay, adam_epsilon=eps, max_steps=1, max_grad_norm=math.inf)
    _, _, grads = reference_step(rows=8)
    got = weights(tmp_path / "adamw")
    for name, w in start.items():
        g = grads[name].double()
        kept = 1 - lr * (decay if w.ndim >= 2 else 0.0)
        assert_close(got[name].double(), w.double() * kept - lr * g / (g.abs() + eps), name)
        assert (got[name].double() - w.double() * kept + lr * g / (g.abs() + 1e-6)).abs().max() > 1e-3, name


def test_a_checkpoint_without_adam_epsilon_resumes_with_its_default_and_refuses_another(tmp_path):
    ref = run(ToyStage(), tmp_path / "ref", max_steps=6, save_every=3, keep_checkpoints=5)
    assert ref.step == 6
    resumed = tmp_path / "resumed"
    copy_as_interrupted(tmp_path / "ref", resumed, 3)
    state_file = ckpt.checkpoint_dir(resumed, 3) / ckpt.TRAINING_STATE
    state = json.loads(state_file.read_text())
    assert state["state"]["run"].pop("adam_epsilon") == 1e-6
    state_file.write_text(json.dumps(state))  # as a checkpoint written before the setting was recorded
    with pytest.raises(ValueError, match=r"adam_epsilon: 1e-06 there, 1e-08 now"):
        run(ToyStage(), resumed, max_steps=6, save_every=3, keep_checkpoints=5, adam_epsilon=1e-8)
    again = run(ToyStage(), resumed, max_steps=6, save_every=3, keep_checkpoints=5)
    assert again.resumed_from is not None
    a, b = weights(tmp_path / "ref"), weights(resumed)
    assert all(torch.equal(a[k], b[k]) for k in a)


class OrderedToyStage(ToyStage):
    """A stage with a setting of its own that older checkpoints did not record (as fine-tuning's batch order)."""

    recorded_later = {"order": "length"}

    def __init__(self, order: str = "length") -> None:
        super().__init__()
        self.order = order

    def run_record(self):
        return {"order": self.order}


def test_a_checkpoint_without_a_stage_setting_resumes_with_the_stages_default_and_refuses_another(tmp_path):
    run(OrderedToyStage(), tmp_path / "ref", max_steps=6, save_every=3, keep_checkpoints=5)
    resumed = tmp_path / "resumed"
    copy_as_interrupted(tmp_path / "ref", resumed, 3)
    state_file = ckpt.checkpoint_dir(resumed, 3) / ckpt.TRAINING_STATE
    state = json.loads(state_file.read_text())
    assert state["state"]["run"].pop("order") == "length"
    state_file.write_text(json.dumps(state))
    with pytest.raises(ValueError, match=r"order: 'length' there, 'random' now"):
        run(OrderedToyStage("random"), resumed, max_steps=6, save_every=3, keep_checkpoints=5)
    assert run(OrderedToyStage(), resumed, max_steps=6, save_every=3, keep_checkpoints=5).resumed_from is not None


def test_keep_best_restores_the_best_evaluation_and_patience_stops(tmp_path):
    stage = ToyStage(scores=[0.1, 0.7, 0.5, 0.4, 0.3, 0.2])
    result = run(stage, tmp_path / "best", max_steps=6, eval_every=1, keep="best", patience=3)
    assert result.stopped_by == "early-stopping" and result.step == 5, "three evaluations without a better score"
    assert result.best["step"] == 2 and result.best["score"] == 0.7 and result.final_eval == {"score": 0.7}
    saved = weights(tmp_path / "best")
    for key, tensor in stage.evals[1].items():  # the weights the step-2 evaluation saw
        assert torch.equal(saved[key], tensor), key
    assert not (tmp_path / "best" / "best").exists(), "the best copy is folded into the output"

    last = ToyStage(scores=[0.1, 0.7, 0.5])
    run(last, tmp_path / "last", max_steps=3, eval_every=1, keep="last")
    assert torch.equal(weights(tmp_path / "last")["1.weight"], last.model.state_dict()["1.weight"])


@pytest.mark.parametrize("schedule", ["linear", "onecycle"])
def test_resume_from_a_checkpoint_is_bitwise_equal(tmp_path, schedule):
    ref = run(ToyStage(dropout=0.3), tmp_path / "ref", max_steps=8, save_every=3, keep_checkpoints=5,
              schedule=schedule)
    assert ref.step == 8 and [s for s, _ in ckpt.list_checkpoints(tmp_path / "ref")] == [3, 6, 8]
    resumed = tmp_path / "resumed"
    copy_as_interrupted(tmp_path / "ref", resumed, 3)
    torch.manual_seed(12345)  # whatever the global RNG holds now, the checkpoint's RNG state wins
    again = run(ToyStage(dropout=0.3), resumed, max_steps=8, save_every=3, keep_checkpoints=5, schedule=schedule)
    assert again.resumed_from is not None and again.step == 8
    a, b = weights(tmp_path / "ref"), weights(resumed)
    assert all(torch.equal(a[k], b[k]) for k in a)
    logged = {name: {r["step"]: (r["lr"], r.get("beta1")) for r in train_records(name)}
              for name in (tmp_path / "ref", resumed)}
    assert sorted(logged[resumed]) == [4, 5, 6, 7, 8]
    assert logged[resumed] == {s: logged[tmp_path / "ref"][s] for s in range(4, 9)}, "the lr and beta1 of each step"
    with pytest.raises(ValueError, match=r"lr: 0\.05 there, 0\.01 now"):
        run(ToyStage(), resumed, max_steps=8, save_every=3, lr=0.01, schedule=schedule)
    other = "cosine" if schedule == "linear" else "linear"
    with pytest.raises(ValueError, match=rf"schedule: '{schedule}' there, '{other}' now"):
        run(ToyStage(), resumed, max_steps=8, save_every=3, schedule=other)


@pytest.mark.parametrize("damage, field", [
    (lambda state: state["scheduler"].pop("lr_lambdas"), "field 'scheduler' does not fit this run (KeyError"),
    (lambda state: state["scheduler"].update(base_lrs="0.05"), "field 'scheduler/base_lrs' must be a list of 2"),
    (lambda state: state["optimizer"]["param_groups"][0].update(lr=[1]), "field 'optimizer/param_groups/0/lr' must "
                                                                          "be a number, got [1]"),
], ids=["no-lr_lambdas", "base_lrs-a-string", "lr-a-list"])
def test_a_tampered_optimizer_or_scheduler_state_is_one_line_naming_the_field(tmp_path, damage, field):
    """torch's load_state_dict would raise a KeyError, or accept the value and fail with a TypeError a step
    later: both are refused at the resume, naming the file and the field."""
    ref = run(ToyStage(), tmp_path / "ref", max_steps=6, save_every=3, keep_checkpoints=5)
    assert ref.step == 6
    resumed = copy_as_interrupted(tmp_path / "ref", tmp_path / "resumed", 3)
    state_file = resumed / "checkpoints" / "step-3" / "training_state.json"
    doc = json.loads(state_file.read_text())
    damage(doc["state"])
    state_file.write_text(json.dumps(doc))
    from bertforge.checkpoint import CheckpointError
    with pytest.raises(CheckpointError) as err:
        run(ToyStage(), resumed, max_steps=6, save_every=3, keep_checkpoints=5)
    assert str(err.value).startswith(f"{state_file}: {field}") and "\n" not in str(err.value), str(err.value)


def test_a_onecycle_run_logs_the_lr_and_beta1_of_torchs_one_cycle_policy(tmp_path):
    peak, total, warmup = 0.05, 10, 4
    run(ToyStage(), tmp_path / "run", lr=peak, max_steps=total, warmup_steps=warmup, schedule="onecycle")
    records = train_records(tmp_path / "run")
    opt = torch.optim.AdamW(torch.nn.Linear(2, 1).parameters(), lr=peak)
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=peak, total_steps=total, pct_start=warmup / total, anneal_strategy="cos", cycle_momentum=True,
        base_momentum=0.85, max_momentum=0.95, div_factor=25, final_div_factor=1e4)
    for record in records:
        assert (record["lr"], record["beta1"]) == pytest.approx((opt.param_groups[0]["lr"],
                                                                 opt.param_groups[0]["betas"][0]), rel=1e-9)
        opt.step()
        if record["step"] < total:
            sched.step()
    assert len(records) == total


def test_a_run_recorded_before_schedule_existed_resumes_as_linear_and_refuses_another(tmp_path):
    run(ToyStage(), tmp_path / "ref", max_steps=6, save_every=3, keep_checkpoints=5)

    def as_recorded_before_schedule(folder: Path) -> Path:
        """The interrupted run with neither its checkpoint nor its run_config.json naming a schedule."""
        copy_as_interrupted(tmp_path / "ref", folder, 3)
        for path, record in ((ckpt.checkpoint_dir(folder, 3) / ckpt.TRAINING_STATE, lambda d: d["state"]["run"]),
                             (folder / "run_config.json", lambda d: d)):
            data = json.loads(path.read_text())
            assert record(data).pop("schedule") == "linear"
            path.write_text(json.dumps(data))
        return folder

    again = run(ToyStage(), as_recorded_before_schedule(tmp_path / "resumed"), max_steps=6, save_every=3,
                keep_checkpoints=5)
    assert again.resumed_from is not None
    a, b = weights(tmp_path / "ref"), weights(tmp_path / "resumed")
    assert all(torch.equal(a[k], b[k]) for k in a)
    with pytest.raises(ValueError, match=r"schedule: 'linear' there, 'onecycle' now"):
        run(ToyStage(), as_recorded_before_schedule(tmp_path / "other"), max_steps=6, save_every=3, keep_checkpoints=5,
            schedule="onecycle")
    # the refused attempt left the run's record as it was: the run's own settings still resume it
    assert "schedule" not in json.loads((tmp_path / "other" / "run_config.json").read_text())
    resumed = run(ToyStage(), tmp_path / "other", max_steps=6, save_every=3, keep_checkpoints=5)
    assert resumed.resumed_from is not None and resumed.step == 6


def test_non_finite_steps_are_skipped_then_abort(tmp_path):
    result = run(ToyStage(), tmp_path / "nan", hooks=FaultHooks(nan_at=lambda step: step == 2))
    assert result.skipped_steps == 1 and result.step == 6
    from bertforge.training.engine import NonFiniteLossError
    with pytest.raises(NonFiniteLossError, match="3 steps in a row"):
        run(ToyStage(), tmp_path / "diverged", hooks=FaultHooks(nan_at=lambda step: step >= 2), max_bad_steps=3)
    assert not (tmp_path / "diverged").exists(), "a run that fails before its first checkpoint leaves nothing"


def test_a_run_that_ends_diverged_fails_instead_of_saving_its_weights(tmp_path):
    """Too few bad steps to reach --max-bad-steps, but the run ends inside them; or a finite loss that has
    exploded: either way the run fails naming --lr, and writes no model."""
    from bertforge.training.engine import NonFiniteLossError
    with pytest.raises(NonFiniteLossError, match=r"the run diverged: its last 2 steps had a non-finite loss .* lower "
                                                 r"--lr"):
        run(ToyStage(), tmp_path / "nan-at-end", hooks=FaultHooks(nan_at=lambda step: step >= 5))
    assert not (tmp_path / "nan-at-end").exists()
    class Exploding(ToyStage):  # targets ten times larger every step: the squared error grows a hundredfold
        def next_batch(self):
            batch = super().next_batch()
            return {**batch, "y": batch["y"] * 10.0 ** self.index}

    with pytest.raises(NonFiniteLossError, match=r"the run diverged: the loss rose from \S+ to \S+e\+\d+ \(step 6\)"):
        run(Exploding(), tmp_path / "exploded")
    assert not (tmp_path / "exploded").exists()
    assert run(ToyStage(), tmp_path / "fine").step == 6  # the same run at a sane lr ends as before


def test_bf16_autocast_on_cpu_and_fp16_refused(tmp_path):
    result = run(ToyStage(), tmp_path / "bf16", precision="bf16", max_steps=20)
    assert result.step == 20
    records = [json.loads(line) for line in (tmp_path / "bf16" / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["mse"] < records[0]["mse"]
    with pytest.raises(ValueError, match="fp16 needs a CUDA device"):
        run(ToyStage(), tmp_path / "fp16", precision="fp16")


def test_options_are_checked(tmp_path):
    for bad, message in (({"max_steps": None}, "--max-steps, --time-budget or both"),
                         ({"max_steps": -5}, "--max-steps must be positive"),
                         ({"grad_accum": 0}, "--grad-accum must be positive"),
                         ({"keep": "worst"}, "--keep must be one of")):
        with pytest.raises(ValueError, match=message):
            run(ToyStage(), tmp_path / "bad", **bad)


def test_tensorboard_only_when_asked(tmp_path):
    require_module("tensorboard")
    run(ToyStage(), tmp_path / "tb", tensorboard=True)
    assert any((tmp_path / "tb" / "tensorboard").iterdir())
    run(ToyStage(), tmp_path / "plain")
    assert not (tmp_path / "plain" / "tensorboard").exists()


def test_an_output_holding_something_else_is_refused(tmp_path):
    other = tmp_path / "predictor"
    other.mkdir()
    (other / "task.json").write_text("{}")
    with pytest.raises(ValueError, match="--overwrite"):
        run(ToyStage(), other)
    assert (other / "task.json").read_text() == "{}", "nothing was touched"
    file = tmp_path / "a-file"
    file.write_text("x")
    with pytest.raises(ValueError, match="is a file"):
        run(ToyStage(), file)


class PaddedToyStage(ToyStage):
    """ToyStage whose batches carry an attention mask: rows of 1 to 6 real tokens, the rest padding."""

    def next_batch(self):
        index = self.index
        batch = super().next_batch()
        lengths = torch.tensor([1 + (index * 3 + r) % 6 for r in range(len(batch["x"]))])
        batch["attention_mask"] = (torch.arange(6)[None, :] < lengths[:, None]).long()
        return batch


def tokens_of_first_batches(steps: int) -> int:
    """The non-padding tokens of a fresh stage's first `steps` batches, counted from the masks themselves."""
    stage = PaddedToyStage()
    return sum(int((stage.next_batch()["attention_mask"] == 1).sum()) for _ in range(steps))


def test_tokens_seen_counts_every_batch_when_a_run_ends_or_saves_between_log_lines(tmp_path):
    """An early stop at step 4 with a log line every 5 steps, and a run resumed from a step-3 checkpoint: both
    count the tokens of every step they trained (counting only at log lines gave 0 and lost steps 1-3); the
    stopped run's last steps get their log line, so its curves have a point."""
    stopped = run(PaddedToyStage(scores=[0.9, 0.5]), tmp_path / "stopped", max_steps=20, log_every=5,
                  eval_every=2, patience=1)
    assert (stopped.step, stopped.stopped_by) == (4, "early-stopping")
    summary = json.loads((tmp_path / "stopped" / "training_summary.json").read_text())
    assert stopped.tokens_seen == summary["tokens_seen"] == tokens_of_first_batches(4) > 4
    assert [r["step"] for r in train_records(tmp_path / "stopped")] == [4]

    ref = run(PaddedToyStage(), tmp_path / "ref", max_steps=8, log_every=5, save_every=3)
    assert ref.tokens_seen == tokens_of_first_batches(8)
    resumed = copy_as_interrupted(tmp_path / "ref", tmp_path / "resumed", 3)
    again = run(PaddedToyStage(), resumed, max_steps=8, log_every=5, save_every=3)
    assert again.step == 8 and again.tokens_seen == tokens_of_first_batches(8)

"""experiments/budget_calibration.py: each timed call is exactly one optimizer step of its contender."""
from __future__ import annotations

import json
import random
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from needs import require_module
from published_records import assert_published

import budget_calibration as cal  # noqa: E402


def test_stepped_trainer_runs_one_trainer_step_per_call(train_data, vocab_dir, tmp_path):
    require_module("transformers")
    require_module("accelerate", hint="transformers' Trainer needs it: pip install 'bertforge[test]'")
    import torch
    from transformers import BertForMaskedLM

    import hf_pretrain_mlm as hf
    tokenizer = hf.load_hf_tokenizer(str(vocab_dir))
    settings = hf.parse_args(["--data", str(train_data), "--output", str(tmp_path), "--max-steps", "1000",
                              "--batch-size", "4", "--lr", "1e-3", "--no-progress"])
    blocks = np.random.default_rng(0).integers(1000, 2000, size=(64, 16)).astype(np.int32)
    torch.manual_seed(0)
    model = BertForMaskedLM(hf.hf_config("tiny", tokenizer))
    trainer = hf.build_trainer(settings, model, tokenizer, blocks, tmp_path, save_strategy="no", disable_tqdm=True)
    stepped = cal.SteppedTrainer(trainer)   # runs the first step (the Trainer's set-up) before it returns
    try:
        assert trainer.state.global_step == 1
        before = model.bert.embeddings.word_embeddings.weight.detach().clone()
        for expected in (2, 3, 4):
            stepped()
            assert trainer.state.global_step == expected
        assert not torch.equal(before, model.bert.embeddings.word_embeddings.weight)
    finally:
        stepped.close()
    assert not stepped.thread.is_alive()
    assert trainer.state.global_step == 4  # closing stops the loop without another step


@pytest.mark.parametrize("recipe, objective", [("fast", "mlm"), ("bert", "mlm+nsp")])
def test_bertforge_step_is_one_engine_step_of_the_recipe(train_data, tmp_path, recipe, objective):
    step = cal.bertforge_step(recipe, str(train_data), "tiny", 4, tmp_path)
    step()
    step()
    assert step.steps == 2
    assert step.stage.cfg.objective == objective
    assert step.optimizer.defaults.get("fused") is True  # the fused AdamW both sides are timed with


def test_a_step_is_charged_its_cpu_time_not_its_waiting():
    def waits_then_works() -> None:
        time.sleep(0.3)  # the core is someone else's: wall-clock passes, this process's CPU time does not
        end = time.process_time() + 0.05
        while time.process_time() < end:
            pass

    charged = cal.cpu_timed(waits_then_works)()
    assert 0.05 <= charged < 0.2


# ---- --records: the published calibration records (results-glue-budget/steps/...) ------------------------------------
CALIBRATION = Path(cal.__file__).parent / "calibrations" / "epyc-avx2-2026-11-25.json"
STEPS = "results-glue-budget/steps/"
TABLE = "results-glue-budget-steps"


def test_records_from_the_published_calibration_are_the_published_numbers(tmp_path):
    """The calibration file in the repository gives the published records exactly: values, dates, command."""
    from bertforge.results_store import read_store
    cal.main(["--from", str(CALIBRATION), "--data", "../runs/wiki", "--records", str(tmp_path)])
    written = assert_published(tmp_path, STEPS)
    published = read_store()
    assert len(written) == 9
    for rid, record in written.items():
        want = published.records[rid]
        assert (record.value, record.date, record.command, record.threads) == (
            want.value, want.date, want.command, want.threads), rid
        assert record.data == "../runs/wiki, batch 32, sequence length 128"
    assert read_store(tmp_path).tables == {TABLE: published.tables[TABLE]}
    calibration = json.loads(CALIBRATION.read_text())
    for name, (key, *_) in cal.STEP_ROWS.items():
        # the quartiles are the spread of the median step glue_budget's group publishes; 5 minutes' whole steps
        median_step = published.records[f"glue-at-budget/{name}/cpu-s-per-step"]
        quartiles = [written[f"{STEPS}{key}/cpu-s-step/{n}"].value for n in (2, 3)]
        assert tuple(quartiles) == median_step.spread
        assert written[f"{STEPS}{key}/5-cpu-min"].value == cal.steps_for(median_step.value, 300)
        assert calibration["seconds_per_step"][name] == median_step.value


def test_records_replace_the_calibration_records_only(tmp_path):
    """Written into the published group, the records leave the GLUE runs' records and both tables as they are."""
    published = Path(__file__).resolve().parents[2] / "docs" / "results" / "results-glue-budget.json"
    shutil.copy(published, tmp_path / published.name)
    calibration = json.loads(CALIBRATION.read_text())
    calibration["interquartile"]["bert"] = [1.5, 2.5]
    calibration["steps"]["fast"]["5m"] = 99
    calibration["date"] = "2027-01-02"
    source = tmp_path / "calibration.json"
    source.write_text(json.dumps(calibration))
    cal.main(["--from", str(source), "--records", str(tmp_path)])
    before, after = json.loads(published.read_text()), json.loads((tmp_path / published.name).read_text())
    assert after["tables"] == before["tables"]
    others = [r for r in before["records"] if not r["id"].startswith(STEPS)]
    assert [r for r in after["records"] if not r["id"].startswith(STEPS)] == others and len(others) == 92
    written = assert_published(tmp_path, "results-glue-budget/")
    assert written[f"{STEPS}bertforge-recipe-fast/5-cpu-min"].value == 99
    assert [written[f"{STEPS}bertforge-recipe-bert/cpu-s-step/{n}"].value for n in (2, 3)] == [1.5, 2.5]
    assert {r.date for rid, r in written.items() if rid.startswith(STEPS)} == {"2027-01-02"}


class FakeStep:
    """A contender's step that reports a made-up CPU time (the timing is what the test stands in for)."""

    def __init__(self, name: str) -> None:
        base = {"fast": 2.4, "bert": 1.8, "transformers": 8.0}[name]
        rng = random.Random(name)
        self.times = iter([base * rng.uniform(0.8, 1.3) for _ in range(50)])

    def __call__(self) -> float:
        return next(self.times)

    def close(self) -> None:
        pass


@pytest.mark.slow
def test_a_measured_calibration_writes_its_records(tmp_path, monkeypatch):
    """A run (its steps stood in for) writes the published records from its own samples: the quartiles of each
    contender's timed steps and the whole steps of their median in 5 minutes; --from its output gives the same."""
    monkeypatch.setattr(cal, "bertforge_step", lambda recipe, *args: FakeStep(recipe))
    monkeypatch.setattr(cal, "transformers_step", lambda *args: FakeStep("transformers"))
    monkeypatch.setattr(cal, "cpu_timed", lambda step: step)
    monkeypatch.setattr(cal, "start_process", lambda threads: None)  # leave the test process's threads alone
    data = tmp_path / "wiki"
    data.mkdir()
    (data / "manifest.json").write_text("{}")
    output = tmp_path / "calibration.json"
    cal.main(["--data", str(data), "--steps", "5", "--warmup", "1", "--output", str(output),
              "--records", str(tmp_path / "store")])
    written = assert_published(tmp_path / "store", STEPS)
    samples = json.loads(output.read_text())["samples"]
    for name, (key, *_) in cal.STEP_ROWS.items():
        ordered = sorted(samples[name])
        assert len(ordered) == 5
        assert [written[f"{STEPS}{key}/cpu-s-step/{n}"].value for n in (2, 3)] == [ordered[1], ordered[3]]
        assert written[f"{STEPS}{key}/5-cpu-min"].value == int(300 // ordered[2])
    assert {r.data for r in written.values()} == {f"{data}, batch 32, sequence length 128"}
    cal.main(["--from", str(output), "--records", str(tmp_path / "again")])
    again = assert_published(tmp_path / "again", STEPS)
    assert {rid: (r.value, r.date, r.data) for rid, r in again.items()} == {
        rid: (r.value, r.date, r.data) for rid, r in written.items()}

"""The pre-training loop end to end on a tiny model: outputs, objectives, budgets, non-finite losses."""
from __future__ import annotations

import json
import math

import pytest
import torch
from safetensors.torch import load_file

from bertforge.training import checkpointing as ckpt
from bertforge.training.engine import FaultHooks
from bertforge.pretraining.pretrain import NonFiniteLossError, parse_duration, parse_schedule, pretrain, seq_len_at

from needs import require_module

FAST = dict(model="tiny", batch_size=4, lr=1e-3, seq_len_schedule="64:1", progress=False, log_every=1)


def test_parse_duration_and_schedule():
    assert parse_duration("90") == 90 and parse_duration("30m") == 1800 and parse_duration("1h30m") == 5400
    assert parse_duration("1.5h") == 5400 and parse_duration(None) is None
    with pytest.raises(ValueError):
        parse_duration("ten minutes")
    phases = parse_schedule("128:0.9,512:0.1")
    assert phases == [(128, 0.9), (512, 0.1)]
    assert [seq_len_at(phases, p) for p in (0.0, 0.5, 0.8999, 0.9, 1.0)] == [128, 128, 128, 512, 512]
    with pytest.raises(ValueError):
        parse_schedule("128:0.5,512:0.2")


def test_latest_checkpoint_ignores_incomplete_folders(tmp_path):
    for step, files in ((2, ckpt.REQUIRED_FILES), (4, ckpt.REQUIRED_FILES), (6, ("config.json",))):
        folder = ckpt.checkpoint_dir(tmp_path, step)
        folder.mkdir(parents=True)
        for f in files:
            (folder / f).write_text("x")
    (tmp_path / "checkpoints" / ".step-8.abc.tmp").mkdir()
    assert ckpt.latest_checkpoint(tmp_path) == ckpt.checkpoint_dir(tmp_path, 4)
    # the hidden temporary of an unfinished save is swept; step-6 (a file missing: not something a save or a
    # prune of ours leaves) is neither resumed from nor deleted
    assert [p.name for p in ckpt.sweep_partial_saves(tmp_path)] == [".step-8.abc.tmp"]
    assert (ckpt.checkpoint_dir(tmp_path, 6) / "config.json").read_text() == "x"
    assert ckpt.incomplete_checkpoints(tmp_path) == [ckpt.checkpoint_dir(tmp_path, 6)]
    assert ckpt.latest_checkpoint(tmp_path / "nowhere") is None


def test_run_writes_a_loadable_model_logs_and_resumes(train_data, vocab_dir, tmp_path):
    out = tmp_path / "run"
    result = pretrain(train_data, out, vocab=str(vocab_dir), objective="mlm+nsp", max_steps=4, save_every=2,
                      keep_checkpoints=1, keep_checkpoints_at_end=True, eval_every=4, eval_batches=1, grad_accum=2,
                      warmup_steps=2, **FAST)
    assert result.step == 4 and result.stopped_by == "max-steps" and result.skipped_steps == 0
    assert result.output == out and not (out / "tensorboard").exists(), "TensorBoard only when asked for"
    # final model + tokenizer in OUTPUT, loadable by bertforge and by transformers
    from bertforge import BertForPreTraining
    from bertforge.tokenization import BertTokenizer
    ours = BertForPreTraining.from_pretrained(out).eval()
    assert BertTokenizer.from_pretrained(out).mask_token_id == 103
    transformers = require_module("transformers")
    theirs = transformers.BertForPreTraining.from_pretrained(out).eval()
    ids = torch.tensor([[101, 1996, 103, 2001, 2307, 1012, 102]])
    with torch.no_grad():
        a = ours(ids, attention_mask=torch.ones_like(ids), token_type_ids=torch.zeros_like(ids)).prediction_logits
        b = theirs(input_ids=ids).prediction_logits
    assert torch.allclose(a, b, atol=1e-4)
    # checkpoints: only the newest kept, HF layout + training state
    assert [s for s, _ in ckpt.list_checkpoints(out)] == [4]
    state = ckpt.load_training_state(ckpt.latest_checkpoint(out))
    assert {"optimizer", "scheduler", "rng", "stage", "step"} <= set(state) and state["step"] == 4
    # logs: train records every step, an eval record with perplexity = exp(mean MLM loss), the curves
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["split"] == "train"] == [1, 2, 3, 4]
    # the lr each step used: 1/2 and 2/2 of the peak while warming up, then down a line that reaches 0 at step 5
    assert [r["lr"] for r in records if r["split"] == "train"] == pytest.approx([5e-4, 1e-3, 1e-3, 5e-4], rel=1e-12)
    evals = [r for r in records if r["split"] == "eval"]
    assert len(evals) == 1 and math.isclose(evals[0]["perplexity"], math.exp(evals[0]["mlm_loss"]), rel_tol=1e-9)
    # ...whose numbers are those of the saved model on the first held-out batch, as transformers computes them
    from bertforge.data import MaskingConfig, PretrainingDataset
    heldout = PretrainingDataset(train_data, str(vocab_dir), objective="mlm+nsp", max_seq_length=64, batch_size=4,
                                 masking=MaskingConfig(), seed=0, split="heldout")
    batch = next(iter(heldout))
    with torch.no_grad():
        out_t = theirs(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                       token_type_ids=batch["token_type_ids"])
    masked = batch["labels"] != -100
    mlm_loss = torch.nn.functional.cross_entropy(out_t.prediction_logits[masked], batch["labels"][masked])
    mlm_acc = (out_t.prediction_logits[masked].argmax(-1) == batch["labels"][masked]).float().mean()
    nsp_acc = (out_t.seq_relationship_logits.argmax(-1) == batch["next_sentence_label"]).float().mean()
    assert evals[0]["mlm_loss"] == pytest.approx(float(mlm_loss), abs=1e-4)
    assert evals[0]["mlm_acc"] == pytest.approx(float(mlm_acc)) and evals[0]["nsp_acc"] == pytest.approx(float(nsp_acc))
    assert (out / "curves.png").stat().st_size > 0
    # running the same thing again finds it finished and changes nothing
    before = (out / "model.safetensors").read_bytes()
    again = pretrain(train_data, out, vocab=str(vocab_dir), objective="mlm+nsp", max_steps=4, save_every=2,
                     keep_checkpoints=1, keep_checkpoints_at_end=True, eval_every=4, eval_batches=1, grad_accum=2,
                     warmup_steps=2, **FAST)
    assert again.step == 4 and any("nothing to train" in n for n in again.notes)
    assert (out / "model.safetensors").read_bytes() == before
    # ...but a changed setting is refused rather than silently mixed into the old run
    with pytest.raises(ValueError, match="other settings"):
        pretrain(train_data, out, vocab=str(vocab_dir), objective="mlm", max_steps=4, **FAST)


def test_fill_mask_cli_reads_the_output(train_data, vocab_dir, tmp_path, capsys):
    from bertforge.cli import main
    out = tmp_path / "run"
    code = main(["pretrain", "--data", str(train_data), "--vocab", str(vocab_dir), "--output", str(out),
                 "--batch-size", "4", "--max-steps", "2", "--seq-len-schedule", "64:1", "--eval-batches", "0",
                 "--no-progress"])
    assert code == 0
    capsys.readouterr()
    assert main(["fill-mask", "--model", str(out), "the cat sat on the [MASK] ."]) == 0
    assert "[MASK] #1:" in capsys.readouterr().out


@pytest.mark.parametrize("objective", ["mlm+sop", "mlm", "ltr"])
def test_other_objectives_train(train_data, vocab_dir, tmp_path, objective):
    result = pretrain(train_data, tmp_path / objective, vocab=str(vocab_dir), objective=objective, max_steps=2,
                      eval_batches=1, optimizer="lamb" if objective == "mlm" else "adamw", **FAST)
    assert result.step == 2
    assert math.isfinite(result.final_eval["mlm_loss"])
    assert ("nsp_acc" in result.final_eval) == (objective == "mlm+sop")


def test_time_budget_stops_and_decays(train_data, vocab_dir, tmp_path, monkeypatch):
    # a clock that advances 0.1 s per reading: the number of steps the budget allows no longer depends on how
    # busy the machine is (with the real clock, a loaded machine fitted one step into 2 s and nothing decayed)
    import itertools

    import bertforge.training.engine as loop
    ticks = itertools.count(0.0, 0.1)
    monkeypatch.setattr(loop.time, "perf_counter", lambda: next(ticks))
    result = pretrain(train_data, tmp_path / "budget", vocab=str(vocab_dir), time_budget=2.0, eval_batches=0, **FAST)
    assert result.stopped_by == "time-budget" and result.step >= 3
    records = [json.loads(line) for line in (tmp_path / "budget" / "metrics.jsonl").read_text().splitlines()]
    lrs = [r["lr"] for r in records if r["split"] == "train"]
    assert lrs[-1] < 1e-3 and lrs == sorted(lrs, reverse=True)


def test_bf16_autocast_runs_on_cpu(train_data, vocab_dir, tmp_path):
    result = pretrain(train_data, tmp_path / "bf16", vocab=str(vocab_dir), max_steps=2, eval_batches=1,
                      precision="bf16", device="cpu", **FAST)
    assert math.isfinite(result.final_eval["mlm_loss"])


def test_non_finite_steps_are_skipped(train_data, vocab_dir, tmp_path):
    out = tmp_path / "nan"
    result = pretrain(train_data, out, vocab=str(vocab_dir), max_steps=4, eval_batches=0,
                      keep_checkpoints_at_end=True, hooks=FaultHooks(nan_at=lambda step: step in (2, 3)), **FAST)
    assert result.step == 4 and result.skipped_steps == 2
    weights = load_file(str(out / "model.safetensors"))
    assert all(torch.isfinite(t).all() for t in weights.values())
    state = ckpt.load_training_state(ckpt.latest_checkpoint(out))
    # two real updates only: the optimizer counted 2 steps, the schedule 4
    steps = {float(s["step"]) for s in state["optimizer"]["state"].values()}
    assert steps == {2.0} and state["scheduler"]["last_epoch"] == 4


@pytest.mark.parametrize("limit", [pytest.param(20, marks=pytest.mark.slow), 3])
def test_non_finite_steps_in_a_row_abort(train_data, vocab_dir, tmp_path, limit):
    """20 (the default) in a row abort the run; checkpoints are not written during the streak."""
    out = tmp_path / "diverged"
    options = {**FAST, "batch_size": 2, "seq_len_schedule": "32:1"}
    extra = {} if limit == 20 else {"max_bad_steps": limit}
    with pytest.raises(NonFiniteLossError, match=rf"{limit} steps in a row.*step-2\b"):
        pretrain(train_data, out, vocab=str(vocab_dir), max_steps=100, save_every=2, eval_batches=0, **options,
                 hooks=FaultHooks(nan_at=lambda step: step >= 3), **extra)
    assert [s for s, _ in ckpt.list_checkpoints(out)] == [2]
    weights = load_file(str(ckpt.latest_checkpoint(out) / "model.safetensors"))
    assert all(torch.isfinite(t).all() for t in weights.values())
    assert not (out / "model.safetensors").exists(), "a diverged run writes no final model"


@pytest.mark.parametrize("objective", ["mlm", "mlm+nsp"])
def test_init_from_an_encoder_says_which_new_heads_it_trains(train_data, vocab_dir, tmp_path, objective):
    """Continued pre-training of an encoder-only checkpoint (all-MiniLM-L6-v2 ships no MLM head): the MLM head
    starts new and is trained; the NSP head starts new too, and --objective mlm leaves it untrained."""
    from bertforge import BertConfig, BertModel
    encoder = tmp_path / "encoder"
    BertModel(BertConfig.preset("tiny", vocab_size=30522)).save_pretrained(encoder)
    result = pretrain(train_data, tmp_path / "run", vocab=str(vocab_dir), init_from=str(encoder), objective=objective,
                      max_steps=1, eval_batches=0, **{**FAST, "model": str(encoder)})
    note = next(n for n in result.notes if n.startswith(f"initialised from {encoder}"))
    trained, _, untrained = note.partition("left untrained")
    assert "cls.predictions" in trained and "cls.predictions" not in untrained
    assert ("cls.seq_relationship" in untrained) == (objective == "mlm")
    assert ("cls.seq_relationship" in trained) == (objective == "mlm+nsp")


def test_dropout_override_reaches_the_saved_model(train_data, vocab_dir, tmp_path):
    from bertforge.model import BertForPreTraining
    out = tmp_path / "nodrop"
    pretrain(train_data, out, vocab=str(vocab_dir), max_steps=1, eval_batches=0, dropout=0.0, **FAST)
    saved = json.loads((out / "config.json").read_text())
    assert saved["hidden_dropout_prob"] == 0.0 and saved["attention_probs_dropout_prob"] == 0.0
    model = BertForPreTraining.from_pretrained(out).train()   # train mode, yet nothing random is left
    ids = torch.tensor([[2, 7, 8, 9, 3]])
    first, second = model(input_ids=ids).prediction_logits, model(input_ids=ids).prediction_logits
    assert torch.equal(first, second)
    with pytest.raises(ValueError, match="--dropout must be in"):
        pretrain(train_data, tmp_path / "bad", vocab=str(vocab_dir), max_steps=1, dropout=1.5, **FAST)


def test_electra_pretrains_and_its_halves_load_in_transformers(train_data, vocab_dir, tmp_path):
    out = tmp_path / "electra"
    result = pretrain(train_data, out, vocab=str(vocab_dir), objective="electra", max_steps=3, save_every=2,
                      eval_batches=1, span_masking=True, **FAST)
    assert result.step == 3 and math.isfinite(result.final_eval["mlm_loss"])
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert {"disc_loss", "disc_acc", "replaced", "mlm_loss"} <= set(records[0])
    transformers = require_module("transformers")
    disc = transformers.ElectraForPreTraining.from_pretrained(out)
    gen = transformers.ElectraForMaskedLM.from_pretrained(out / "generator")
    assert gen.config.hidden_size == disc.config.hidden_size // 4
    assert (out / "generator" / "vocab.txt").exists(), "the generator folder is a fill-mask model of its own"
    # a resumed ELECTRA run loads both networks from its checkpoint
    again = pretrain(train_data, out, vocab=str(vocab_dir), objective="electra", max_steps=3, save_every=2,
                     eval_batches=1, span_masking=True, **FAST)
    assert any("nothing to train" in n for n in again.notes)


def test_init_from_a_model_with_another_vocabulary_is_refused(train_data, vocab_dir, tmp_path):
    from bertforge import BertConfig, BertModel
    from bertforge.tokenization import BertTokenizer
    other = tmp_path / "other"
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(40000)]
    other.mkdir()
    (other / "vocab.txt").write_text("\n".join(words) + "\n")
    BertTokenizer.from_pretrained(other)  # a valid tokenizer folder
    BertModel(BertConfig.preset("tiny", vocab_size=len(words))).save_pretrained(other)
    with pytest.raises(ValueError, match="another vocabulary"):
        pretrain(train_data, tmp_path / "run", vocab=str(vocab_dir), init_from=str(other), max_steps=1,
                 eval_batches=0, **{**FAST, "model": str(other)})
    assert not (tmp_path / "run").exists(), "a run refused before it started leaves nothing behind"


def test_max_seq_length_is_the_one_phase_schedule_and_refuses_a_second_schedule() -> None:
    """`--max-seq-length N` (every other verb's spelling) trains at N the whole run, as `--seq-len-schedule N:1`;
    given with another schedule it is refused naming both flags, never silently preferring one."""
    from bertforge.pretraining.pretrain import PretrainConfig
    from bertforge.settings import SettingError
    one = PretrainConfig.from_options(data="d", output="o", recipe="fast", max_seq_length=4096)
    assert parse_schedule(one.seq_len_schedule) == [(4096, 1.0)]
    assert one == PretrainConfig.from_options(data="d", output="o", recipe="fast", max_seq_length=4096,
                                              seq_len_schedule="4096:1.0")
    with pytest.raises(SettingError) as info:
        PretrainConfig.from_options(data="d", output="o", max_seq_length=4096, seq_len_schedule="128:0.9,4096:0.1")
    assert str(info.value) == "give --max-seq-length or --seq-len-schedule, not both"

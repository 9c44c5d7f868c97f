"""Task distillation: a predictor folder and a report from a teacher predictor, the texts it reads, the CLI."""
from __future__ import annotations

import json

import pytest

from distill_folders import WORDS, tiny_teacher
from bertforge.cli import main
from bertforge.model.task_heads import BertForSequenceClassification
from bertforge.pretraining.distill import INIT_RECORD, init_student
from bertforge.tasks.distill import REPORT_FILE


# ---- task distillation ---------------------------------------------------------------------------------------------
def sst2_like(folder, n: int, seed: int) -> list[str]:
    import random
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        good = rng.random() < 0.5
        words = [rng.choice(("good", "great", "fun", "brilliant", "loved") if good else
                            ("bad", "awful", "dull", "boring", "hated")) for _ in range(2)]
        rows.append((" ".join(["the", "film", "was"] + words + rng.sample(WORDS[:8], 2)), int(good)))
    return rows


def write_tsv(path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("sentence\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in rows), encoding="utf-8")


@pytest.fixture
def task_setup(tmp_path):
    """A fine-tuned-looking sst2 teacher predictor (random weights), a student from it, data and texts."""
    from bertforge.tasks.finetune import FinetuneSettings, save_predictor
    from bertforge.tasks.registry import get_task
    from bertforge.tokenization import load_tokenizer
    teacher_dir = tmp_path / "teacher"
    model = tiny_teacher(teacher_dir, cls=BertForSequenceClassification, layers=2, id2label={0: "0", 1: "1"})
    spec = get_task("sst2")
    save_predictor(teacher_dir, model, load_tokenizer(teacher_dir), spec,
                   FinetuneSettings(task="sst2", model="", output="", max_seq_length=32), ["0", "1"])
    student = init_student(teacher_dir, tmp_path / "student")
    data = tmp_path / "SST-2"
    write_tsv(data / "train.tsv", sst2_like(data, 24, 0))
    dev = sst2_like(data, 16, 1)
    write_tsv(data / "dev.tsv", dev)
    texts = tmp_path / "unlabeled.txt"
    texts.write_text("".join(t + "\n" for t, _ in sst2_like(data, 60, 2)) + dev[0][0] + "\n\n", encoding="utf-8")
    return teacher_dir, student, data, texts


def test_task_distillation_writes_a_predictor_and_a_report(task_setup, tmp_path):
    from bertforge.tasks.predictor import Predictor
    from bertforge.tasks.distill import TaskDistillSettings, distill_task
    teacher_dir, student, data, texts = task_setup
    out = tmp_path / "distilled"
    report = distill_task(TaskDistillSettings(
        teacher=str(teacher_dir), student=str(student), unlabeled=[str(texts)], output=str(out), data=str(data),
        epochs=2, batch_size=8, lr=1e-3, alpha_hard=0.5, timing_rounds=1, progress=False), say=lambda _: None)
    dev_text = (data / "dev.tsv").read_text().splitlines()[1].split("\t")[0]
    unique = len(set((texts.read_text().split("\n")))) - 1  # minus the blank line
    assert report["transfer_set"]["unlabeled"] == unique - (dev_text in texts.read_text())  # dev text left out
    assert report["transfer_set"]["from_train"] == 24
    for who in ("teacher", "student"):
        row = report[who]
        assert 0.0 <= row["accuracy"] <= 1.0 and row["examples_per_second"] > 0 and row["parameters"] > 0
    assert report["student"]["parameters"] < report["teacher"]["parameters"]
    assert report["student"]["model_type"] == "distilbert" and report["student"]["layers"] == 1
    assert json.loads((out / REPORT_FILE).read_text())["task"] == "sst2"

    predictor = Predictor.load(out)
    assert type(predictor.model).__name__ == "DistilBertForSequenceClassification"
    results = predictor.predict(["the film was great fun", "the plot was dull"])
    assert [r["label"] in ("0", "1") for r in results] == [True, True]
    steps = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert any(r["split"] == "eval" for r in steps) and "loss_soft" in steps[0]


def test_read_texts_takes_txt_and_table_files(tmp_path):
    from bertforge.tasks.distill import read_texts
    (tmp_path / "a.txt").write_text("one text\n\nfirst\tsecond\n", encoding="utf-8")
    write_tsv(tmp_path / "b.tsv", [("a labelled row", 1)])
    got = read_texts([tmp_path / "a.txt", tmp_path / "b.tsv"])
    assert [(ex.text, ex.text_pair, ex.label) for ex in got] == [("one text", None, None), ("first", "second", None),
                                                                  ("a labelled row", None, None)]
    (tmp_path / "empty.txt").write_text("\n", encoding="utf-8")
    with pytest.raises(ValueError, match="empty.txt: holds no texts"):
        read_texts([tmp_path / "empty.txt"])


def test_cli_init_and_clear_errors(task_setup, tmp_path, capsys):
    teacher_dir, student, data, texts = task_setup
    assert main(["distill", "init", "--teacher", str(teacher_dir), "--output", str(tmp_path / "cli-student"),
                 "--layers", "1"]) == 0
    assert json.loads((tmp_path / "cli-student" / INIT_RECORD).read_text())["student_layers"] == [1]
    assert main(["distill"]) == 2

    missing = tmp_path / "no-such-texts.txt"
    assert main(["distill", "task", "--teacher", str(teacher_dir), "--student", str(student), "--unlabeled",
                 str(missing), "--data", str(data), "--output", str(tmp_path / "o")]) == 1
    assert f"{missing}: no such unlabeled-text file" in capsys.readouterr().err
    assert main(["distill", "task", "--teacher", str(student), "--student", str(student), "--unlabeled",
                 str(texts), "--output", str(tmp_path / "o")]) == 1
    assert "task.json" in capsys.readouterr().err
    assert main(["distill", "pretrain", "--teacher", str(teacher_dir), "--student", str(student), "--data",
                 str(tmp_path / "nothing"), "--output", str(tmp_path / "p"), "--max-steps", "1"]) == 1
    assert "nothing" in capsys.readouterr().err


def test_the_teachers_seed_and_sample_size_are_read_from_either_record_shape(tmp_path):
    """Task distillation defaults to the teacher's seed and train subset: found in metrics.json whether the
    settings were recorded by part (train.seed) or, by earlier versions, flat."""
    from bertforge.tasks.distill import _teacher_finetune_settings
    for name, settings in (("by-part", {"train": {"seed": 7}, "max_train_samples": 16}),
                           ("flat", {"seed": 7, "max_train_samples": 16})):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "metrics.json").write_text(json.dumps({"settings": settings}))
        found = _teacher_finetune_settings(folder)
        assert (found["seed"], found["max_train_samples"]) == (7, 16)

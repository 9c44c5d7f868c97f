"""Distillation: student initialisation, the triple loss, the pre-training loop with resume, task distillation, CLI."""
from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from run_folders import copy_as_interrupted
from bertforge.cli import main
from bertforge.config import BertConfig
from bertforge.model.bert import BertForMaskedLM
from bertforge.model.distilbert import DistilBertForMaskedLM
from bertforge.model.task_heads import BertForSequenceClassification
from bertforge.training.distill import (INIT_RECORD, REPORT_FILE, distill, distillation_loss, init_student,
                                        task_distillation_loss)

from needs import require_module

WORDS = ("the a film movie is was good bad great awful fun dull plot actors story loved hated boring brilliant "
         "not very really quite and but it this that of to in with best worst").split()


def tiny_vocab(folder):
    """A WordPiece vocab.txt with BERT's special ids (0 pad, 100 unk, 101 cls, 102 sep, 103 mask)."""
    tokens = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list(WORDS)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return len(tokens)


def tiny_teacher(folder, cls=BertForMaskedLM, layers: int = 4, vocab_dir=None, **overrides):
    """A random BERT with token types (the part DistilBERT drops), saved with a tokenizer."""
    from bertforge.tokenization import load_tokenizer
    if vocab_dir is None:
        vocab_size = tiny_vocab(folder)
    else:
        tok = load_tokenizer(vocab_dir)
        tok.save_pretrained(folder)
        vocab_size = len(tok.vocab)
    config = BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=layers, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=64, **overrides)
    torch.manual_seed(0)
    model = cls(config)
    with torch.no_grad():  # non-trivial segment 0 and MLM bias, so folding them is really tested
        model.bert.embeddings.token_type_embeddings.weight.normal_(0, 0.5)
        if hasattr(model, "mlm"):
            model.mlm.bias.normal_(0, 0.5)
    model.eval().save_pretrained(folder)
    return model


# ---- init_student ------------------------------------------------------------------------------------------------
def test_init_student_copies_every_other_layer_and_loads_in_transformers(tmp_path):
    teacher = tiny_teacher(tmp_path / "teacher")
    out = init_student(tmp_path / "teacher", tmp_path / "student")
    student = DistilBertForMaskedLM.from_pretrained(out).eval()
    assert student.loading_info == {"newly_initialized": [], "unused": []}
    assert student.config.num_hidden_layers == 2 and student.config.type_vocab_size == 0
    for i, j in enumerate((0, 2)):
        for name, tensor in student.bert.encoder.layers[i].state_dict().items():
            assert torch.equal(tensor, teacher.bert.encoder.layers[j].state_dict()[name]), (i, j, name)
    t_emb, s_emb = teacher.bert.embeddings, student.bert.embeddings
    assert torch.equal(s_emb.word_embeddings.weight, t_emb.word_embeddings.weight + t_emb.token_type_embeddings.weight[0])
    assert torch.equal(s_emb.position_embeddings.weight, t_emb.position_embeddings.weight)
    assert torch.equal(student.mlm.bias, teacher.mlm.bias) and torch.equal(student.mlm.transform.weight,
                                                                           teacher.mlm.transform.weight)
    record = json.loads((out / INIT_RECORD).read_text())
    assert record["student_layers"] == [0, 2] and record["mlm_head"] == "copied"
    assert "folded" in record["token_type_embeddings"]
    assert (out / "vocab.txt").read_text() == (tmp_path / "teacher" / "vocab.txt").read_text()

    transformers = require_module("transformers")
    theirs, info = transformers.DistilBertForMaskedLM.from_pretrained(out, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    ids = torch.tensor([[101, 104, 105, 106, 102, 0], [101, 107, 108, 102, 0, 0]])
    mask = (ids != 0).long()
    with torch.no_grad():
        a, b = student(ids, attention_mask=mask).logits, theirs.eval()(input_ids=ids, attention_mask=mask).logits
    assert (a - b)[mask.bool()].abs().max() <= 1e-5


def test_folding_segment_zero_keeps_the_teachers_predictions(tmp_path):
    """With all layers kept, the student is the teacher on single-segment input: the folded segment embedding
    gives the same hidden states, and the tied decoder only shifts each row's logits by a constant."""
    teacher = tiny_teacher(tmp_path / "teacher", layers=2)
    student = DistilBertForMaskedLM.from_pretrained(init_student(tmp_path / "teacher", tmp_path / "s", layers=[0, 1]))
    ids = torch.tensor([[101, 104, 105, 106, 102, 0], [101, 107, 108, 102, 0, 0]])
    mask = (ids != 0).long()
    real = mask.bool()
    with torch.no_grad():
        t = teacher(ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids), output_hidden_states=True)
        s = student.eval()(ids, attention_mask=mask, output_hidden_states=True)
    assert (t.hidden_states[-1] - s.hidden_states[-1])[real].abs().max() <= 1e-5
    assert (t.logits.softmax(-1) - s.logits.softmax(-1))[real].abs().max() <= 1e-6
    assert not torch.allclose(t.logits[real], s.logits[real])  # logits moved, probabilities did not


def test_init_student_rejects_bad_layers_and_families(tmp_path):
    tiny_teacher(tmp_path / "teacher")
    with pytest.raises(ValueError, match=r"teacher layers 0\.\.3"):
        init_student(tmp_path / "teacher", tmp_path / "s", layers=[0, 4])
    with pytest.raises(RuntimeError, match="no such checkpoint folder"):
        init_student(tmp_path / "nowhere", tmp_path / "s")


# ---- losses ------------------------------------------------------------------------------------------------------
def test_triple_loss_matches_a_hand_computation():
    g = torch.Generator().manual_seed(0)
    s, t = torch.randn(5, 11, generator=g), torch.randn(5, 11, generator=g)
    labels = torch.tensor([1, 4, 0, 10, 3])
    sh, th = torch.randn(9, 6, generator=g), torch.randn(9, 6, generator=g)
    T = 2.5
    out = distillation_loss(s, t, labels, sh, th, temperature=T, alpha_ce=5.0, alpha_mlm=2.0, alpha_cos=1.0)

    p_t = torch.exp(t / T) / torch.exp(t / T).sum(-1, keepdim=True)
    log_p_s = s / T - torch.log(torch.exp(s / T).sum(-1, keepdim=True))
    kl = (p_t * (torch.log(p_t) - log_p_s)).sum() / 5 * T ** 2
    log_q = s - torch.log(torch.exp(s).sum(-1, keepdim=True))
    mlm = -log_q[torch.arange(5), labels].mean()
    cos = (1 - (sh * th).sum(-1) / (sh.norm(dim=-1) * th.norm(dim=-1))).mean()
    for key, want in (("loss_ce", kl), ("loss_mlm", mlm), ("loss_cos", cos), ("loss", 5 * kl + 2 * mlm + cos)):
        assert abs(out[key].item() - want.item()) < 1e-5, key
    # a student that matches the teacher has no soft-target loss
    same = distillation_loss(t, t, labels, None, None, temperature=T, alpha_ce=1, alpha_mlm=0, alpha_cos=1)
    assert abs(same["loss"].item()) < 1e-6

    hard = torch.tensor([-1, 2, -1, 0, -1])
    task = task_distillation_loss(s, t, hard, T, alpha_hard=0.5, regression=False)
    gold_ce = -log_q[[1, 3], [2, 0]].mean()
    assert abs(task["loss_soft"].item() - kl.item()) < 1e-5
    assert abs(task["loss"].item() - (kl + 0.5 * gold_ce).item()) < 1e-5


# ---- pre-training distillation -------------------------------------------------------------------------------------
def test_distillation_reduces_the_loss_and_resumes_exactly(train_data, vocab_dir, tmp_path):
    tiny_teacher(tmp_path / "teacher", layers=2, vocab_dir=vocab_dir)
    student = init_student(tmp_path / "teacher", tmp_path / "student")
    options = dict(batch_size=8, lr=2e-3, max_seq_length=64, max_steps=12, save_every=4, log_every=1,
                   eval_batches=1, seed=5, progress=False, keep_checkpoints_at_end=True)
    ref = distill(tmp_path / "teacher", student, train_data, tmp_path / "ref", **options)
    assert ref.step == 12 and ref.stopped_by == "max-steps" and ref.final_eval and ref.teacher_eval
    records = [json.loads(line) for line in (tmp_path / "ref" / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in records if r["split"] == "train"]
    assert len(losses) == 12 and sum(losses[-3:]) < sum(losses[:3])
    assert {"loss_ce", "loss_mlm", "loss_cos", "mlm_acc"} <= set(records[0])
    assert (tmp_path / "ref" / "curves.png").exists()
    assert DistilBertForMaskedLM.from_pretrained(tmp_path / "ref").loading_info["newly_initialized"] == []

    # interrupted right after the step-4 checkpoint: the resumed run ends with the same weights, bit for bit
    resumed = tmp_path / "resumed"
    copy_as_interrupted(tmp_path / "ref", resumed, 4)
    again = distill(tmp_path / "teacher", student, train_data, resumed, **options)
    assert again.step == 12
    logged = [json.loads(line)["step"] for line in (resumed / "metrics.jsonl").read_text().splitlines()]
    assert min(logged) == 5, "the run continued from step 4 rather than starting over"
    a, b = load_file(str(tmp_path / "ref" / "model.safetensors")), load_file(str(resumed / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    with pytest.raises(ValueError, match="temperature: 2.0 there, 3.0 now"):
        distill(tmp_path / "teacher", student, train_data, resumed, **{**options, "temperature": 3.0})


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
    from bertforge.training.distill import TaskDistillSettings, distill_task
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
    from bertforge.training.distill import read_texts
    (tmp_path / "a.txt").write_text("one text\n\nfirst\tsecond\n", encoding="utf-8")
    write_tsv(tmp_path / "b.tsv", [("a labelled row", 1)])
    got = read_texts([tmp_path / "a.txt", tmp_path / "b.tsv"])
    assert [(ex.text, ex.text_pair, ex.label) for ex in got] == [("one text", None, None), ("first", "second", None),
                                                                  ("a labelled row", None, None)]
    (tmp_path / "empty.txt").write_text("\n", encoding="utf-8")
    with pytest.raises(ValueError, match="empty.txt: holds no texts"):
        read_texts([tmp_path / "empty.txt"])


# ---- CLI -----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("step", ["init", "pretrain", "task"])
def test_cli_help(step, capsys):
    with pytest.raises(SystemExit) as done:
        main(["distill", step, "--help"])
    assert done.value.code == 0 and "--teacher" in capsys.readouterr().out


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
    from bertforge.training.distill import _teacher_finetune_settings
    for name, settings in (("by-part", {"train": {"seed": 7}, "max_train_samples": 16}),
                           ("flat", {"seed": 7, "max_train_samples": 16})):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "metrics.json").write_text(json.dumps({"settings": settings}))
        found = _teacher_finetune_settings(folder)
        assert (found["seed"], found["max_train_samples"]) == (7, 16)

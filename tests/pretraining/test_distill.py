"""Corpus distillation: student initialisation, the triple loss, the pre-training loop with resume, the CLI's help."""
from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from distill_folders import tiny_teacher
from run_folders import copy_as_interrupted
from bertforge.cli import main
from bertforge.model.distilbert import DistilBertForMaskedLM
from bertforge.pretraining.distill import INIT_RECORD, distill, distillation_loss, init_student
from bertforge.tasks.distill import task_distillation_loss

from needs import require_module


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


# ---- CLI -----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("step", ["init", "pretrain", "task"])
def test_cli_help(step, capsys):
    with pytest.raises(SystemExit) as done:
        main(["distill", step, "--help"])
    assert done.value.code == 0 and "--teacher" in capsys.readouterr().out

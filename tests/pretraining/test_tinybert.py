"""TinyBERT's pre-training distillation: its losses against transformers, a student that learns, the saved folder,
exact resume, and refused pairs."""
from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file

from distill_folders import tiny_teacher
from run_folders import copy_as_interrupted
from bertforge.cli import main
from bertforge.config import BertConfig
from bertforge.model.bert import BertForMaskedLM
from bertforge.pretraining.distill import distill
from bertforge.pretraining.tinybert import TinyBertStage, layer_map

from needs import require_module


def tiny_student(folder, teacher_dir, layers: int = 2, hidden: int = 16, heads: int = 4):
    """A fresh, narrower BERT student with the teacher's tokenizer."""
    from bertforge.tokenization import load_tokenizer
    tok = load_tokenizer(teacher_dir)
    config = BertConfig(vocab_size=len(tok.vocab), hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                        intermediate_size=2 * hidden, max_position_embeddings=64)
    torch.manual_seed(1)
    model = BertForMaskedLM(config)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return model


def test_layer_map_is_uniform():
    assert layer_map(2, 4) == [2, 4] and layer_map(4, 12) == [3, 6, 9, 12] and layer_map(3, 3) == [1, 2, 3]


def _scores_by_hand(layer, x: torch.Tensor, heads: int) -> torch.Tensor:
    """q k^T / sqrt(d) from transformers' query/key weights: [batch, heads, seq, seq]."""
    B, L, H = x.shape
    d = H // heads
    q = layer.attention.self.query(x).view(B, L, heads, d).transpose(1, 2)
    k = layer.attention.self.key(x).view(B, L, heads, d).transpose(1, 2)
    return q @ k.transpose(-1, -2) / math.sqrt(d)


def test_intermediate_loss_equals_a_computation_from_transformers(tmp_path):
    transformers = require_module("transformers")
    teacher = tiny_teacher(tmp_path / "teacher", layers=4)
    student = tiny_student(tmp_path / "student", tmp_path / "teacher")
    cfg = SimpleNamespace(tinybert_intermediate_fraction=0.5, temperature=1.0)
    stage = TinyBertStage(cfg, teacher.eval(), student, None, None, None, None)
    net = stage.model.eval()
    ids = torch.tensor([[101, 104, 105, 106, 107, 102], [101, 108, 109, 102, 0, 0]])
    mask = (ids != 0).long()
    batch = {"input_ids": ids, "attention_mask": mask, "labels": torch.full_like(ids, -100)}
    out = stage.loss(net, batch)

    real = mask.bool()
    pairs = real[:, None, :, None] & real[:, None, None, :]
    ext = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
    W, b = net.projection.weight.detach(), net.projection.bias.detach()
    with torch.no_grad():
        t = transformers.BertModel.from_pretrained(tmp_path / "teacher", attn_implementation="eager").eval()
        s = transformers.BertModel.from_pretrained(tmp_path / "student", attn_implementation="eager").eval()
        to = t(ids, attention_mask=mask, output_hidden_states=True, output_attentions=True)
        so = s(ids, attention_mask=mask, output_hidden_states=True, output_attentions=True)
        emb = ((so.hidden_states[0] @ W.T + b - to.hidden_states[0])[real] ** 2).mean()
        hidden = sum(((so.hidden_states[m] @ W.T + b - to.hidden_states[g])[real] ** 2).mean()
                     for m, g in ((1, 2), (2, 4)))
        attn = 0.0
        for m, g in ((1, 2), (2, 4)):
            ss = _scores_by_hand(s.encoder.layer[m - 1], so.hidden_states[m - 1], 4)
            ts = _scores_by_hand(t.encoder.layer[g - 1], to.hidden_states[g - 1], 4)
            # the hand-made scores are transformers' own: softmax of them plus the mask is its attention
            assert torch.allclose(torch.softmax(ts + ext, -1), to.attentions[g - 1], atol=1e-5)
            assert torch.allclose(torch.softmax(ss + ext, -1), so.attentions[m - 1], atol=1e-5)
            attn += ((ss - ts) ** 2)[pairs.expand_as(ss)].mean()
    parts = out.parts
    assert parts["loss_emb"].item() == pytest.approx(float(emb), rel=1e-4)
    assert parts["loss_hidden"].item() == pytest.approx(float(hidden), rel=1e-4)
    assert parts["loss_attn"].item() == pytest.approx(float(attn), rel=1e-4)
    assert out.loss.item() == pytest.approx(float(emb + hidden + attn), rel=1e-4)

    # the prediction-layer stage: soft cross-entropy at T on the masked rows, from transformers' MLM logits
    stage.set_progress(0.5)
    batch["labels"] = torch.tensor([[-100, 104, -100, -100, 107, -100], [-100, -100, 109, -100, -100, -100]])
    pred = stage.loss(net, batch)
    with torch.no_grad():
        tl = transformers.BertForMaskedLM.from_pretrained(tmp_path / "teacher").eval()(ids, attention_mask=mask).logits
        sl = transformers.BertForMaskedLM.from_pretrained(tmp_path / "student").eval()(ids, attention_mask=mask).logits
        rows = batch["labels"] != -100
        ref = -(torch.softmax(tl[rows], -1) * torch.log_softmax(sl[rows], -1)).sum(-1).mean()
    assert set(pred.parts) == {"loss_pred"} and pred.loss.item() == pytest.approx(float(ref), rel=1e-4)


def test_tinybert_student_learns_saves_without_projection_and_resumes_exactly(train_data, vocab_dir, tmp_path):
    tiny_teacher(tmp_path / "teacher", layers=4, vocab_dir=vocab_dir)
    tiny_student(tmp_path / "student", tmp_path / "teacher")
    options = dict(loss="tinybert", batch_size=8, lr=3e-3, max_seq_length=64, max_steps=24, save_every=8, log_every=1,
                   eval_batches=1, seed=5, progress=False, keep_checkpoints_at_end=True, temperature=1.0)
    ref = distill(tmp_path / "teacher", tmp_path / "student", train_data, tmp_path / "ref", **options)
    assert ref.step == 24 and ref.final_eval
    records = [json.loads(line) for line in (tmp_path / "ref" / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["split"] == "train"]
    inter = [r["loss"] for r in train if "loss_attn" in r]
    pred = [r["loss"] for r in train if "loss_pred" in r]
    assert len(inter) == 12 and len(pred) == 12, "half the run on each stage"
    assert sum(inter[-3:]) < 0.7 * sum(inter[:3]), inter
    assert sum(pred[-3:]) < sum(pred[:3]), pred

    transformers = require_module("transformers")
    saved = load_file(str(tmp_path / "ref" / "model.safetensors"))
    assert not any("projection" in k for k in saved)
    theirs, info = transformers.BertForMaskedLM.from_pretrained(tmp_path / "ref", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and theirs.config.hidden_size == 16

    # interrupted after step 8 (inside the first stage): the resumed run ends with the same weights, bit for bit
    resumed = tmp_path / "resumed"
    copy_as_interrupted(tmp_path / "ref", resumed, 8)
    again = distill(tmp_path / "teacher", tmp_path / "student", train_data, resumed, **options)
    assert again.step == 24
    assert min(json.loads(line)["step"] for line in (resumed / "metrics.jsonl").read_text().splitlines()) == 9
    b = load_file(str(resumed / "model.safetensors"))
    assert saved.keys() == b.keys() and all(torch.equal(saved[k], b[k]) for k in saved)


@pytest.mark.parametrize("case, expected", [
    ("deeper", "--student has 6 layers, more than the teacher's 4"),
    ("vocab", "--teacher and --student have different vocabularies"),
    ("heads", "--student has 2 attention heads, the teacher 4"),
    ("no head", "--teacher has no MLM head"),
    ("size", "--student must be a student folder, a config.json or a named size such as mini; 'gigantic' is none"),
])
def test_bad_pairs_are_refused_in_one_line(case, expected, train_data, vocab_dir, tmp_path, capsys):
    from bertforge.model.task_heads import BertForSequenceClassification
    tiny_teacher(tmp_path / "teacher", BertForSequenceClassification if case == "no head" else BertForMaskedLM,
                 layers=4, vocab_dir=vocab_dir)
    if case == "vocab":
        tiny_teacher(tmp_path / "student", layers=2)  # its own few-word vocabulary
    else:
        tiny_student(tmp_path / "student", tmp_path / "teacher", layers=6 if case == "deeper" else 2,
                     heads=2 if case == "heads" else 4)
    student = "gigantic" if case == "size" else str(tmp_path / "student")
    code = main(["distill", "pretrain", "--loss", "tinybert", "--teacher", str(tmp_path / "teacher"), "--student",
                 student, "--data", str(train_data), "--output", str(tmp_path / "out"),
                 "--max-steps", "1", "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code != 0 and len(err.splitlines()) == 1 and expected in err, err


def test_a_fresh_student_from_a_config_file(train_data, vocab_dir, tmp_path):
    """No initialised folder: `--student` names a config.json; the student is built at the data's vocab size."""
    from bertforge.tokenization import load_tokenizer
    tiny_teacher(tmp_path / "teacher", layers=4, vocab_dir=vocab_dir)
    config = BertConfig(vocab_size=8, hidden_size=24, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48,
                        max_position_embeddings=64)
    config.save_pretrained(tmp_path / "shape")
    out = distill(tmp_path / "teacher", tmp_path / "shape" / "config.json", train_data, tmp_path / "out",
                  loss="tinybert", batch_size=4, max_seq_length=32, max_steps=2, eval_batches=0, progress=False)
    student = BertForMaskedLM.from_pretrained(out.output)
    assert (student.config.hidden_size, student.config.num_hidden_layers) == (24, 2)
    assert student.config.vocab_size == len(load_tokenizer(vocab_dir).vocab)

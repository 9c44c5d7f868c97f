"""ELECTRA against `transformers` (the oracle): random-init small configs, padded batches, both directions,
outputs, losses and one training step's gradients."""
from __future__ import annotations

import copy

import pytest
import torch

from bertforge.checkpoint import internal_to_hf_state_dict
from bertforge.config import ConfigError
from bertforge.model.auto import (AutoConfig, AutoModel, AutoModelForMaskedLM, AutoModelForPreTraining,
                                  AutoModelForSequenceClassification, model_class_for, preset_config)
from bertforge.model.electra import (ElectraConfig, ElectraForMaskedLM, ElectraForMultipleChoice,
                                     ElectraForPreTraining, ElectraForQuestionAnswering,
                                     ElectraForSequenceClassification, ElectraForTokenClassification, ElectraModel)

from needs import require_module

transformers = require_module("transformers")
TOL = 1e-5


def small_config(**overrides) -> ElectraConfig:
    fields = dict(vocab_size=120, embedding_size=24, hidden_size=48, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=96, max_position_embeddings=40, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0, summary_last_dropout=0.0)
    fields.update(overrides)
    return ElectraConfig(**fields)


def hf_config(config: ElectraConfig) -> "transformers.ElectraConfig":
    return transformers.ElectraConfig(**{k: v for k, v in config.to_dict().items() if k != "model_type"})


def padded_batch(vocab: int, batch: int = 4, seq: int = 17, seed: int = 0):
    """[CLS] ... [SEP] rows of different lengths, padded with id 0, two segments."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (batch, seq), generator=g)
    lengths = torch.tensor([seq, seq - 5, 3, seq - 1])[:batch]
    mask = (torch.arange(seq)[None] < lengths[:, None]).long()
    ids[:, 0] = 2
    ids[torch.arange(batch), lengths - 1] = 3
    ids = torch.where(mask.bool(), ids, torch.zeros_like(ids))
    types = ((torch.arange(seq)[None] >= (lengths // 2)[:, None]) & mask.bool()).long()
    return ids, mask, types


def max_diff(a: torch.Tensor, b: torch.Tensor, real: torch.Tensor | None = None) -> float:
    if real is not None:
        a, b = a[real], b[real]
    return (a - b).abs().max().item()


# (our class, transformers' class name, what the labels look like)
CLASSES = [
    (ElectraModel, "ElectraModel", None),
    (ElectraForPreTraining, "ElectraForPreTraining", "replaced"),
    (ElectraForMaskedLM, "ElectraForMaskedLM", "mlm"),
    (ElectraForSequenceClassification, "ElectraForSequenceClassification", "class"),
    (ElectraForTokenClassification, "ElectraForTokenClassification", "token"),
    (ElectraForQuestionAnswering, "ElectraForQuestionAnswering", "span"),
    (ElectraForMultipleChoice, "ElectraForMultipleChoice", "choice"),
]


def inputs_for(kind: str | None, config: ElectraConfig, seed: int) -> dict[str, torch.Tensor]:
    ids, mask, types = padded_batch(config.vocab_size, seed=seed)
    real = mask.bool()
    g = torch.Generator().manual_seed(seed + 100)
    out = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
    if kind is None:
        out["output_hidden_states"] = True
    elif kind == "replaced":
        out["labels"] = (torch.rand(ids.shape, generator=g) < 0.3).long() * mask
    elif kind == "mlm":
        labels = torch.full_like(ids, -100)
        labels[0, 3], labels[1, 5], labels[3, 10], labels[0, 9] = 7, 9, 11, 40
        out["labels"] = labels
    elif kind == "class":
        out["labels"] = torch.tensor([0, 2, 1, 2])
    elif kind == "token":
        out["labels"] = torch.where(real, torch.randint(0, 3, ids.shape, generator=g), torch.full_like(ids, -100))
    elif kind == "span":
        out["start_positions"], out["end_positions"] = torch.tensor([1, 4, 0, 30]), torch.tensor([2, 6, 1, 30])
    elif kind == "choice":
        out = {k: v.reshape(2, 2, -1) for k, v in out.items()}
        out["labels"] = torch.tensor([1, 0])
    return out


def reference_loss(kind, b, inputs) -> torch.Tensor:
    """transformers' loss, except for QA on padded rows: bertforge (like its BERT) never lets a padded position
    be an answer, so the reference is HF's logits with padding masked out, then HF's loss rule."""
    if kind != "span":
        return b.loss
    pad = ~inputs["attention_mask"].bool()
    L = pad.shape[1]
    ce = torch.nn.CrossEntropyLoss(ignore_index=L)
    start, end = (x.masked_fill(pad, torch.finfo(x.dtype).min / 2) for x in (b.start_logits, b.end_logits))
    return (ce(start, inputs["start_positions"].clamp(0, L)) + ce(end, inputs["end_positions"].clamp(0, L))) / 2


def compare_outputs(kind, a, b, inputs, check_loss=True):
    mask = inputs["attention_mask"]
    real = mask.bool()
    if kind is None:
        assert max_diff(a.last_hidden_state, b.last_hidden_state, real) <= TOL
        for x, y in zip(a.hidden_states, b.hidden_states, strict=True):  # after embeddings_project, each layer
            assert max_diff(x, y, real) <= TOL
    elif kind == "span":
        assert max_diff(a.start_logits, b.start_logits, real) <= TOL
        assert max_diff(a.end_logits, b.end_logits, real) <= TOL
    elif kind in ("replaced", "token"):
        assert max_diff(a.logits, b.logits, real) <= TOL
    elif kind == "mlm":  # ours decodes only the labelled rows
        assert max_diff(a.logits, b.logits[inputs["labels"] != -100]) <= TOL
    else:
        assert max_diff(a.logits, b.logits) <= TOL
    if check_loss and kind is not None:
        assert abs(a.loss.item() - reference_loss(kind, b, inputs).item()) <= TOL


@pytest.mark.parametrize("embedding_size", [24, 48], ids=["projected", "unprojected"])
@pytest.mark.parametrize("ours_cls,hf_name,kind", CLASSES, ids=[c[1] for c in CLASSES])
def test_every_class_matches_transformers_both_ways(tmp_path, ours_cls, hf_name, kind, embedding_size):
    labels = {0: "a", 1: "b", 2: "c"} if kind in ("class", "token") else None  # HF's QA head needs 2 outputs
    config = small_config(embedding_size=embedding_size, id2label=labels, hidden_act="gelu_new")
    inputs = inputs_for(kind, config, seed=1)
    hf_cls = getattr(transformers, hf_name)

    # theirs saved -> ours loads: same outputs and losses, and the same gradients after one backward
    torch.manual_seed(0)
    theirs = hf_cls(hf_config(config)).eval()
    theirs.save_pretrained(tmp_path / "theirs")
    ours = ours_cls.from_pretrained(tmp_path / "theirs").eval()
    assert ours.loading_info == {"newly_initialized": [], "unused": []}
    a, b = ours(**inputs), theirs(**inputs)
    compare_outputs(kind, a, b, inputs)
    if kind is not None:
        a.loss.backward()
        reference_loss(kind, b, inputs).backward()
        hf_grads = {n: p.grad for n, p in theirs.named_parameters()}
        ours_grads = {n: p.grad if p.grad is not None else torch.zeros_like(p) for n, p in ours.named_parameters()}
        checked = 0
        for hf_name_, tensor in internal_to_hf_state_dict(_as_grads(ours, ours_grads)).items():
            theirs_grad = hf_grads.get(hf_name_)
            if theirs_grad is None:
                theirs_grad = hf_grads.get(hf_name_.removeprefix("electra."))
            assert theirs_grad is not None, hf_name_
            assert max_diff(tensor, theirs_grad) <= TOL, hf_name_
            checked += 1
        assert checked == len(hf_grads)

    # ours (fresh random init) saved -> theirs loads with nothing missing or unexpected, same outputs
    torch.manual_seed(1)
    fresh = ours_cls(config).eval()
    fresh.save_pretrained(tmp_path / "ours")
    again, info = hf_cls.from_pretrained(tmp_path / "ours", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    with torch.no_grad():
        compare_outputs(kind, fresh(**inputs), again.eval()(**inputs), inputs)


def _as_grads(model, grads):
    """A copy of `model` whose parameters hold their gradients, so the checkpoint name map can name them."""
    clone = copy.deepcopy(model)
    with torch.no_grad():
        for name, p in clone.named_parameters():
            p.copy_(grads[name])
    return clone


def test_training_step_matches_transformers(tmp_path):
    """Dropout on, same masks are impossible across libraries: so dropout off, and three AdamW steps."""
    config = small_config()
    torch.manual_seed(3)
    theirs = transformers.ElectraForPreTraining(hf_config(config))
    theirs.save_pretrained(tmp_path)
    ours = ElectraForPreTraining.from_pretrained(tmp_path)
    opt_a = torch.optim.AdamW(ours.parameters(), lr=1e-3)
    opt_b = torch.optim.AdamW(theirs.parameters(), lr=1e-3)
    losses_a, losses_b = [], []
    for step in range(3):
        inputs = inputs_for("replaced", config, seed=10 + step)
        for model, opt, losses in ((ours, opt_a, losses_a), (theirs, opt_b, losses_b)):
            model.train()
            loss = model(**inputs).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
    assert max(abs(x - y) for x, y in zip(losses_a, losses_b)) <= TOL
    theirs_state = theirs.state_dict()
    for name, tensor in internal_to_hf_state_dict(ours).items():
        assert max_diff(tensor, theirs_state[name]) <= 1e-5, name


def test_config_reads_and_writes_hf_fields(tmp_path):
    config = small_config(embedding_size=24)
    data = config.to_dict()
    assert data["model_type"] == "electra" and data["embedding_size"] == 24
    assert "bertforge_only" not in data and "summary_first_dropout" not in data
    hf = hf_config(config)
    hf.save_pretrained(tmp_path)
    back = ElectraConfig.from_pretrained(tmp_path)
    assert (back.embedding_size, back.hidden_size, back.summary_type, back.summary_activation) == (24, 48, "first",
                                                                                                  "gelu")
    # a config.json without embedding_size means HF's default, 128
    assert ElectraConfig.from_dict({"hidden_size": 256, "num_attention_heads": 4}).embedding_dim == 128
    with pytest.raises(ConfigError, match="summary_type"):
        small_config(summary_type="mean")
    with pytest.raises(ConfigError, match="summary_proj_to_labels"):
        ElectraConfig.from_dict({"summary_proj_to_labels": True})


def test_presets_auto_classes_and_roles(tmp_path):
    config = preset_config("electra-small", vocab_size=100)
    assert type(config) is ElectraConfig
    assert (config.num_hidden_layers, config.hidden_size, config.embedding_size) == (12, 256, 128)
    assert ElectraConfig.preset("base").embedding_size == 768
    ElectraForPreTraining(small_config()).save_pretrained(tmp_path)
    assert type(AutoConfig.from_pretrained(tmp_path)) is ElectraConfig
    assert type(AutoModel.from_pretrained(tmp_path)) is ElectraModel
    assert type(AutoModelForPreTraining.from_pretrained(tmp_path)) is ElectraForPreTraining
    assert model_class_for(tmp_path, "masked_lm") is ElectraForMaskedLM
    gen = AutoModelForMaskedLM.from_pretrained(tmp_path)
    assert "generator_predictions.dense.weight" in gen.loading_info["newly_initialized"]
    head = AutoModelForSequenceClassification.from_pretrained(tmp_path)
    assert type(head) is ElectraForSequenceClassification
    assert "classifier.out_proj.weight" in head.loading_info["newly_initialized"]
    assert "discriminator_predictions.dense.weight" in head.loading_info["unused"]


def test_discriminator_refuses_mlm_labels():
    config = small_config()
    ids, mask, _ = padded_batch(config.vocab_size)
    labels = torch.full_like(ids, -100)
    labels[0, 2] = 17
    with pytest.raises(ValueError, match="1 \\(replaced\\) or 0 \\(original\\)"):
        ElectraForPreTraining(config)(ids, attention_mask=mask, labels=labels)


def test_unpadded_and_padded_paths_agree():
    """The speed machinery (unpadding, attention groups) gives what the plain padded path gives."""
    config = small_config()
    torch.manual_seed(4)
    model = ElectraForPreTraining(config).eval()
    ids, mask, types = padded_batch(config.vocab_size, seed=5)
    with torch.no_grad():
        a = model(ids, attention_mask=mask, token_type_ids=types, unpad=True).logits
        b = model(ids, attention_mask=mask, token_type_ids=types, unpad=False).logits
    assert max_diff(a, b, mask.bool()) <= TOL

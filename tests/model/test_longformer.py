"""Longformer: the banded sliding-window + global attention against a naive per-query oracle and against dense
attention, and every head against `transformers`' Longformer (random-init small configs saved to tmp_path, padded
batches longer than the window) in both directions."""
from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

import bertforge
from bertforge.config import ConfigError
from bertforge.model.auto import AutoModel, AutoModelForSequenceClassification
from bertforge.model.kernels import Kernels
from bertforge.model.longformer import (LongformerConfig, LongformerForMaskedLM, LongformerForMultipleChoice,
                                        LongformerForQuestionAnswering, LongformerForSequenceClassification,
                                        LongformerForTokenClassification, LongformerModel)
from bertforge.model.packing import PackedBatch
from bertforge.model.sliding_window import banded_attention, sliding_window_attention, sliding_window_pattern

from needs import require_module
from predictor_folders import finetune_mrpc_then_compare

transformers = require_module("transformers")
TOL = 1e-5
VOCAB, BOS, PAD, SEP = 100, 0, 1, 2


def hf_config(**overrides) -> "transformers.LongformerConfig":
    fields = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                  max_position_embeddings=160, attention_window=[8, 16], type_vocab_size=1, num_labels=3)
    fields.update(overrides)
    return transformers.LongformerConfig(**fields)


def ours_config(**overrides) -> LongformerConfig:
    fields = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                  max_position_embeddings=160, attention_window=[8, 16], type_vocab_size=1)
    fields.update(overrides)
    return LongformerConfig(**fields)


def padded_batch(lengths=(130, 77), seed: int = 0, question: int = 6):
    """`<s> question </s></s> context </s>` rows (three separators, as HF's QA default needs), padded with 1."""
    g = torch.Generator().manual_seed(seed)
    L = max(lengths)
    ids = torch.randint(4, VOCAB, (len(lengths), L), generator=g)
    mask = (torch.arange(L)[None] < torch.tensor(lengths)[:, None]).long()
    ids[:, 0] = BOS
    ids[:, question:question + 2] = SEP
    ids[torch.arange(len(lengths)), torch.tensor(lengths) - 1] = SEP
    return torch.where(mask.bool(), ids, torch.full_like(ids, PAD)), mask


def some_globals(mask: torch.Tensor) -> torch.Tensor:
    """[CLS] of every row and a few tokens deep inside, a different number per row."""
    glob = torch.zeros_like(mask)
    glob[:, 0] = 1
    glob[0, [40, 41, 100]] = 1
    glob[1, 60] = 1
    return glob


# ---- the attention pattern itself -----------------------------------------------------------------------------
def naive_window_attention(q, k, v, keys, global_tokens, radius):
    """One query at a time, from the definition: a local query sees real keys within `radius` and every global
    key; the scores are softmaxed over exactly those keys."""
    h, n, L, d = q.shape
    out = torch.zeros_like(q)
    for s in range(n):
        for i in range(L):
            seen = [j for j in range(L) if keys[s, j] and (abs(i - j) <= radius or global_tokens[s, j])]
            if not seen:
                continue
            scores = torch.einsum("hd,hjd->hj", q[:, s, i], k[:, s, seen]) / math.sqrt(d)
            out[:, s, i] = torch.einsum("hj,hjd->hd", torch.softmax(scores, dim=-1), v[:, s, seen])
    return out


def random_grid(n=3, L=37, h=2, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(h, n, L, d, generator=g, dtype=torch.float64) for _ in range(3))
    lengths = torch.tensor([L, L - 11, 5])[:n]
    keys = torch.arange(L)[None] < lengths[:, None]
    glob = torch.zeros(n, L, dtype=torch.bool)
    glob[0, [0, 20]] = True
    glob[1, 3] = True
    return q, k, v, keys, glob


def gathered_globals(t, glob):
    most = int(glob.sum(1).max())
    positions = torch.stack([torch.cat([row.nonzero().squeeze(1), torch.zeros(most - int(row.sum()), dtype=torch.long)])
                             for row in glob])
    valid = torch.arange(most)[None] < glob.sum(1, keepdim=True)
    return t[:, torch.arange(t.shape[1])[:, None], positions], valid


@pytest.mark.parametrize("radius", [1, 3, 4, 8, 40])
def test_banded_attention_matches_the_definition(radius):
    q, k, v, keys, glob = random_grid()
    gk, valid = gathered_globals(k, glob)
    gv, _ = gathered_globals(v, glob)
    got = banded_attention(q, k, v, keys & ~glob, gk, gv, valid, radius)
    want = naive_window_attention(q, k, v, keys, glob, radius)
    real = keys[None, :, :, None].expand_as(q)
    assert (got - want)[real].abs().max().item() <= 1e-10
    assert torch.isfinite(got).all(), "rows nobody reads stay finite"


def test_window_covering_the_input_is_full_attention():
    q, k, v, keys, _ = random_grid()
    got = banded_attention(q, k, v, keys, None, None, None, radius=q.shape[2])
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=keys[None, :, None, :])
    real = keys[None, :, :, None].expand_as(q)
    assert (got - want)[real].abs().max().item() <= 1e-10


class _Attention(torch.nn.Module):
    """What `sliding_window_attention` reads from a layer's attention: heads, dropout, kernels, global projections."""

    def __init__(self, hidden=16, heads=2):
        super().__init__()
        self.num_heads, self.head_dim, self.dropout_p = heads, hidden // heads, 0.0
        self.kernels = Kernels()
        self.query_global = torch.nn.Linear(hidden, hidden)
        self.kv_global = torch.nn.Linear(hidden, 2 * hidden)


def test_banded_path_equals_the_dense_reference_path_with_global_tokens():
    torch.manual_seed(0)
    B, L, hidden, heads = 2, 45, 16, 2
    mask = (torch.arange(L)[None] < torch.tensor([[L], [30]])).long()
    glob = torch.zeros(B, L, dtype=torch.bool)
    glob[:, 0], glob[0, 33], glob[1, 7] = True, True, True
    batch = PackedBatch.from_mask(mask, B, L, torch.device("cpu"), unpad=False)
    batch.global_tokens = batch.pack(glob)
    batch.window = sliding_window_pattern(batch, radius=4)
    x = torch.randn(B * L, hidden)
    qkv = [tuple(torch.randn(3, heads, B, L, hidden // heads).unbind(0))]
    attention, outs = _Attention(), []
    for banded in (True, False):
        attention.kernels = Kernels(banded_attention=banded)
        outs.append(sliding_window_attention(attention, qkv, x, batch))
    real = mask.bool()[None, :, :, None].expand_as(outs[0][0])
    assert (outs[0][0] - outs[1][0])[real].abs().max().item() <= TOL
    assert outs[0][1].shape == (4, hidden) and (outs[0][1] - outs[1][1]).abs().max().item() <= TOL


def test_an_input_within_three_radii_is_scored_dense_with_the_banded_result():
    """Radius 16, 40 positions: the chunked path would pad the queries to 48 and score 48 keys each; the grid takes
    the dense [40, 40] scores instead (`dense_short_windows`), and its outputs are the chunked path's."""
    torch.manual_seed(0)
    B, L, heads, d, radius = 2, 40, 2, 8, 16
    mask = (torch.arange(L)[None] < torch.tensor([[L], [29]])).long()
    glob = torch.zeros(B, L, dtype=torch.bool)
    glob[:, 0], glob[0, 20] = True, True
    batch = PackedBatch.from_mask(mask, B, L, torch.device("cpu"), unpad=False)
    batch.global_tokens = batch.pack(glob)
    batch.window = sliding_window_pattern(batch, radius=radius)
    x = torch.randn(B * L, heads * d)
    qkv = [tuple(torch.randn(3, heads, B, L, d).unbind(0))]
    attention, outs, largest = _Attention(), [], []
    for dense in (True, False):
        attention.kernels = Kernels(dense_short_windows=dense)
        with LargestTensor() as probe:
            outs.append(sliding_window_attention(attention, qkv, x, batch))
        largest.append(probe.largest)
    real = mask.bool()[None, :, :, None].expand_as(outs[0][0])
    assert (outs[0][0] - outs[1][0])[real].abs().max().item() <= TOL
    assert (outs[0][1] - outs[1][1]).abs().max().item() <= TOL  # the global tokens' own outputs
    assert largest[0] < largest[1]  # the [heads, B, 40, 40] scores, not [heads, B, 3, 16, 48 + globals]


class LargestTensor(TorchDispatchMode):
    """The most elements of any tensor an op produces while the mode is on."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


def largest_tensor(model, L: int) -> int:
    ids = torch.randint(4, VOCAB, (1, L))
    glob = torch.zeros_like(ids)
    glob[0, [0, L // 2]] = 1
    with torch.no_grad(), LargestTensor() as probe:
        model(ids, attention_mask=torch.ones_like(ids), global_attention_mask=glob)
    return probe.largest


def test_banded_path_never_builds_a_length_by_length_tensor():
    """Memory grows linearly: the largest tensor of a whole forward doubles with the length and stays far below
    L x L, while the dense reference path (the probe's control) builds [heads, L, L]."""
    config = LongformerConfig(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                              intermediate_size=32, max_position_embeddings=4200, attention_window=32)
    model = LongformerModel(config).eval()
    short, long = largest_tensor(model, 2048), largest_tensor(model, 4096)
    assert long < 4096 * 4096 / 16
    assert long <= 2.1 * short
    model.set_kernels(Kernels.reference())
    assert largest_tensor(model, 2048) >= 2048 * 2048


def test_a_token_sees_its_window_and_the_global_tokens_only():
    """One layer, window 8 (4 either side): token 60's output ignores a change at token 5, unless token 5 is
    global; and a global token's output depends on a change anywhere."""
    torch.manual_seed(0)
    config = LongformerConfig(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                              intermediate_size=32, max_position_embeddings=100, attention_window=8)
    model = LongformerModel(config).eval()
    ids, _ = padded_batch(lengths=(80,))
    other = ids.clone()
    other[0, 5] = (ids[0, 5] + 1 - 4) % (VOCAB - 4) + 4
    glob = torch.zeros_like(ids)
    with torch.no_grad():
        def hidden(tokens, g):
            return model(tokens, global_attention_mask=g).last_hidden_state[0]
        assert torch.equal(hidden(ids, glob)[60], hidden(other, glob)[60])
        assert not torch.equal(hidden(ids, glob)[8], hidden(other, glob)[8])  # within the window
        glob[0, 5] = 1
        assert (hidden(ids, glob)[60] - hidden(other, glob)[60]).abs().max() > 1e-4
        glob[0, 5], glob[0, 70] = 0, 1
        assert (hidden(ids, glob)[70] - hidden(other, glob)[70]).abs().max() > 1e-4


def test_window_covering_the_input_without_globals_is_roberta(tmp_path):
    """With a window wider than twice the input and no global token, Longformer is RoBERTa: transformers'
    RobertaModel with the same weights (the global projections unused) gives the same states."""
    torch.manual_seed(0)
    theirs = transformers.LongformerModel(hf_config(attention_window=[512, 512])).eval()
    theirs.save_pretrained(tmp_path)
    ours = LongformerModel.from_pretrained(tmp_path).eval()
    roberta = transformers.RobertaModel(transformers.RobertaConfig(**{
        k: getattr(theirs.config, k) for k in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                                               "intermediate_size", "max_position_embeddings", "type_vocab_size")},
        pad_token_id=PAD, layer_norm_eps=theirs.config.layer_norm_eps)).eval()
    state = {k: v for k, v in theirs.state_dict().items() if "_global" not in k}
    missing, unexpected = roberta.load_state_dict(state, strict=False)
    assert not unexpected and all("position_ids" in m for m in missing)
    ids, mask = padded_batch()
    with torch.no_grad():
        a = ours(ids, attention_mask=mask).last_hidden_state
        b = roberta(input_ids=ids, attention_mask=mask).last_hidden_state
    assert (a - b)[mask.bool()].abs().max().item() <= TOL


# ---- parity with transformers, every head, both ways ------------------------------------------------------------
HEADS = [
    ("LongformerModel", LongformerModel, ("last_hidden_state", "pooler_output")),
    ("LongformerForMaskedLM", LongformerForMaskedLM, ("logits",)),
    ("LongformerForSequenceClassification", LongformerForSequenceClassification, ("logits",)),
    ("LongformerForTokenClassification", LongformerForTokenClassification, ("logits",)),
    ("LongformerForQuestionAnswering", LongformerForQuestionAnswering, ("start_logits", "end_logits")),
    ("LongformerForMultipleChoice", LongformerForMultipleChoice, ("logits",)),
]


def inputs_for(name: str, explicit_globals: bool) -> dict[str, torch.Tensor]:
    ids, mask = padded_batch()
    glob = some_globals(mask)
    if name == "LongformerForMultipleChoice":  # two choices per example: [batch, choices, seq]
        other, other_mask = padded_batch(seed=1, lengths=(101, 130))
        ids, mask, glob = (torch.stack([a, b], dim=1) for a, b in
                           ((ids, other), (mask, other_mask), (glob, some_globals(other_mask))))
    out = {"input_ids": ids, "attention_mask": mask}
    if explicit_globals:
        out["global_attention_mask"] = glob
    return out


def compare(ours_out, theirs_out, fields, mask) -> float:
    worst = 0.0
    for field in fields:
        a, b = getattr(ours_out, field), getattr(theirs_out, field)
        if a.dim() >= 2 and a.shape[:2] == mask.shape:  # per-token outputs: real tokens only
            a, b = a[mask.bool()], b[mask.bool()]
        worst = max(worst, (a - b).abs().max().item())
    return worst


@pytest.mark.parametrize("name, cls, fields", HEADS, ids=[h[0] for h in HEADS])
@pytest.mark.parametrize("explicit_globals", [True, False], ids=["given-globals", "default-globals"])
def test_head_matches_transformers_both_ways(tmp_path, name, cls, fields, explicit_globals):
    torch.manual_seed(0)
    labels = 2 if name == "LongformerForQuestionAnswering" else 3  # HF's span head has num_labels outputs
    theirs = getattr(transformers, name)(hf_config(num_labels=labels)).eval()
    theirs.save_pretrained(tmp_path / "theirs")
    ours = cls.from_pretrained(tmp_path / "theirs").eval()
    assert ours.loading_info == {"newly_initialized": [], "unused": []}

    inputs = inputs_for(name, explicit_globals)
    mask = inputs["attention_mask"]
    with torch.no_grad():
        a, b = ours(**inputs), theirs(**inputs)
        assert compare(a, b, fields, mask) <= TOL
        ours.set_kernels(Kernels.reference())  # the dense path, padded, gives the same
        assert compare(ours(**inputs), b, fields, mask) <= TOL
        ours.set_kernels(Kernels.fast())

    ours.save_pretrained(tmp_path / "ours")
    again, info = getattr(transformers, name).from_pretrained(tmp_path / "ours", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    with torch.no_grad():
        assert compare(a, again.eval()(**inputs), fields, mask) <= TOL


def test_hidden_states_and_loss_match_transformers(tmp_path):
    torch.manual_seed(0)
    theirs = transformers.LongformerForMaskedLM(hf_config()).eval()
    theirs.save_pretrained(tmp_path)
    ours = LongformerForMaskedLM.from_pretrained(tmp_path).eval()
    inputs = inputs_for("LongformerForMaskedLM", explicit_globals=True)
    labels = torch.full_like(inputs["input_ids"], -100)
    labels[0, [3, 90, 120]], labels[1, 50] = 7, 9
    with torch.no_grad():
        a = ours(**inputs, labels=labels, output_hidden_states=True)
        b = theirs(**inputs, labels=labels, output_hidden_states=True)
        full = ours(**inputs, output_hidden_states=True)
    real = inputs["attention_mask"].bool()
    assert abs(a.loss.item() - b.loss.item()) <= TOL
    assert (a.logits - b.logits[labels != -100]).abs().max().item() <= TOL
    for x, y in zip(full.hidden_states, b.hidden_states, strict=True):
        assert (x - y[:, :x.shape[1]])[real].abs().max().item() <= TOL


def test_gradients_of_the_banded_path_match_the_dense_path():
    torch.manual_seed(0)
    model = LongformerForSequenceClassification(ours_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                                            id2label={0: "a", 1: "b", 2: "c"})).train()
    inputs = inputs_for("LongformerForSequenceClassification", explicit_globals=True)
    grads = []
    for kernels in (Kernels.fast(), Kernels.reference()):
        model.set_kernels(kernels)
        model.zero_grad()
        model(**inputs, labels=torch.tensor([0, 2])).loss.backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys() and any("global" in n for n in grads[0])
    for n in grads[0]:
        assert (grads[0][n] - grads[1][n]).abs().max().item() <= 1e-5, n


# ---- config and registration --------------------------------------------------------------------------------------
def test_config_round_trip_and_bad_windows(tmp_path):
    config = LongformerConfig(num_hidden_layers=2, attention_window=[8, 16])
    assert config.sliding_windows == [8, 16]
    config.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["attention_window"] == [8, 16]
    assert LongformerConfig.from_pretrained(tmp_path).sliding_windows == [8, 16]
    assert transformers.LongformerConfig.from_pretrained(tmp_path).attention_window == [8, 16]
    for bad, says in ((7, "even"), ([8], "2 layers"), ([8, 0], "even"), (True, "even")):
        with pytest.raises(ConfigError, match=f"attention_window.*{says}|{says}.*attention_window"):
            LongformerConfig(num_hidden_layers=2, attention_window=bad)


def test_exported_and_registered():
    for name in ("LongformerConfig", "LongformerModel", "LongformerForMaskedLM", "LongformerForSequenceClassification",
                 "LongformerForTokenClassification", "LongformerForQuestionAnswering", "LongformerForMultipleChoice"):
        assert name in bertforge.__all__ and getattr(bertforge, name).__name__ == name
    assert type(AutoModelForSequenceClassification.from_config(ours_config())) is LongformerForSequenceClassification


def test_auto_classes_read_a_transformers_folder(tmp_path):
    transformers.LongformerForMaskedLM(hf_config()).save_pretrained(tmp_path)
    assert type(AutoModel.from_pretrained(tmp_path)) is LongformerModel
    assert type(AutoModelForSequenceClassification.from_pretrained(tmp_path)) is LongformerForSequenceClassification


def test_question_answering_default_needs_a_separator():
    model = LongformerForQuestionAnswering(ours_config()).eval()
    ids = torch.randint(4, VOCAB, (1, 20))
    with pytest.raises(ValueError, match="no separator.*global_attention_mask"):
        model(ids)


# ---- the pipeline -------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_finetune_a_longformer_folder_then_load_in_transformers(vocab_dir, shared_data, tmp_path):
    """`bertforge finetune` takes a Longformer folder like any other (MRPC pairs are longer than the window of 16)
    and its predictor loads in transformers with the same logits."""
    from bertforge.tokenization import BertTokenizer
    tokenizer = BertTokenizer.from_pretrained(vocab_dir)
    folder = tmp_path / "longformer"
    torch.manual_seed(0)
    config = LongformerConfig.preset("tiny", vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.pad_token_id,
                                     attention_window=16, max_position_embeddings=600, hidden_dropout_prob=0.0)
    LongformerForMaskedLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    finetune_mrpc_then_compare(folder, tmp_path / "mrpc", shared_data, transformers.LongformerForSequenceClassification)


@pytest.mark.filterwarnings("ignore:`torch.jit.trace` is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning")  # what the refusal is about
def test_a_trace_is_refused_not_frozen():
    """A trace would freeze the batch's chunk and global-token plan (an ONNX export that is wrong for any other
    batch): it is refused, saying why."""
    model = LongformerForSequenceClassification(ours_config()).eval()
    ids, mask = padded_batch()
    with pytest.raises(ValueError, match="no ONNX export"):
        torch.jit.trace(model, (ids, mask), strict=False)

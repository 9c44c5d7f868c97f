"""BigBird: the block-sparse attention against a naive per-block oracle and against its dense mask, and every head
against `transformers`' BigBird (random-init small configs saved to tmp_path, padded batches longer than the
block layout) in both directions."""
from __future__ import annotations

import math

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import bertforge
from bertforge.config import ConfigError
from bertforge.model.auto import AutoModel
from bertforge.model.big_bird import (BigBirdConfig, BigBirdForMaskedLM, BigBirdForMultipleChoice,
                                      BigBirdForQuestionAnswering, BigBirdForSequenceClassification,
                                      BigBirdForTokenClassification, BigBirdModel)
from bertforge.model.block_sparse import block_pattern, block_sparse_attention, dense_block_attention
from bertforge.model.kernels import Kernels
from bertforge.model.packing import PackedBatch

from needs import require_module
from predictor_folders import finetune_mrpc_then_compare

transformers = require_module("transformers")
TOL = 1e-5
VOCAB, BLOCK, RANDOM, SEP = 100, 8, 2, 66  # 66: HF BigBird's sep_token_id
QUESTION = 10  # the question's length (its separator included) in the question-answering batches


def hf_config(**overrides) -> "transformers.BigBirdConfig":
    fields = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                  max_position_embeddings=300, block_size=BLOCK, num_random_blocks=RANDOM, num_labels=3)
    fields.update(overrides)
    return transformers.BigBirdConfig(**fields)


def padded_batch(lengths=(130, 97), seed: int = 0):
    """Rows of different lengths padded with 0; 130 is not a whole number of blocks (transformers pads it)."""
    g = torch.Generator().manual_seed(seed)
    L = max(lengths)
    ids = torch.randint(4, VOCAB, (len(lengths), L), generator=g)
    mask = (torch.arange(L)[None] < torch.tensor(lengths)[:, None]).long()
    return ids * mask, mask


# ---- the attention pattern itself ---------------------------------------------------------------------------------
def naive_block_attention(q, k, v, keys, table, block):
    """From the definition, one query block at a time: the first and last query blocks see every key; query block
    i sees the key blocks listed for it (first, i-1, i, i+1, last, then the random ones, a repeated block counting
    once per listing) without the window's repeats of a global block."""
    h, B, L, d = q.shape
    nb = L // block
    out = torch.zeros_like(q)
    for head in range(h):
        for s in range(B):
            for i in range(nb):
                if i in (0, nb - 1):
                    listed = list(range(nb))
                else:
                    listed = [0, nb - 1] + sorted({i - 1, i, i + 1} - {0, nb - 1}) + table[head, i - 1, 5:].tolist()
                cols = torch.cat([torch.arange(j * block, (j + 1) * block) for j in listed])
                cols = cols[keys[s, cols]]
                rows = slice(i * block, (i + 1) * block)
                scores = q[head, s, rows] @ k[head, s, cols].T / math.sqrt(d)
                out[head, s, rows] = torch.softmax(scores, dim=-1) @ v[head, s, cols]
    return out


def pattern_for(mask: torch.Tensor, training: bool, heads: int = 2):
    B, L = mask.shape
    batch = PackedBatch.from_mask(mask, B, L, torch.device("cpu"))
    return block_pattern(batch, BLOCK, RANDOM, heads, training)


@pytest.mark.parametrize("training", [False, True], ids=["eval-random-blocks", "drawn-random-blocks"])
def test_block_sparse_attention_matches_the_definition(training):
    torch.manual_seed(0)
    mask = (torch.arange(104)[None] < torch.tensor([[104], [77]])).long()
    pattern = pattern_for(mask, training)
    assert not pattern.full and pattern.length == 104
    q, k, v = (torch.randn(2, 2, 104, 8, dtype=torch.float64) for _ in range(3))
    want = naive_block_attention(q, k, v, pattern.keys, pattern.table, BLOCK)
    real = pattern.keys[None, :, :, None].expand_as(q)
    got = block_sparse_attention(q, k, v, pattern)
    assert (got - want)[real].abs().max().item() <= 1e-10
    dense = dense_block_attention(q, k, v, pattern)
    assert (dense - want)[real].abs().max().item() <= 1e-10


def test_random_blocks_when_training_are_distinct_and_outside_window_and_globals():
    torch.manual_seed(0)
    mask = torch.ones(1, 200, dtype=torch.long)
    pattern = pattern_for(mask, training=True, heads=3)
    nb = 200 // BLOCK
    drawn = pattern.table[..., 5:]
    rows = torch.arange(1, nb - 1)[None, :, None]
    assert ((drawn - rows).abs() > 1).all() and (drawn > 0).all() and (drawn < nb - 1).all()
    assert all(len(set(r.tolist())) == RANDOM for r in drawn.reshape(-1, RANDOM))
    assert not torch.equal(drawn[0], drawn[1]), "one draw per head"
    assert (pattern_for(mask, training=False).table[..., 5:] == 0).all(), "eval: transformers' block 0"


class LargestTensor(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


def test_block_sparse_path_never_builds_a_length_by_length_tensor():
    config = BigBirdConfig(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                           intermediate_size=32, max_position_embeddings=4096, block_size=32, num_random_blocks=2)
    model = BigBirdModel(config).eval()

    def largest(L):
        ids = torch.randint(4, VOCAB, (1, L))
        with torch.no_grad(), LargestTensor() as probe:
            model(ids, attention_mask=torch.ones_like(ids))
        return probe.largest
    short, long = largest(2048), largest(4096)
    assert long < 4096 * 4096 / 4 and long <= 2.1 * short  # [heads, blocks, block, (5 + r) block]: linear
    model.set_kernels(Kernels.reference())
    assert largest(2048) >= 2048 * 2048


# ---- parity with transformers, every head, both ways ------------------------------------------------------------
HEADS = [
    ("BigBirdModel", BigBirdModel, ("last_hidden_state", "pooler_output")),
    ("BigBirdForMaskedLM", BigBirdForMaskedLM, ("logits",)),
    ("BigBirdForSequenceClassification", BigBirdForSequenceClassification, ("logits",)),
    ("BigBirdForTokenClassification", BigBirdForTokenClassification, ("logits",)),
    ("BigBirdForMultipleChoice", BigBirdForMultipleChoice, ("logits",)),
    ("BigBirdForQuestionAnswering", BigBirdForQuestionAnswering, ("start_logits", "end_logits")),
]


def inputs_for(name: str, lengths) -> dict[str, torch.Tensor]:
    ids, mask = padded_batch(lengths)
    if name == "BigBirdForMultipleChoice":
        other, other_mask = padded_batch(tuple(reversed(lengths)), seed=1)
        ids, mask = torch.stack([ids, other], dim=1), torch.stack([mask, other_mask], dim=1)
    if name == "BigBirdForQuestionAnswering":  # a question of QUESTION tokens, up to its separator
        ids[ids == SEP] = SEP + 1
        ids[:, QUESTION - 1] = SEP
    return {"input_ids": ids, "attention_mask": mask}


def compare(ours_out, theirs_out, fields, mask) -> float:
    """The largest difference on real tokens. The span logits of question tokens (but the first) are near -1e6,
    where float32 steps by 1/16: there they are compared to that step, elsewhere to the last digit."""
    worst = 0.0
    for field in fields:
        a, b = getattr(ours_out, field), getattr(theirs_out, field)
        if a.dim() >= 2 and a.shape[:2] == mask.shape:
            a, b = a[mask.bool()], b[mask.bool()]
        masked = b < -1e5
        if masked.any():
            assert (a[masked] - b[masked]).abs().max().item() <= 1 / 16 and (a[masked] < -1e5).all()
            a, b = a[~masked], b[~masked]
        worst = max(worst, (a - b).abs().max().item())
    return worst


@pytest.mark.parametrize("name, cls, fields", HEADS, ids=[h[0] for h in HEADS])
@pytest.mark.parametrize("lengths", [(130, 97), (60, 33)], ids=["block-sparse", "short-so-full"])
def test_head_matches_transformers_both_ways(tmp_path, name, cls, fields, lengths):
    """130 tokens: 17 blocks of 8, block-sparse in transformers too; 60 tokens: at most (5 + 2 r) blocks, which
    transformers attends in full (it switches the model's attention type; a fresh model is loaded each time)."""
    torch.manual_seed(0)
    labels = 2 if name == "BigBirdForQuestionAnswering" else 3
    getattr(transformers, name)(hf_config(num_labels=labels)).save_pretrained(tmp_path / "theirs")
    theirs = getattr(transformers, name).from_pretrained(tmp_path / "theirs").eval()
    ours = cls.from_pretrained(tmp_path / "theirs").eval()
    assert ours.loading_info == {"newly_initialized": [], "unused": []}
    inputs = inputs_for(name, lengths)
    mask = inputs["attention_mask"]
    with torch.no_grad():
        a, b = ours(**inputs), theirs(**inputs)
        assert compare(a, b, fields, mask) <= TOL
        ours.set_kernels(Kernels.reference())
        assert compare(ours(**inputs), b, fields, mask) <= TOL
        ours.set_kernels(Kernels.fast())

    ours.save_pretrained(tmp_path / "ours")
    again, info = getattr(transformers, name).from_pretrained(tmp_path / "ours", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    with torch.no_grad():
        assert compare(a, again.eval()(**inputs), fields, mask) <= TOL


def test_hidden_states_and_loss_match_transformers(tmp_path):
    torch.manual_seed(0)
    transformers.BigBirdForMaskedLM(hf_config()).save_pretrained(tmp_path)
    theirs = transformers.BigBirdForMaskedLM.from_pretrained(tmp_path).eval()
    ours = BigBirdForMaskedLM.from_pretrained(tmp_path).eval()
    inputs = inputs_for("BigBirdForMaskedLM", (130, 97))
    labels = torch.full_like(inputs["input_ids"], -100)
    labels[0, [3, 90, 129]], labels[1, 50] = 7, 9
    with torch.no_grad():
        a = ours(**inputs, labels=labels)
        b = theirs(**inputs, labels=labels, output_hidden_states=True)
        full = ours(**inputs, output_hidden_states=True)
    real = inputs["attention_mask"].bool()
    assert abs(a.loss.item() - b.loss.item()) <= TOL
    for x, y in zip(full.hidden_states, b.hidden_states, strict=True):
        assert (x - y[:, :x.shape[1]])[real].abs().max().item() <= TOL


def test_gradients_of_the_block_path_match_the_dense_path():
    torch.manual_seed(0)
    config = BigBirdConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=64, max_position_embeddings=300, block_size=BLOCK,
                           num_random_blocks=RANDOM, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = BigBirdForSequenceClassification(config).train()
    inputs = inputs_for("BigBirdForSequenceClassification", (130, 97))
    grads = []
    for kernels in (Kernels.fast(), Kernels.reference()):
        model.set_kernels(kernels)
        model.zero_grad()
        torch.manual_seed(1)  # the same random blocks for both
        model(**inputs, labels=torch.tensor([0, 1])).loss.backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    for n in grads[0]:
        assert (grads[0][n] - grads[1][n]).abs().max().item() <= 1e-5, n


# ---- config and registration --------------------------------------------------------------------------------------
def test_config_refuses_what_it_cannot_do(tmp_path):
    for field, value, says in (("attention_type", "sparse", "attention_type"), ("block_size", 0, "block_size"),
                               ("rescale_embeddings", True, "rescale_embeddings"), ("use_bias", False, "use_bias")):
        with pytest.raises(ConfigError, match=says):
            BigBirdConfig(**{field: value})
    config = BigBirdConfig(num_hidden_layers=2, attention_type="original_full", block_size=16)
    assert config.block_sparse is None and BigBirdConfig(block_size=16).block_sparse == (16, 3)
    config.save_pretrained(tmp_path)
    assert transformers.BigBirdConfig.from_pretrained(tmp_path).attention_type == "original_full"


def test_exported_and_registered(tmp_path):
    for name in ("BigBirdConfig", "BigBirdModel", "BigBirdForMaskedLM", "BigBirdForSequenceClassification",
                 "BigBirdForTokenClassification", "BigBirdForQuestionAnswering", "BigBirdForMultipleChoice"):
        assert name in bertforge.__all__ and getattr(bertforge, name).__name__ == name
    transformers.BigBirdForMaskedLM(hf_config()).save_pretrained(tmp_path)
    assert type(AutoModel.from_pretrained(tmp_path)) is BigBirdModel


def test_question_answering_loss_and_given_question_lengths_match_transformers(tmp_path):
    """Rows of one length: bertforge's span heads keep padding out of the softmax (transformers' do not)."""
    torch.manual_seed(0)
    transformers.BigBirdForQuestionAnswering(hf_config(num_labels=2)).save_pretrained(tmp_path)
    theirs = transformers.BigBirdForQuestionAnswering.from_pretrained(tmp_path).eval()
    ours = BigBirdForQuestionAnswering.from_pretrained(tmp_path).eval()
    inputs = inputs_for("BigBirdForQuestionAnswering", (130, 130))
    spans = dict(start_positions=torch.tensor([20, 50]), end_positions=torch.tensor([25, 200]))  # 200: ignored
    lengths = torch.tensor([[4], [12]])
    with torch.no_grad():
        a = ours(**inputs, **spans, question_lengths=lengths)
        b = theirs(**inputs, **spans, question_lengths=lengths)
    assert abs(a.loss.item() - b.loss.item()) <= TOL
    assert compare(a, b, ("start_logits", "end_logits"), inputs["attention_mask"]) <= TOL


@pytest.mark.slow
def test_finetune_a_big_bird_folder_then_load_in_transformers(vocab_dir, shared_data, tmp_path):
    """`bertforge finetune` takes a BigBird folder like any other (MRPC pairs span many blocks of 4) and its
    predictor loads in transformers with the same logits, on an input long enough to be block-sparse there too."""
    from bertforge.tokenization import BertTokenizer
    tokenizer = BertTokenizer.from_pretrained(vocab_dir)
    folder = tmp_path / "big_bird"
    torch.manual_seed(0)
    config = BigBirdConfig.preset("tiny", vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.pad_token_id,
                                  block_size=4, num_random_blocks=1, max_position_embeddings=512)
    BigBirdForMaskedLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    finetune_mrpc_then_compare(folder, tmp_path / "mrpc", shared_data, transformers.BigBirdForSequenceClassification)


@pytest.mark.filterwarnings("ignore:`torch.jit.trace` is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning")  # what the refusal is about
def test_a_trace_is_refused_not_frozen():
    """A trace would freeze the block layout of the example's length (an ONNX export wrong for other lengths)."""
    model = BigBirdForSequenceClassification(BigBirdConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1,
                                                           num_attention_heads=4, intermediate_size=64,
                                                           block_size=BLOCK, num_random_blocks=RANDOM)).eval()
    ids, mask = padded_batch()
    with pytest.raises(ValueError, match="no ONNX export"):
        torch.jit.trace(model, (ids, mask), strict=False)


def test_a_batch_too_short_for_the_blocks_attends_in_full_and_says_so(caplog, monkeypatch):
    """At most (5 + 2 r) blocks, the layout would cover nearly everything: the batch attends in full as
    transformers does (the same outputs as the reference kernels' dense full mask), and one warning line says
    so, once."""
    from bertforge.model import block_sparse
    monkeypatch.setattr(block_sparse, "_SAID", set())
    config = BigBirdConfig(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                           intermediate_size=32, max_position_embeddings=256, block_size=BLOCK,
                           num_random_blocks=RANDOM)
    model = BigBirdModel(config).eval()
    ids, mask = padded_batch((70, 41))
    limit = (5 + 2 * RANDOM) * BLOCK
    assert ids.shape[1] <= limit
    with caplog.at_level("WARNING", logger="bertforge.model.block_sparse"), torch.no_grad():
        full = model(ids, attention_mask=mask).last_hidden_state
        model(ids, attention_mask=mask)
    said = [r.getMessage() for r in caplog.records if r.name == "bertforge.model.block_sparse"]
    assert said == [f"BigBird: a batch of 70 tokens is at most {limit} (5 + 2 x {RANDOM} random blocks of {BLOCK}): "
                    f"it attends in full, as transformers does; block-sparse attention starts above {limit} tokens"]
    plain = BigBirdModel(config.replace(attention_type="original_full"))
    plain.load_state_dict(model.state_dict())
    with torch.no_grad():
        want = plain.eval()(ids, attention_mask=mask).last_hidden_state
    real = mask.bool()
    torch.testing.assert_close(full[real], want[real], atol=1e-5, rtol=0)

"""T5's relative position bias as an encoder option: T5's buckets and attention, every kernel path, and a model
that learns a task only relative positions can solve."""
from __future__ import annotations

import math

import pytest
import torch

from bertforge import BertConfig, BertForMaskedLM, BertModel
from bertforge.config import ConfigError
from bertforge.model.kernels import Kernels
from bertforge.model.relative_bias import relative_position_bucket


def config(**overrides) -> BertConfig:
    fields = dict(vocab_size=40, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                  max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                  relative_attention_num_buckets=8, relative_attention_max_distance=12)
    return BertConfig(**(fields | overrides))


def mixed_batch(seq: int = 20) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(1)
    lengths = torch.tensor([seq, 3, 9, seq - 2, 14, 2])
    mask = (torch.arange(seq)[None] < lengths[:, None]).long()
    return torch.randint(5, 40, (len(lengths), seq)) * mask, mask


@pytest.mark.parametrize("buckets,distance", [(32, 128), (8, 12), (4, 2), (64, 300)])
def test_buckets_are_t5s(buckets, distance):
    from transformers.models.t5.modeling_t5 import T5Attention
    offsets = torch.arange(-700, 700)
    ours = relative_position_bucket(offsets, buckets, distance)
    theirs = T5Attention._relative_position_bucket(offsets, bidirectional=True, num_buckets=buckets,
                                                    max_distance=distance)
    assert torch.equal(ours, theirs)


def test_attention_is_t5_attention():
    """Layer 0's attention over a padded batch equals transformers' `T5Attention` with the same weights (T5 does
    not scale the scores by 1/sqrt(d): its query weights take the factor)."""
    from transformers import T5Config
    from transformers.models.t5.modeling_t5 import T5Attention
    torch.manual_seed(0)
    cfg = config(attention_bias=False)
    model = BertModel(cfg).eval().set_kernels(Kernels.reference())
    torch.nn.init.normal_(model.encoder.relative_attention_bias.weight, std=1.0)  # a bias that matters
    seen = {}
    attention = model.encoder.layers[0].attention
    attention.register_forward_hook(lambda m, args, out: seen.update(x=args[0], y=out))
    ids, mask = mixed_batch()
    model(ids, attention_mask=mask)

    t5 = T5Attention(T5Config(d_model=32, d_kv=16, num_heads=2, relative_attention_num_buckets=8,
                              relative_attention_max_distance=12, dropout_rate=0.0), has_relative_attention_bias=True)
    H = cfg.hidden_size
    with torch.no_grad():
        q, k, v = attention.qkv.weight.split(H)
        t5.q.weight.copy_(q / math.sqrt(cfg.head_dim))
        t5.k.weight.copy_(k)
        t5.v.weight.copy_(v)
        t5.o.weight.copy_(attention.out.weight)
        t5.relative_attention_bias.weight.copy_(model.encoder.relative_attention_bias.weight)
    B, L = ids.shape
    additive = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
    expected = t5.eval()(seen["x"].view(B, L, H), mask=additive)[0]
    real = mask.bool()
    torch.testing.assert_close(seen["y"].view(B, L, H)[real], expected[real], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("local", [False, True])
def test_packed_grouped_and_explicit_paths_equal_the_padded_reference(local):
    """Unpadding with several attention groups, local layers, and the explicit attention kernel (bf16 training
    takes it) give the padded reference's outputs and gradients, the bias table's included."""
    cfg = config(**(dict(local_attention=6, global_attn_every_n_layers=2) if local else {}))
    torch.manual_seed(0)
    model = BertForMaskedLM(cfg)
    ids, mask = mixed_batch()
    labels = torch.where((torch.rand(ids.shape) < 0.3) & mask.bool(), ids, torch.full_like(ids, -100))
    labels[0, 0] = ids[0, 0]

    def run(kernels, explicit=False):
        model.set_kernels(kernels).zero_grad()
        if explicit:  # the explicit kernel, in fp32, by the switch bf16 training uses
            from bertforge.model import attention as attention_module
            original = attention_module.SelfAttention._explicit
            attention_module.SelfAttention._explicit = lambda self, qkv: True
        try:
            out = model(ids, attention_mask=mask, labels=labels)
        finally:
            if explicit:
                attention_module.SelfAttention._explicit = original
        out.loss.backward()
        return out.loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    ref_loss, ref_grads = run(Kernels.reference())
    assert ref_grads["bert.encoder.relative_attention_bias.weight"].abs().sum() > 0
    for kernels, explicit in ((Kernels(), False), (Kernels(), True)):
        loss, grads = run(kernels, explicit)
        torch.testing.assert_close(loss, ref_loss, atol=1e-5, rtol=1e-5)
        assert grads.keys() == ref_grads.keys()
        for name, grad in grads.items():
            torch.testing.assert_close(grad, ref_grads[name], atol=1e-5, rtol=1e-4, msg=name)


def test_learns_a_task_only_relative_positions_solve():
    """Predict the token two places left of [MASK]: without position information a model cannot tell which
    token that is. With the bias it learns; the same model with the bias frozen at zero stays near chance."""
    def train(frozen: bool) -> float:
        torch.manual_seed(0)
        cfg = config(vocab_size=20, hidden_size=64, num_attention_heads=4, intermediate_size=128,
                     relative_attention_num_buckets=16, relative_attention_max_distance=16)
        model = BertForMaskedLM(cfg)
        table = model.bert.encoder.relative_attention_bias.weight
        if frozen:
            torch.nn.init.zeros_(table)
            table.requires_grad_(False)
        assert model.bert.embeddings.position_embeddings is None
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-3)
        generator = torch.Generator().manual_seed(0)

        def batch(n=64, L=12):
            ids = torch.randint(5, 20, (n, L), generator=generator)
            where = torch.randint(2, L, (n,), generator=generator)
            labels = torch.full_like(ids, -100)
            rows = torch.arange(n)
            labels[rows, where] = ids[rows, where - 2]
            ids[rows, where] = 4  # [MASK]
            return ids, labels

        for _ in range(150):
            ids, labels = batch()
            loss = model(ids, labels=labels).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        ids, labels = batch(512)
        with torch.no_grad():
            logits = model.eval()(ids).logits
        picked = labels != -100
        return (logits[picked].argmax(-1) == labels[picked]).float().mean().item()

    learned, frozen = train(False), train(True)
    assert learned > 0.9, learned
    assert frozen < 0.3, frozen  # chance is 1/15


def test_saved_model_reloads_and_says_transformers_cannot_load_it(tmp_path):
    import json

    from bertforge import ModernBertConfig
    torch.manual_seed(0)
    model = BertForMaskedLM(config()).eval()
    ids, mask = mixed_batch()
    model.save_pretrained(tmp_path / "m")
    saved = json.loads((tmp_path / "m" / "config.json").read_text())
    assert saved["relative_attention_num_buckets"] == 8 and saved["relative_attention_max_distance"] == 12
    assert "relative_attention_num_buckets" in saved["bertforge_only"]
    again = BertForMaskedLM.from_pretrained(tmp_path / "m").eval()
    torch.testing.assert_close(again(ids, attention_mask=mask).logits, model(ids, attention_mask=mask).logits)
    assert "bertforge_only" not in ModernBertConfig().to_dict()
    from bertforge import ModernBertForMaskedLM
    modern_config = ModernBertConfig.preset("tiny", vocab_size=40, pad_token_id=0, rope_theta=None,
                                            local_rope_theta=None, relative_attention_num_buckets=32)
    modern = ModernBertForMaskedLM(modern_config).eval()
    modern.save_pretrained(tmp_path / "modern")
    written = json.loads((tmp_path / "modern" / "config.json").read_text())
    assert "relative_attention_num_buckets" in written["bertforge_only"]
    again = ModernBertForMaskedLM.from_pretrained(tmp_path / "modern").eval()
    assert again.config.relative_bias and not again.config.rotary
    torch.testing.assert_close(again(ids, attention_mask=mask).logits, modern(ids, attention_mask=mask).logits)


@pytest.mark.parametrize("field,value,expected", [
    ("relative_attention_num_buckets", 3, "integer >= 4"),
    ("relative_attention_num_buckets", True, "integer >= 4"),
    ("relative_attention_max_distance", 2, "above 2"),
])
def test_bad_settings_name_the_field(field, value, expected):
    with pytest.raises(ConfigError, match=f"'{field}'.*{expected}"):
        config(**{field: value})

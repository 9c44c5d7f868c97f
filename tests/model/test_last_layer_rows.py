"""The last layer computes only the rows a head reads (masked tokens, [CLS]): same outputs, same gradients.

Each case is held to the same model with `Kernels(read_rows_only=False)`, which computes the last layer in
full and picks the rows afterwards. A hook on the last depth's feed-forward counts the rows it really ran on.
"""
from __future__ import annotations

import pytest
import torch

from bertforge import BertConfig
from bertforge.model.albert import AlbertConfig, AlbertForPreTraining
from bertforge.model.bert import BertForMaskedLM, BertForPreTraining
from bertforge.model.encoder_decoder import BertLMHeadModel
from bertforge.model.kernels import Kernels
from bertforge.model.modernbert import ModernBertConfig, ModernBertForMaskedLM, ModernBertForSequenceClassification
from bertforge.model.task_heads import BertForMultipleChoice, BertForSequenceClassification

NO_DROPOUT = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}


def padded_batch(batch: int = 4, seq: int = 18, vocab: int = 120):
    torch.manual_seed(0)
    ids = torch.randint(5, vocab, (batch, seq))
    lengths = torch.tensor([seq, 5, 11, seq - 2, 9, 14])[:batch]
    mask = (torch.arange(seq)[None] < lengths[:, None]).long()
    ids[:, 0] = 2
    labels = torch.full_like(ids, -100)
    for row, length in enumerate(lengths.tolist()):
        picked = torch.randperm(length - 1)[: max(1, length // 4)] + 1
        labels[row, picked] = ids[row, picked]
    return ids * mask, mask, labels


def modern_config(**overrides) -> ModernBertConfig:
    return ModernBertConfig(vocab_size=120, hidden_size=32, intermediate_size=48, num_hidden_layers=3,
                            num_attention_heads=4, max_position_embeddings=64, local_attention=8,
                            global_attn_every_n_layers=2, pad_token_id=0, **overrides)


def case(name: str):
    """(model, forward keyword arguments, rows the last layer should compute) for one case."""
    ids, mask, labels = padded_batch()
    B, masked = ids.shape[0], int((labels != -100).sum())
    tiny = BertConfig.preset("tiny", vocab_size=120, **NO_DROPOUT)
    if name == "bert pre-training":
        model = BertForPreTraining(tiny)
        return model, dict(labels=labels, next_sentence_label=torch.tensor([0, 1, 1, 0])), B + masked
    if name == "bert masked LM, positions asked":
        return BertForMaskedLM(tiny), dict(prediction_positions=labels != -100), masked
    if name == "bert masked LM, gradient checkpointing":
        model = BertForMaskedLM(tiny)
        model.bert.encoder.gradient_checkpointing = True
        return model, dict(labels=labels), masked
    if name == "modernbert masked LM":
        return ModernBertForMaskedLM(modern_config()), dict(labels=labels), masked
    if name == "albert, all layers shared":
        config = AlbertConfig(vocab_size=120, embedding_size=16, hidden_size=32, intermediate_size=64,
                              num_hidden_layers=3, num_attention_heads=4, max_position_embeddings=64, classifier_dropout=0.0,
                              **NO_DROPOUT)
        return AlbertForPreTraining(config), dict(labels=labels), B + masked
    if name == "bert, feed-forward shared":
        model = BertForPreTraining(tiny.replace(layer_sharing="ffn", num_hidden_layers=3))
        return model, dict(labels=labels), B + masked
    if name == "decoder with cross-attention":
        model = BertLMHeadModel(tiny.replace(is_decoder=True, add_cross_attention=True))
        memory = torch.randn(B, 7, tiny.hidden_size)
        return model, dict(labels=labels, encoder_hidden_states=memory), masked
    if name == "sequence classification":
        model = BertForSequenceClassification(tiny.replace(id2label={0: "a", 1: "b", 2: "c"}))
        return model, dict(labels=torch.tensor([0, 2, 1, 1])), B
    if name == "modernbert classification, cls":
        model = ModernBertForSequenceClassification(modern_config(classifier_pooling="cls"))
        return model, dict(labels=torch.tensor([0, 1, 1, 0])), B
    if name == "modernbert classification, mean":
        model = ModernBertForSequenceClassification(modern_config(classifier_pooling="mean"))
        return model, dict(labels=torch.tensor([0, 1, 1, 0])), int(mask.sum())
    raise KeyError(name)


CASES = ["bert pre-training", "bert masked LM, positions asked", "bert masked LM, gradient checkpointing",
         "modernbert masked LM", "albert, all layers shared", "bert, feed-forward shared",
         "decoder with cross-attention", "sequence classification", "modernbert classification, cls",
         "modernbert classification, mean"]


def last_feed_forward(model):
    encoder = model.bert.encoder
    return encoder.layers[encoder.schedule[-1][1]].feed_forward


def run(model, ids, mask, kwargs, full: bool):
    """Logits, loss, gradients, and the rows the last depth's feed-forward ran on."""
    seen: list[int] = []
    hook = last_feed_forward(model).register_forward_hook(lambda _m, args, _out: seen.append(args[0].shape[0]))
    model.zero_grad()
    model.set_kernels(Kernels(read_rows_only=not full))
    out = model(ids, attention_mask=mask, **kwargs)
    hook.remove()
    logits = [v for k, v in vars(out).items() if k.endswith("logits") and v is not None]
    loss = out.loss if out.loss is not None else sum(v.square().mean() for v in logits)  # positions, no labels
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return logits, loss.detach(), grads, seen[-1]


@pytest.mark.parametrize("name", CASES)
def test_last_layer_runs_on_read_rows_only_and_changes_nothing(name):
    model, kwargs, expected_rows = case(name)
    ids, mask, _ = padded_batch()
    model.train()
    logits, loss, grads, rows = run(model, ids, mask, kwargs, full=False)
    full_logits, full_loss, full_grads, full_rows = run(model, ids, mask, kwargs, full=True)
    assert rows == expected_rows
    assert full_rows == int(mask.sum())  # the reference: every real token
    for a, b in zip(logits, full_logits, strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(loss, full_loss, atol=1e-6, rtol=1e-6)
    assert grads.keys() == full_grads.keys()
    for key in grads:
        torch.testing.assert_close(grads[key], full_grads[key], atol=1e-6, rtol=1e-5, msg=key)


def test_multiple_choice_reads_first_tokens_only():
    model = BertForMultipleChoice(BertConfig.preset("tiny", vocab_size=120, **NO_DROPOUT)).eval()
    ids, mask, _ = padded_batch()
    ids, mask = ids.reshape(2, 2, -1), mask.reshape(2, 2, -1)
    seen: list[int] = []
    last_feed_forward(model).register_forward_hook(lambda _m, args, _out: seen.append(args[0].shape[0]))
    with torch.no_grad():
        selective = model(ids, attention_mask=mask).logits
        full = model.set_kernels(Kernels(read_rows_only=False))(ids, attention_mask=mask).logits
    assert seen[-2:] == [4, int(mask.sum())]
    torch.testing.assert_close(selective, full, atol=1e-6, rtol=1e-5)


def test_flop_count_follows_the_rows_the_last_layer_computes():
    from bertforge.model import count_flops
    config = BertConfig.preset("mini", vocab_size=1000)
    H, I, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    per_row = 2 * (H * H + 2 * H * I)  # output projection + feed-forward of one row
    assert count_flops(config, [100], last_layer_rows=20) == count_flops(config, [100]) - 80 * per_row
    mlm = BertForMaskedLM(config)
    full_layers = (layers - 1) * 128 * per_row + layers * 128 * 2 * 3 * H * H  # QKV on every token
    last = 0.15 * 128 * per_row
    attention = layers * 2 * 2 * 128 * 128 * H
    decoder = 0.15 * 128 * 2 * (H * H + H * 1000)
    assert mlm.flops_per_token(128, 0.15, training=False) * 128 == pytest.approx(
        full_layers + last + attention + decoder)


def test_hidden_states_asked_for_are_whole_and_heads_unchanged():
    model, kwargs, _ = case("bert pre-training")
    ids, mask, _ = padded_batch()
    model.eval()
    with torch.no_grad():
        plain = model(ids, attention_mask=mask, **kwargs)
        with_states = model(ids, attention_mask=mask, output_hidden_states=True, **kwargs)
        encoder = model.bert(ids, attention_mask=mask)
    torch.testing.assert_close(plain.prediction_logits, with_states.prediction_logits, atol=1e-6, rtol=1e-5)
    assert len(with_states.hidden_states) == model.config.num_hidden_layers + 1
    torch.testing.assert_close(with_states.hidden_states[-1], encoder.last_hidden_state, atol=1e-6, rtol=1e-5)

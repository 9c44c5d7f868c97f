"""ELECTRA pre-training: sampling, the discriminator's input and labels, gradients, checkpoints, learning."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from bertforge.data.masking import MaskingConfig, VocabTables, mask_tokens
from bertforge.model.electra import (ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining,
                                     ElectraForSequenceClassification, ElectraModel)
from bertforge.model.electra_pretraining import (ElectraPretrainingModel, build_electra_pretraining,
                                                 generator_config, replace_with_samples)

from needs import require_module

transformers = require_module("transformers")

V = 69  # 0-4 special, 5-68 words
TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(5, V)]
TABLES = VocabTables.from_tokens(TOKENS, [0, 1, 2, 3, 4], mask_id=4)


def tiny_config(**overrides) -> ElectraConfig:
    fields = dict(vocab_size=V, hidden_size=64, intermediate_size=128, embedding_size=32, max_position_embeddings=64,
                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    fields.update(overrides)
    return ElectraConfig.preset("tiny", **fields)


def mlm_batch(n: int = 8, length: int = 24, seed: int = 0, words: int = 10, repeat: bool = False):
    """Rows of real-looking structure masked by bertforge's own masker (15%, 80/10/10): each row repeats one
    word (`repeat`) or draws words at random, from the first `words` word ids."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(length // 2, length + 1, n)
    ids = 5 + rng.integers(0, words, (n, 1) if repeat else (n, length)) + np.zeros(length, dtype=np.int64)
    ids[:, 0] = 2
    ids[np.arange(n), lengths - 1] = 3
    ids[np.arange(length)[None] >= lengths[:, None]] = 0
    keys = rng.integers(0, 2 ** 62, n).astype(np.uint64)
    inputs, labels = mask_tokens(ids, lengths, keys, MaskingConfig(), 100, TABLES)
    mask = (np.arange(length)[None] < lengths[:, None]).astype(np.int64)
    return {"input_ids": torch.from_numpy(inputs), "attention_mask": torch.from_numpy(mask),
            "token_type_ids": torch.zeros(n, length, dtype=torch.long), "labels": torch.from_numpy(labels)}


def test_sampling_draws_from_the_softmax_and_touches_only_masked_positions():
    ids = torch.tensor([[2, 4, 9, 4, 3], [2, 7, 4, 3, 0]])
    labels = torch.tensor([[-100, 5, -100, 6, -100], [-100, -100, 8, -100, -100]])
    logits = torch.full((3, V), -1e4)
    logits[:, 5], logits[:, 6] = np.log(0.7), np.log(0.3)  # every masked row: 70 % token 5, 30 % token 6
    torch.manual_seed(0)
    draws = [replace_with_samples(ids, labels, logits) for _ in range(4000)]
    fakes = torch.stack([f for f, _ in draws])
    replaced = torch.stack([r for _, r in draws])
    original = torch.where(labels != -100, labels, ids)
    unmasked = (labels == -100).expand_as(fakes)
    assert (fakes[unmasked] == original.expand_as(fakes)[unmasked]).all()    # only masked positions change
    assert (replaced == (fakes != original)).all()        # a sample equal to the original counts as original
    share_6 = (fakes[:, 0, 1] == 6).float().mean().item()
    assert abs(share_6 - 0.3) < 0.03                                          # sampled, not argmax
    assert not replaced[:, 0, 1][fakes[:, 0, 1] == 5].any()                  # label 5 drawn: not replaced
    assert replaced[:, 1, 2].all()                                            # label 8 is never drawn
    # torch's global generator: the same seed gives the same corruption, another seed another one
    torch.manual_seed(1)
    a = replace_with_samples(ids, labels, torch.zeros(3, V))[0]
    torch.manual_seed(1)
    b = replace_with_samples(ids, labels, torch.zeros(3, V))[0]
    assert (a == b).all()
    assert any((replace_with_samples(ids, labels, torch.zeros(3, V))[0] != a).any() for _ in range(5))


def test_forward_builds_the_discriminator_batch_and_its_losses():
    torch.manual_seed(0)
    model = build_electra_pretraining(tiny_config(), disc_weight=7.0)
    batch = mlm_batch(seed=1)
    seen = {}
    model.discriminator.register_forward_pre_hook(
        lambda module, args: seen.update(fake=args[0].clone()))
    out = model(**batch)
    fake, labels, real = seen["fake"], batch["labels"], batch["attention_mask"].bool()
    original = torch.where(labels != -100, labels, batch["input_ids"])
    assert (fake[labels == -100] == batch["input_ids"][labels == -100]).all()
    replaced = fake != original
    assert replaced[labels != -100].any() and not replaced[labels == -100].any()

    # references computed from the parts: the generator alone, and torch's BCE on the discriminator's logits
    with torch.no_grad():
        mlm = model.generator(**batch).loss
        logits = model.discriminator(fake, batch["attention_mask"], batch["token_type_ids"]).logits
    bce = F.binary_cross_entropy_with_logits(logits[real], replaced[real].float())
    assert abs(out.mlm_loss.item() - mlm.item()) < 1e-5
    assert abs(out.disc_loss.item() - bce.item()) < 1e-5
    assert abs(out.loss.item() - (mlm.item() + 7.0 * bce.item())) < 1e-4
    assert abs(out.disc_accuracy.item() - ((logits > 0) == replaced)[real].float().mean().item()) < 1e-6
    assert abs(out.replaced_fraction.item() - replaced[real].float().mean().item()) < 1e-6
    assert out.prediction_logits.shape == ((labels != -100).sum().item(), V)
    with pytest.raises(ValueError, match="needs MLM labels"):
        model(batch["input_ids"], batch["attention_mask"])


def test_gradients_reach_both_networks_but_not_through_the_sample():
    batch = mlm_batch(seed=2)
    grads = {}
    for weight in (50.0, 0.0):
        torch.manual_seed(0)
        model = build_electra_pretraining(tiny_config(), disc_weight=weight)
        torch.manual_seed(5)  # the same samples in both runs
        model(**batch).loss.backward()
        grads[weight] = {n: p.grad.clone() for n, p in model.named_parameters()}
        if weight:
            for name, p in model.named_parameters():
                assert p.grad is not None and p.grad.abs().sum() > 0, name
    # shared tensors are listed once, under the generator's names
    shared = {n for n in grads[50.0] if ".embeddings." in n and "projection" not in n}
    assert shared and all(n.startswith("generator.") for n in shared)
    for name in grads[50.0]:
        if name.startswith("generator.") and name not in shared:
            # the discriminator's loss reaches the generator only through the shared embeddings
            assert torch.allclose(grads[50.0][name], grads[0.0][name], atol=1e-7), name
        else:  # the discriminator, and the shared embeddings, which both losses train
            assert not torch.allclose(grads[50.0][name], grads[0.0][name]), name


def test_generator_shape_and_shared_embeddings():
    disc = ElectraConfig.preset("base", vocab_size=1000)
    gen = generator_config(disc, 1 / 3)
    assert (gen.hidden_size, gen.num_attention_heads, gen.intermediate_size) == (256, 4, 1024)  # electra-base's
    assert gen.head_dim == disc.head_dim and gen.embedding_dim == 768 and gen.num_hidden_layers == 12
    quarter = generator_config(disc)
    assert (quarter.hidden_size, quarter.num_attention_heads, quarter.intermediate_size) == (192, 3, 768)
    with pytest.raises(ValueError, match="generator_fraction"):
        generator_config(disc, 0.0)

    torch.manual_seed(0)
    model = build_electra_pretraining(tiny_config())
    g, d = model.generator.bert.embeddings, model.discriminator.bert.embeddings
    assert g.word_embeddings is d.word_embeddings and g.position_embeddings is d.position_embeddings
    assert model.generator.mlm.decoder_weight is d.word_embeddings.weight
    assert g.projection is not None and g.projection is not d.projection  # E=32 -> 16 and -> 64, each its own
    separate = model.generator.num_parameters() + model.discriminator.num_parameters()
    shared = sum(p.numel() for p in (*d.word_embeddings.parameters(), *d.position_embeddings.parameters(),
                                     *d.token_type_embeddings.parameters(), *d.norm.parameters()))
    assert model.num_parameters() == separate - shared
    # FLOPs: two encoders, the generator's last layer and decoder on masked rows, the discriminator's head on every token
    from bertforge.model.flops import count_flops
    gen_cfg, disc_cfg = model.generator.config, model.discriminator.config
    expected = (count_flops(gen_cfg, [128], n_masked=0.15 * 128, training=True,
                            last_layer_rows=0.15 * 128)
                + count_flops(disc_cfg, [128], training=True) + 3 * 128 * 2 * (64 * 64 + 64)) / 128
    assert model.flops_per_token(128, 0.15) == pytest.approx(expected)
    with pytest.raises(ValueError, match="agree on vocab_size"):
        ElectraPretrainingModel(ElectraForMaskedLM(tiny_config(vocab_size=70)), ElectraForPreTraining(tiny_config()))


def test_saved_pair_loads_in_bertforge_and_transformers(tmp_path):
    torch.manual_seed(0)
    model = build_electra_pretraining(tiny_config()).eval()
    model.save_pretrained(tmp_path)
    batch = mlm_batch(seed=3)
    ids, mask, real = batch["input_ids"], batch["attention_mask"], batch["attention_mask"].bool()

    theirs_disc = transformers.ElectraForPreTraining.from_pretrained(tmp_path).eval()
    theirs_gen, info = transformers.ElectraForMaskedLM.from_pretrained(tmp_path / "generator",
                                                                       output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    with torch.no_grad():
        ours_d = model.discriminator(ids, attention_mask=mask).logits
        ours_g = model.generator(ids, attention_mask=mask).logits
        assert (ours_d - theirs_disc(input_ids=ids, attention_mask=mask).logits)[real].abs().max() < 1e-5
        assert (ours_g - theirs_gen.eval()(input_ids=ids, attention_mask=mask).logits)[real].abs().max() < 1e-5

    # the discriminator folder is what fine-tuning starts from: a sequence classifier in both libraries
    ours_cls = ElectraForSequenceClassification.from_pretrained(tmp_path).eval()
    assert sorted(ours_cls.loading_info["newly_initialized"]) == [
        "classifier.dense.bias", "classifier.dense.weight", "classifier.out_proj.bias", "classifier.out_proj.weight"]
    theirs_cls, info = transformers.ElectraForSequenceClassification.from_pretrained(tmp_path,
                                                                                     output_loading_info=True)
    assert sorted(info["missing_keys"]) == ["classifier.dense.bias", "classifier.dense.weight",
                                            "classifier.out_proj.bias", "classifier.out_proj.weight"]
    ours_cls.classifier.load_state_dict(theirs_cls.classifier.state_dict())  # both heads are fresh: align them
    with torch.no_grad():
        assert (ours_cls(ids, attention_mask=mask).logits
                - theirs_cls.eval()(input_ids=ids, attention_mask=mask).logits).abs().max() < 1e-5
        encoder = ElectraModel.from_pretrained(tmp_path)(ids, attention_mask=mask).last_hidden_state
        assert (encoder - model.discriminator.bert(ids, attention_mask=mask).last_hidden_state)[real].abs().max() == 0

    # and back into a pair: from_pretrained, and load_weights into a fresh pair (resume), give the same step
    again = ElectraPretrainingModel.from_pretrained(tmp_path).eval()
    fresh = build_electra_pretraining(tiny_config()).eval()
    fresh.load_weights(tmp_path)
    assert again.generator.bert.embeddings.word_embeddings is again.discriminator.bert.embeddings.word_embeddings
    losses = []
    for m in (model, again, fresh):
        torch.manual_seed(9)
        with torch.no_grad():
            losses.append(m(**batch).loss.item())
    assert losses[0] == losses[1] == losses[2]


@pytest.mark.slow
def test_tiny_electra_learns_to_detect_replaced_tokens():
    """Four fixed batches of one-word rows: the generator learns the row's word, and the discriminator learns to
    spot the samples that differ, scoring well above "everything is original" (its baseline)."""
    torch.manual_seed(0)
    model = build_electra_pretraining(tiny_config())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batches = [mlm_batch(n=16, length=32, seed=s, repeat=True) for s in range(4)]
    history = []
    for step in range(140):
        out = model(**batches[step % 4])
        out.loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        history.append((out.loss.item(), out.mlm_loss.item(), out.disc_accuracy.item(),
                        1 - out.replaced_fraction.item()))
    first, last = np.mean(history[:20], axis=0), np.mean(history[-20:], axis=0)
    assert last[0] < 0.5 * first[0] and last[1] < first[1]
    accuracy, baseline = last[2], last[3]
    assert baseline < 0.97                                   # there are replacements left to find
    assert accuracy > baseline + 0.4 * (1 - baseline)  # 40 % of them found, net of false alarms (seeds 0-2: 58-88 %)


@pytest.mark.slow
def test_pretraining_call_on_real_batches(train_data, vocab_dir):
    """The engine's batches (real Wikipedia, the real uncased vocab) drive it as they drive the MLM models."""
    from bertforge.data import PretrainingDataset
    from bertforge.pretraining.pretrain import model_inputs
    data = PretrainingDataset(train_data, vocab_dir, objective="mlm", max_seq_length=64, batch_size=4)
    batch = next(iter(data))
    torch.manual_seed(0)
    tokenizer = data.tokenizer
    config = ElectraConfig.preset("tiny", vocab_size=len(tokenizer.vocab), pad_token_id=tokenizer.pad_token_id)
    model = build_electra_pretraining(config)
    out = model(**model_inputs(batch, "mlm", torch.device("cpu")))
    assert out.loss.isfinite() and 0 < out.replaced_fraction < 0.2
    out.loss.backward()

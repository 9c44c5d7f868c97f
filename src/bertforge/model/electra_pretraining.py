"""ELECTRA's replaced-token-detection pre-training: a small generator and the discriminator, trained jointly.

One step (Clark et al., 2020, section 2): the generator is an MLM on the ordinary masked batch; at the
masked positions a token is *sampled* from its softmax (temperature 1; no gradient flows through the
sample); the discriminator reads the original sequence with those samples put in and predicts, for every
real token, whether it was replaced (a sample equal to the original counts as original). The loss is
``mlm_loss + disc_weight * disc_loss`` (the paper's lambda = 50).

The two networks share their embedding block (the paper's "token and positional embeddings"; its reference
code shares the whole ``electra/embeddings`` scope, so the segment table and the LayerNorm over the sum too,
and so do we). Each keeps its own projection E -> H, so the generator can be narrower. The generator's
decoder is tied to the shared word embeddings.

Sampling draws from torch's global generator, so a resumed run that restores the RNG state continues
exactly; the generator's decoder still runs on the masked rows only.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import torch
from torch import nn

from bertforge.config import BertConfig
from bertforge.model.electra import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining
from bertforge.model.outputs import ModelOutput

GENERATOR_DIR = "generator"
SHARED_EMBEDDINGS = ("word_embeddings", "position_embeddings", "token_type_embeddings", "norm")


@dataclass
class ElectraPretrainingOutput(ModelOutput):
    loss: Optional[torch.Tensor] = None              # mlm_loss + disc_weight * disc_loss
    mlm_loss: Optional[torch.Tensor] = None          # the generator's MLM cross-entropy
    disc_loss: Optional[torch.Tensor] = None         # replaced-token detection BCE over real tokens
    disc_accuracy: Optional[torch.Tensor] = None     # over real tokens (no gradient)
    replaced_fraction: Optional[torch.Tensor] = None  # replaced / real tokens: 1 - this is the all-original score
    prediction_logits: Optional[torch.Tensor] = None  # the generator's [n_masked, vocab] rows (MLM accuracy)
    disc_logits: Optional[torch.Tensor] = None       # [batch, seq]; > 0 means "replaced"


def replace_with_samples(input_ids: torch.Tensor, labels: torch.Tensor,
                         mlm_logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(discriminator input, replaced mask) from a masked batch and the generator's logits on its masked rows
    (rows in the order of ``(labels != -100).nonzero()``). Sampling uses torch's global RNG."""
    positions = labels != -100
    with torch.no_grad():
        probs = torch.softmax(mlm_logits.detach().float(), dim=-1)
        sampled = torch.multinomial(probs, 1).squeeze(-1)
    original = torch.where(positions, labels, input_ids)
    fake = original.clone()
    fake[positions] = sampled.to(fake.dtype)
    return fake, fake != original


class ElectraPretrainingModel(nn.Module):
    """Generator (`ElectraForMaskedLM`) + discriminator (`ElectraForPreTraining`) with a shared embedding
    block. ``model(input_ids, attention_mask, token_type_ids, labels).loss`` trains both; the batch is an
    ordinary MLM batch (masked input, original ids at labelled positions, -100 elsewhere)."""

    def __init__(self, generator: ElectraForMaskedLM, discriminator: ElectraForPreTraining,
                 disc_weight: float = 50.0) -> None:
        super().__init__()
        if disc_weight < 0:
            raise ValueError(f"disc_weight must be >= 0, got {disc_weight}")
        self.generator, self.discriminator, self.disc_weight = generator, discriminator, float(disc_weight)
        self.tie_embeddings()

    @property
    def config(self) -> ElectraConfig:
        """The discriminator's config: it is the model that is kept (vocab, positions, pad id)."""
        return self.discriminator.config

    def tie_embeddings(self) -> None:
        """Make the generator use the discriminator's embedding tables and LayerNorm (and tie its decoder)."""
        g, d = self.generator.config, self.discriminator.config
        for field in ("vocab_size", "embedding_dim", "max_position_embeddings", "type_vocab_size", "pad_token_id",
                      "layer_norm_eps"):
            if getattr(g, field) != getattr(d, field):
                raise ValueError(f"generator and discriminator must agree on {field} to share embeddings "
                                 f"(generator {getattr(g, field)}, discriminator {getattr(d, field)})")
        ours, theirs = self.discriminator.bert.embeddings, self.generator.bert.embeddings
        for name in SHARED_EMBEDDINGS:
            setattr(theirs, name, getattr(ours, name))
        self.generator.mlm.word_embeddings = [ours.word_embeddings]

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                token_type_ids: Optional[torch.Tensor] = None, labels: Optional[torch.Tensor] = None,
                position_ids: Optional[torch.Tensor] = None) -> ElectraPretrainingOutput:
        if labels is None:
            raise ValueError("ElectraPretrainingModel needs MLM labels (original ids at masked positions, -100 "
                             "elsewhere): the generator learns from them and samples where they are set")
        gen = self.generator(input_ids, attention_mask, token_type_ids, position_ids, labels=labels)
        fake, replaced = replace_with_samples(input_ids, labels, gen.logits)
        disc = self.discriminator(fake, attention_mask, token_type_ids, position_ids, labels=replaced)
        with torch.no_grad():
            real = attention_mask.bool() if attention_mask is not None else torch.ones_like(replaced)
            hits = ((disc.logits > 0) == replaced) & real
            n_real = real.sum().clamp(min=1)
            accuracy = hits.sum() / n_real
            replaced_fraction = (replaced & real).sum() / n_real
        return ElectraPretrainingOutput(loss=gen.loss + self.disc_weight * disc.loss, mlm_loss=gen.loss,
                                        disc_loss=disc.loss, disc_accuracy=accuracy,
                                        replaced_fraction=replaced_fraction, prediction_logits=gen.logits,
                                        disc_logits=disc.logits)

    # ---- checkpoints ---------------------------------------------------------------------------------------
    def save_pretrained(self, directory: str | Path) -> Path:
        """The discriminator as an `ElectraForPreTraining` folder at `directory` (what fine-tuning loads) and the
        generator as an `ElectraForMaskedLM` folder in `directory/generator`; both load in transformers."""
        directory = Path(directory)
        self.discriminator.save_pretrained(directory)
        self.generator.save_pretrained(directory / GENERATOR_DIR)
        return directory

    @classmethod
    def from_pretrained(cls, directory: str | Path, disc_weight: float = 50.0,
                        **config_overrides: Any) -> "ElectraPretrainingModel":
        """Read a folder written by `save_pretrained`; the embeddings are the discriminator's."""
        directory = Path(directory)
        discriminator = ElectraForPreTraining.from_pretrained(directory, **config_overrides)
        generator = ElectraForMaskedLM.from_pretrained(directory / GENERATOR_DIR, **config_overrides)
        return cls(generator, discriminator, disc_weight=disc_weight)

    def load_weights(self, directory: str | Path) -> dict[str, dict[str, list[str]]]:
        """Load a `save_pretrained` folder into this model in place (resuming keeps optimizer state valid).
        Returns each network's loading info."""
        from bertforge.checkpoint import load_hf_state_dict, read_state_dict
        directory = Path(directory)
        info = {}
        # the generator first: the shared embeddings then end as the discriminator's copy
        for name, net, folder in (("generator", self.generator, directory / GENERATOR_DIR),
                                  ("discriminator", self.discriminator, directory)):
            state, source = read_state_dict(folder)
            info[name] = load_hf_state_dict(net, state, source=source, strict=True)
        return info

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())  # shared tensors once

    def flops_per_token(self, seq_len: int = 128, masked_fraction: float = 0.15, training: bool = True) -> float:
        """Matmul FLOPs per real token of one step: the generator (decoder on masked rows only), the
        discriminator's encoder and its per-token head (dense H x H, then H -> 1)."""
        H = self.discriminator.config.hidden_size
        head = 2 * (H * H + H) * (3 if training else 1)
        return (self.generator.flops_per_token(seq_len, masked_fraction, training)
                + self.discriminator.flops_per_token(seq_len, masked_fraction, training) + head)


def generator_config(disc_config: ElectraConfig, fraction: float = 0.25) -> ElectraConfig:
    """The generator's shape: hidden and intermediate sizes scaled by `fraction`, as many heads as keep the
    discriminator's head size (at least one), same depth, and the discriminator's embedding width E (the
    tables are shared; the generator projects E to its own hidden size)."""
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"generator_fraction must be in (0, 1], got {fraction}")
    hidden = disc_config.hidden_size * fraction
    heads = max(1, round(hidden / disc_config.head_dim))
    hidden = heads * max(1, round(hidden / heads))
    intermediate = max(1, round(disc_config.intermediate_size * fraction))
    return disc_config.replace(hidden_size=hidden, num_attention_heads=heads, intermediate_size=intermediate,
                               embedding_size=disc_config.embedding_dim, id2label=None)


def build_electra_pretraining(disc_config: BertConfig, generator_fraction: float = 0.25,
                              disc_weight: float = 50.0) -> ElectraPretrainingModel:
    """A fresh generator + discriminator pair. `disc_config` is the discriminator's shape (an `ElectraConfig`,
    e.g. ``ElectraConfig.preset("small", vocab_size=V, pad_token_id=PAD)``; any other `BertConfig` is read as
    one). The paper finds generators 1/4 to 1/2 of the discriminator's width work best."""
    config = ElectraConfig.from_bert(disc_config)
    discriminator = ElectraForPreTraining(config)
    generator = ElectraForMaskedLM(generator_config(config, generator_fraction))
    logging.getLogger("bertforge.electra").info(
        "ELECTRA pre-training: discriminator H=%d, generator H=%d (%d heads)", config.hidden_size,
        generator.config.hidden_size, generator.config.num_attention_heads)
    return ElectraPretrainingModel(generator, discriminator, disc_weight=disc_weight)


__all__ = ["ElectraPretrainingModel", "ElectraPretrainingOutput", "build_electra_pretraining", "generator_config",
           "replace_with_samples", "GENERATOR_DIR"]

"""Training a warm-started encoder–decoder as a conditional masked LM (Mask-Predict): the engine's stage.

Each training pair is a source and a target text. The decoder reads `[CLS] target [SEP]` with a uniformly
random number of the target's tokens (1..all) replaced by `[MASK]` and predicts them from the rest and from
the encoder's states; the length predictor learns the target's length (`model/encoder_decoder.py`). Masks are
drawn from a generator seeded by the batch's place in the run, so a resumed run draws the same ones.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from bertforge.data.batches import EpochBatches
from bertforge.settings import MAX_BATCH, MAX_LENGTH, MAX_SAMPLES, SettingError, flat_keywords, part, setting
from bertforge.tasks.readers.errors import DataError
from bertforge.tasks.readers.generic import _text
from bertforge.tasks.readers.rows import read_records
from bertforge.training.engine import Session, Stage
from bertforge.training.options import FaultHooks, TrainOptions, seq2seq_defaults


@flat_keywords
@dataclass
class Seq2SeqConfig:
    """An encoder-decoder run: the pairs, where the encoder and decoder start from, lengths, and the engine's
    settings (`train`; also given by their own names, `max_steps=...`)."""

    train_file: str = setting(help='JSONL of {"source": ..., "target": ...}', flag="--train", metavar="FILE",
                              kind="existing_file")
    output: str = setting(help="folder for the encoder-decoder (transformers' EncoderDecoderModel layout)",
                          metavar="DIR")
    eval_file: str | None = setting(None, "held-out pairs, same format", flag="--eval", metavar="FILE",
                                    kind="existing_file")
    encoder: str | None = setting(None, "BERT checkpoint to warm-start the encoder from", metavar="DIR",
                                  kind="existing_dir")
    decoder: str | None = setting(None, "BERT checkpoint to warm-start the decoder from (default: the encoder's)",
                                  metavar="DIR", kind="existing_dir")
    init_from: str | None = setting(None, "continue an encoder-decoder folder instead", metavar="DIR",
                                    kind="existing_dir")
    max_source_length: int = setting(256, "source tokens kept (with specials)", positive=True, maximum=MAX_LENGTH)
    max_target_length: int = setting(64, "target tokens kept; also the longest length the length predictor knows",
                                     positive=True, maximum=MAX_LENGTH)
    batch_size: int = setting(32, "pairs per micro-batch and process", positive=True, maximum=MAX_BATCH)
    eval_samples: int = setting(500, "held-out pairs each evaluation decodes", positive=True, maximum=MAX_SAMPLES)
    overwrite: bool = setting(False, "start again in an OUTPUT that holds another run (its contents are deleted)")
    train: TrainOptions = part(TrainOptions, seq2seq_defaults, title="training")


@dataclass
class Pair:
    source: list[int]   # [CLS] source [SEP], cut to max_source_length
    target: list[int]   # the target's tokens, no special tokens, cut to max_target_length


def read_pairs(path: str | Path) -> list[tuple[str, str]]:
    """(source, target) texts from a JSONL file of {"source": ..., "target": ...} objects; a bad line stops
    the read naming the file, line and field."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file (expected JSONL with 'source' and 'target')")
    pairs = []
    for line, record in read_records(path, "jsonl").rows:
        if isinstance(record, DataError):
            raise record
        pairs.append((_text(record, "source", path, line), _text(record, "target", path, line)))
    if not pairs:
        raise ValueError(f"{path}: no pairs (expected JSONL lines with 'source' and 'target')")
    return pairs


def encode_pairs(pairs: list[tuple[str, str]], tokenizer: Any, max_source: int, max_target: int) -> list[Pair]:
    out = []
    for source, target in pairs:
        src = tokenizer.encode(source, add_special_tokens=True)
        if len(src) > max_source:
            src = src[:max_source - 1] + [tokenizer.sep_token_id]
        tgt = tokenizer.encode(target, add_special_tokens=False)[:max_target]
        out.append(Pair(src, tgt or [tokenizer.sep_token_id]))
    return out


def collate(pairs: list[Pair], tokenizer: Any, generator: torch.Generator | None) -> dict[str, torch.Tensor]:
    """Padded source, `[CLS] target [SEP]` with CMLM masks (all target tokens when `generator` is None), labels
    at the masked tokens, and the target lengths."""
    pad, cls_id, sep, mask = (tokenizer.pad_token_id, tokenizer.cls_token_id, tokenizer.sep_token_id,
                              tokenizer.mask_token_id)
    B = len(pairs)
    S = max(len(p.source) for p in pairs)
    T = max(len(p.target) for p in pairs) + 2
    src = torch.full((B, S), pad, dtype=torch.long)
    src_mask = torch.zeros((B, S), dtype=torch.long)
    dec = torch.full((B, T), pad, dtype=torch.long)
    dec_mask = torch.zeros((B, T), dtype=torch.long)
    labels = torch.full((B, T), -100, dtype=torch.long)
    for i, p in enumerate(pairs):
        n = len(p.target)
        src[i, :len(p.source)] = torch.tensor(p.source)
        src_mask[i, :len(p.source)] = 1
        true = torch.tensor(p.target)
        dec[i, :n + 2] = torch.tensor([cls_id, *p.target, sep])
        dec_mask[i, :n + 2] = 1
        if generator is None:
            masked = torch.arange(n)
        else:  # Mask-Predict's training: a uniform number of masks, at uniformly random places
            k = int(torch.randint(1, n + 1, (1,), generator=generator))
            masked = torch.randperm(n, generator=generator)[:k]
        dec[i, masked + 1] = mask
        labels[i, masked + 1] = true[masked]
    lengths = torch.tensor([len(p.target) for p in pairs])
    return {"input_ids": src, "attention_mask": src_mask, "decoder_input_ids": dec,
            "decoder_attention_mask": dec_mask, "labels": labels, "target_lengths": lengths}


class PairBatches(EpochBatches):
    """`EpochBatches` of pairs, bucketed by source + target length; each batch draws its CMLM masks from a
    generator seeded by its position, so a resumed run masks the same tokens."""

    what = "training pairs"

    def __init__(self, pairs: list[Pair], tokenizer: Any, batch_size: int, seed: int, rank: int = 0,
                 world_size: int = 1) -> None:
        self.tokenizer = tokenizer
        super().__init__(pairs, batch_size, seed, rank=rank, world_size=world_size)

    def item_length(self, item: Pair) -> int:
        return len(item.source) + len(item.target)

    def make_batch(self, indices: list[int]) -> dict[str, torch.Tensor]:
        generator = torch.Generator().manual_seed(hash((self.seed, self.epoch, self.index, self.rank)) % 2 ** 62)
        return collate([self.items[i] for i in indices], self.tokenizer, generator)


class Seq2SeqStage(Stage):
    """The conditional MLM: loss = cross-entropy of the masked target tokens + 0.1 x the length loss.
    Evaluation masks every target token at its true length (one Mask-Predict iteration) and scores token
    accuracy, plus the length predictor's accuracy."""

    name = "seq2seq"

    def __init__(self, cfg: Seq2SeqConfig, model: torch.nn.Module, tokenizer: Any, batches: PairBatches,
                 heldout: list[Pair]) -> None:
        self.cfg, self.model, self.tokenizer, self.batches, self.heldout = cfg, model, tokenizer, batches, heldout
        self.device = next(model.parameters()).device

    def run_record(self) -> dict[str, Any]:
        c = self.cfg
        return {"train_file": c.train_file, "encoder": c.encoder, "decoder": c.decoder, "init_from": c.init_from,
                "max_source_length": c.max_source_length, "max_target_length": c.max_target_length,
                "batch_size": c.batch_size, "pairs": len(self.batches.items)}

    def next_batch(self) -> dict[str, Any]:
        return self.batches.next()

    def loss(self, net: torch.nn.Module, batch: dict[str, Any]) -> Any:
        return net(**{k: v.to(self.device) for k, v in batch.items()})

    def add_metrics(self, sums: dict[str, float], out: Any, batch: dict[str, Any]) -> None:
        masked = batch["labels"] != -100
        hits = (out.logits.argmax(-1).cpu() == batch["labels"][masked]).sum()
        for key, value in (("token_loss_sum", float(out.token_loss.detach()) * float(masked.sum())),
                           ("masked", float(masked.sum())), ("hits", float(hits)),
                           ("length_loss_sum", float(out.length_loss.detach()) * len(masked)),
                           ("rows", float(len(masked)))):
            sums[key] = sums.get(key, 0.0) + value

    def summarize(self, sums: dict[str, float]) -> dict[str, float]:
        if not sums.get("masked"):
            return {}
        return {"token_loss": sums["token_loss_sum"] / sums["masked"], "token_acc": sums["hits"] / sums["masked"],
                "length_loss": sums["length_loss_sum"] / sums["rows"]}

    def postfix(self, values: dict[str, float]) -> dict[str, str]:
        return {"acc": f"{values['token_acc']:.3f}"} if "token_acc" in values else {}

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        if not self.heldout:
            return {}
        was_training = self.model.training
        self.model.eval()
        hits = total = length_hits = 0
        loss_sum = 0.0
        for start in range(0, len(self.heldout), self.cfg.batch_size):
            batch = collate(self.heldout[start:start + self.cfg.batch_size], self.tokenizer, None)
            out = self.model(**{k: v.to(self.device) for k, v in batch.items()})
            masked = batch["labels"] != -100
            hits += int((out.logits.argmax(-1).cpu() == batch["labels"][masked]).sum())
            total += int(masked.sum())
            loss_sum += float(out.token_loss) * int(masked.sum())
            length_hits += int((out.length_logits.argmax(-1).cpu() == batch["target_lengths"]).sum())
        self.model.train(was_training)
        return {"eval_token_acc": hits / total, "eval_token_loss": loss_sum / total,
                "eval_length_acc": length_hits / len(self.heldout)}

    def score(self, metrics: dict[str, float]) -> float | None:
        return metrics.get("eval_token_acc")

    def state_dict(self) -> dict[str, Any]:
        return self.batches.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.batches.load_state_dict(state)

    def load_weights(self, folder: Path) -> None:
        from bertforge.model.encoder_decoder import EncoderDecoderModel
        self.model.load_state_dict(EncoderDecoderModel.from_pretrained(folder).state_dict())


def build_model(cfg: Seq2SeqConfig) -> tuple[torch.nn.Module, Any]:
    """The encoder-decoder and its tokenizer: continued from `init_from`, or warm-started from BERT checkpoints."""
    from bertforge.model.encoder_decoder import EncoderDecoderModel
    from bertforge.tokenization import load_tokenizer
    if cfg.init_from:
        model = EncoderDecoderModel.from_pretrained(cfg.init_from)
        return model, load_tokenizer(cfg.init_from)
    if not cfg.encoder:
        raise SettingError("give {encoder} DIR (and optionally {decoder} DIR), or {init_from} an encoder-decoder",
                           owner=Seq2SeqConfig)
    decoder = cfg.decoder or cfg.encoder
    tokenizer = load_tokenizer(cfg.encoder)
    if len(load_tokenizer(decoder).vocab) != len(tokenizer.vocab):
        raise SettingError("{encoder} {encoder_path} and {decoder} {decoder_path} have different vocabularies; the "
                           "decoder predicts the tokens the encoder reads", owner=Seq2SeqConfig,
                           encoder_path=cfg.encoder, decoder_path=decoder)
    model = EncoderDecoderModel.from_encoder_decoder_pretrained(cfg.encoder, decoder, cfg.max_target_length)
    return model, tokenizer


def train_seq2seq(cfg: Seq2SeqConfig, hooks: FaultHooks | None = None):
    """Warm-start (or continue) an encoder-decoder and train it as a conditional MLM with the engine."""
    from bertforge.training.run import Built, train
    opts = cfg.train
    opts.check()
    for name in ("max_source_length", "max_target_length", "batch_size"):
        if getattr(cfg, name) < 1:
            raise SettingError("{" + name + "} must be positive, got {got}", owner=Seq2SeqConfig, got=getattr(cfg, name))
    train_pairs = read_pairs(cfg.train_file)
    eval_pairs = read_pairs(cfg.eval_file) if cfg.eval_file else []
    inputs = (cfg.encoder, cfg.decoder, cfg.init_from, cfg.train_file, cfg.eval_file)

    def build(session: Session, out: Path) -> Built:
        torch.manual_seed(opts.seed)
        random.seed(opts.seed)
        model, tokenizer = build_model(cfg)
        if model.config.max_target_length < cfg.max_target_length:
            raise SettingError("{max_target_length} {given} is beyond the model's length predictor ({longest})",
                               owner=Seq2SeqConfig, given=cfg.max_target_length, longest=model.config.max_target_length)
        longest = min(model.config.encoder.max_position_embeddings, model.config.decoder.max_position_embeddings - 2)
        if cfg.max_source_length > model.config.encoder.max_position_embeddings or cfg.max_target_length > longest:
            raise SettingError("{max_source_length}/{max_target_length} exceed the model's {positions} positions",
                               owner=Seq2SeqConfig, positions=model.config.encoder.max_position_embeddings)
        model = model.to(session.device)
        pairs = encode_pairs(train_pairs, tokenizer, cfg.max_source_length, cfg.max_target_length)
        info = session.info
        batches = PairBatches(pairs, tokenizer, cfg.batch_size, opts.seed, info.rank, info.world_size)
        heldout = encode_pairs(eval_pairs[:cfg.eval_samples], tokenizer, cfg.max_source_length,
                               cfg.max_target_length) if session.is_main else []
        return Built(Seq2SeqStage(cfg, model, tokenizer, batches, heldout), notes_after=[
            f"{len(pairs)} training pairs, {math.ceil(len(pairs) / cfg.batch_size)} batches an epoch"])
    return train(cfg, build, verb="seq2seq", inputs=inputs, hooks=hooks)

"""Batches for training: dynamic padding of token features, length buckets, and `EpochBatches`, the one
batch source every fine-tuning-like stage hands the engine.

A feature is a plain dict of Python lists (one list per model input row); padding happens per batch in
`collate`, so a batch is only as long as its longest row and the model unpads even that internally.
"""
from __future__ import annotations

import random
from typing import Any, Sequence

import torch

Feature = dict[str, Any]


def feature_length(f: Feature) -> int:
    ids = f["input_ids"]
    return max(len(r) for r in ids) if ids and isinstance(ids[0], list) else len(ids)


def _pad(rows: list[list[int]], length: int, value: int) -> list[list[int]]:
    return [r + [value] * (length - len(r)) for r in rows]


def collate(features: Sequence[Feature], pad_id: int = 0) -> dict[str, torch.Tensor]:
    """Pad a batch to its longest row: input_ids / token_type_ids / attention_mask (+ labels) as tensors.

    Token-level labels pad with -100; multiple-choice features ([C, L] each) pad to one length over all choices.
    """
    multi = isinstance(features[0]["input_ids"][0], list)
    length = max(feature_length(f) for f in features)
    batch: dict[str, torch.Tensor] = {}
    if multi:
        ids = [_pad(f["input_ids"], length, pad_id) for f in features]
        types = [_pad(f["token_type_ids"], length, 0) for f in features]
        mask = [_pad([[1] * len(r) for r in f["input_ids"]], length, 0) for f in features]
    else:
        ids = _pad([f["input_ids"] for f in features], length, pad_id)
        types = _pad([f["token_type_ids"] for f in features], length, 0)
        mask = _pad([[1] * len(f["input_ids"]) for f in features], length, 0)
    batch["input_ids"] = torch.tensor(ids, dtype=torch.long)
    batch["token_type_ids"] = torch.tensor(types, dtype=torch.long)
    batch["attention_mask"] = torch.tensor(mask, dtype=torch.long)
    if "labels" in features[0]:
        labels = [f["labels"] for f in features]
        if isinstance(labels[0], list):
            batch["labels"] = torch.tensor(_pad(labels, length, -100), dtype=torch.long)
        elif isinstance(labels[0], float):
            batch["labels"] = torch.tensor(labels, dtype=torch.float)
        else:
            batch["labels"] = torch.tensor(labels, dtype=torch.long)
    for key in ("start_positions", "end_positions"):
        if key in features[0]:
            batch[key] = torch.tensor([f[key] for f in features], dtype=torch.long)
    return batch


def length_bucketed_batches(lengths: Sequence[int], batch_size: int, shuffle: bool = True, seed: int = 0,
                            bucket_batches: int = 50) -> list[list[int]]:
    """Index batches of similar lengths (little padding). Training shuffles, then sorts inside chunks of
    `bucket_batches` batches and shuffles the batch order, so batches stay random but tight; evaluation
    sorts everything by length."""
    order = list(range(len(lengths)))
    if not shuffle:
        order.sort(key=lambda i: lengths[i])
        return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    rng = random.Random(seed)
    rng.shuffle(order)
    chunk = batch_size * bucket_batches
    batches = []
    for c in range(0, len(order), chunk):
        part = sorted(order[c:c + chunk], key=lambda i: lengths[i])
        batches.extend(part[i:i + batch_size] for i in range(0, len(part), batch_size))
    rng.shuffle(batches)
    return batches


def random_batches(n: int, batch_size: int, seed: int = 0) -> list[list[int]]:
    """Index batches of a seeded random order, as transformers' Trainer draws them: lengths play no part, so
    each batch pads to its longest row (which the model then unpads)."""
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return [order[i:i + batch_size] for i in range(0, n, batch_size)]


#: how `EpochBatches` groups training items: by length (less padding) or at random (the Trainer's default)
BATCH_ORDERS = ("length", "random")


class EpochBatches:
    """Batches of a training set, reshuffled every epoch: length-bucketed (`order="length"`) or drawn at random
    (`order="random"`); each rank takes its own share of the epoch's batches. The position (epoch, index) is all
    a resumed run needs to see the same batches again.

    Items are token features (padded by `collate`, with their indices as `idx`); a stage training on other
    items subclasses it with its own `item_length` and `make_batch`, and one that draws batches another way
    (pairs without a text twice in a batch, say) with its own `epoch_order`, `shard` and `no_batches`."""

    what = "training features"

    def __init__(self, items: Sequence[Any], batch_size: int, seed: int, pad_id: int = 0, rank: int = 0,
                 world_size: int = 1, order: str = "length") -> None:
        if order not in BATCH_ORDERS:
            raise ValueError(f"batch order {order!r}: expected one of {', '.join(BATCH_ORDERS)}")
        self.items, self.batch_size, self.seed, self.pad_id, self.order = items, batch_size, seed, pad_id, order
        self.rank, self.world_size = rank, world_size
        self.lengths = [self.item_length(item) for item in items]
        self.epoch, self.index = 0, 0
        self._batches = self._epoch_batches(0)
        if not self._batches:
            raise self.no_batches(0)

    def item_length(self, item: Any) -> int:
        return feature_length(item)

    def make_batch(self, indices: list[int]) -> Any:
        """The tensors of the batch at the current (epoch, index)."""
        return {**collate([self.items[i] for i in indices], self.pad_id), "idx": torch.tensor(indices)}

    def epoch_order(self, epoch: int) -> list[list[int]]:
        """The epoch's batches of item indices, before they are shared between ranks."""
        if self.order == "random":
            return random_batches(len(self.lengths), self.batch_size, seed=self.seed + epoch)
        return length_bucketed_batches(self.lengths, self.batch_size, shuffle=True, seed=self.seed + epoch)

    def shard(self, batches: list[list[int]]) -> list[list[int]]:
        """This rank's batches: every world_size-th one (each rank takes the same number of steps)."""
        usable = len(batches) // self.world_size * self.world_size
        return batches[self.rank:usable:self.world_size]

    def no_batches(self, epoch: int) -> Exception:
        """The error for an epoch that gives this rank no batch."""
        return ValueError(f"{len(self.items)} {self.what} give no batch of {self.batch_size} for {self.world_size} "
                          "processes")

    def _epoch_batches(self, epoch: int) -> list[list[int]]:
        return self.shard(self.epoch_order(epoch))

    @property
    def per_epoch(self) -> int:
        return len(self._batches)

    def next(self) -> Any:
        if self.index >= len(self._batches):
            self.epoch, self.index = self.epoch + 1, 0
            self._batches = self._epoch_batches(self.epoch)
            if not self._batches:
                raise self.no_batches(self.epoch)
        batch = self.make_batch(self._batches[self.index])
        self.index += 1
        return batch

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "index": self.index}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.index = int(state["epoch"]), int(state["index"])
        self._batches = self._epoch_batches(self.epoch)

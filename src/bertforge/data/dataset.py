"""`PretrainingDataset`: batches for the training loop, from a prepared corpus.

What it guarantees, and how:

* Each epoch serves a deterministic permutation of that epoch's examples, drawn from (seed, epoch).
* Rank ``r`` of ``w`` takes positions ``r, r + w, ...`` of the permutation, cut to the same count on every
  rank, so ranks see disjoint examples and step in lockstep.
* The position is ``(epoch, index)`` with ``index`` counting examples already served on this rank;
  `state_dict` / `load_state_dict` resume at exactly the next example, because everything an example depends
  on (its plan row, its masks) is a function of seed, epoch and its position in the plan.
* Static masking (BERT): an epoch is `dupe_factor` differently drawn and masked copies of the corpus, the
  same copies every epoch. Dynamic masking (RoBERTa): one copy per epoch, with fresh pairs and masks.
* Batches are padded to their longest example (the model has an unpadded path), built with numpy and
  converted to torch at the end.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import numpy as np
import torch

from bertforge.data.examples import build_plan
from bertforge.data.hashing import combine
from bertforge.data.masking import MaskingConfig, VocabTables, mask_tokens
from bertforge.data.objectives import OBJECTIVE_TABLE
from bertforge.data.shards import CorpusSplit, check_vocab, load_tokenizer, vocab_tokens

OBJECTIVES = tuple(name for name, o in OBJECTIVE_TABLE.items() if o.reads is None)  # the batches it makes
PACKINGS = ("full-sentences", "doc-sentences")
_STATIC, _DYNAMIC, _ORDER, _PLAN = 0x57A71C, 0xD1A, 0x0D0E, 0x91A4


class PretrainingDataset:
    """Batches of pre-training examples from `data_dir` (a folder written by `prepare_corpus`).

    objective: "mlm+nsp" (BERT), "mlm+sop" (ALBERT), "mlm" (RoBERTa; `packing` "full-sentences" or
    "doc-sentences") or "ltr" (left-to-right LM: ``labels[i]`` is the token at ``i + 1``, for a causal mask;
    packed like "mlm"). Batches hold LongTensors ``input_ids``, ``token_type_ids``, ``attention_mask``,
    ``labels`` (-100 where nothing is predicted) and, for nsp/sop, ``next_sentence_label`` [B]
    (0 = B follows A / in order, 1 = random / swapped).
    """

    def __init__(self, data_dir: str | Path, tokenizer: Any, *, objective: str = "mlm+nsp",
                 packing: str = "full-sentences", max_seq_length: int = 128, batch_size: int = 32,
                 masking: MaskingConfig | None = None, short_seq_prob: float = 0.1, seed: int = 0,
                 rank: int = 0, world_size: int = 1, split: str = "train", drop_last: bool = False) -> None:
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
        if packing not in PACKINGS:
            raise ValueError(f"packing must be one of {PACKINGS}, got {packing!r}")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in [0, world_size={world_size})")
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.tokenizer = load_tokenizer(tokenizer)
        self.corpus = CorpusSplit(data_dir, split)
        check_vocab(data_dir, self.corpus.manifest, self.tokenizer)
        self.objective, self.packing, self.split = objective, packing, split
        self.masking = masking if masking is not None else MaskingConfig()
        self.short_seq_prob, self.seed, self.rank, self.world_size = short_seq_prob, int(seed), rank, world_size
        self.batch_size, self.drop_last = batch_size, drop_last
        tok = self.tokenizer
        self.pad_id, self.cls_id, self.sep_id = tok.pad_token_id, tok.cls_token_id, tok.sep_token_id
        self.tables = VocabTables.for_tokenizer(tok, vocab_tokens(tok))
        # Plain ndarray views of the memory maps: slicing them is much cheaper than slicing np.memmap.
        self._tokens = [s.tokens.view(np.ndarray) for s in self.corpus.shards]
        self._doc_starts = [s.document_token_starts() for s in self.corpus.shards]
        self._plans: dict[tuple, np.ndarray] = {}
        self._cached: tuple | None = None
        self.epoch, self.index = 0, 0
        self.max_seq_length = 0
        self.set_max_seq_length(max_seq_length)

    # ---- what an epoch holds -----------------------------------------------------------------------------
    @property
    def _kind(self) -> str:
        return OBJECTIVE_TABLE[self.objective].sentence_task or self.packing

    @property
    def _static(self) -> bool:
        return self.masking.mode == "static" and not OBJECTIVE_TABLE[self.objective].left_to_right

    def _plan_for_round(self, round_: int) -> np.ndarray:
        if self._kind not in ("nsp", "sop"):
            round_ = 0  # packing has no randomness: every round is the same layout
        key = (self.max_seq_length, round_)
        if key not in self._plans:
            if not self._static and len(self._plans) >= 2:
                self._plans.pop(next(iter(self._plans)))  # dynamic: keep only recent epochs
            plan_seed = int(combine(self.seed, _PLAN, round_)) & (2 ** 62 - 1)
            self._plans[key] = build_plan(self.corpus, self._kind, self.max_seq_length, seed=plan_seed,
                                          short_seq_prob=self.short_seq_prob)
        return self._plans[key]

    def epoch_plan(self, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        """(plan rows, 64-bit example keys) of every example in `epoch`, before shuffling."""
        plan, keys, _ = self._epoch(epoch)
        return plan, keys

    def example_indices(self, epoch: int) -> np.ndarray:
        """Positions in `epoch_plan(epoch)` that this rank serves, in serving order."""
        return self._epoch(epoch)[2]

    def _epoch(self, epoch: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        cache_key = (epoch, self.max_seq_length)
        if self._cached is not None and self._cached[0] == cache_key:
            return self._cached[1]
        if self._static:
            plans = [self._plan_for_round(r) for r in range(self.masking.dupe_factor)]
            plan = np.concatenate(plans) if len(plans) > 1 else plans[0]
            keys = combine(self.seed, _STATIC, self.max_seq_length, np.arange(len(plan), dtype=np.uint64))
        else:
            plan = self._plan_for_round(epoch)
            keys = combine(self.seed, _DYNAMIC, epoch, np.arange(len(plan), dtype=np.uint64))
        order = np.random.default_rng([self.seed, _ORDER, epoch]).permutation(len(plan))
        indices = order[self.rank::self.world_size][:len(plan) // self.world_size]
        self._cached = (cache_key, (plan, keys, indices))
        return plan, keys, indices

    @property
    def examples_per_epoch(self) -> int:
        """Examples this rank serves per epoch."""
        return len(self.example_indices(self.epoch))

    def __len__(self) -> int:
        """Batches per epoch on this rank."""
        n = self.examples_per_epoch
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    # ---- position ---------------------------------------------------------------------------------------
    def set_max_seq_length(self, max_seq_length: int) -> None:
        """Build examples for a new length (two-phase schedules: 128, then 512). A run switching mid-epoch
        starts the next epoch, since the old positions mean nothing in the new layout."""
        if max_seq_length < 8:
            raise ValueError(f"max_seq_length must be at least 8, got {max_seq_length}")
        if max_seq_length == self.max_seq_length:
            return
        if self.index > 0:
            self.epoch, self.index = self.epoch + 1, 0
        self.max_seq_length = int(max_seq_length)
        self.max_predictions = self.masking.predictions_for(self.max_seq_length)
        self._plans = {k: v for k, v in self._plans.items() if k[0] == self.max_seq_length}

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "index": self.index, "max_seq_length": self.max_seq_length,
                "seed": self.seed, "objective": self.objective, "world_size": self.world_size,
                "batch_size": self.batch_size}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for name in ("seed", "objective", "world_size"):
            if state[name] != getattr(self, name):
                raise ValueError(f"cannot resume: saved {name}={state[name]!r}, this dataset has "
                                 f"{getattr(self, name)!r}")
        self.set_max_seq_length(int(state["max_seq_length"]))
        self.epoch, self.index = int(state["epoch"]), int(state["index"])

    # ---- serving ----------------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        """Batches from the current position to the end of the epoch; then the position moves to the next
        epoch, so ``for epoch ...: for batch in dataset`` and an endless ``while True`` loop both work."""
        epoch = self.epoch
        plan, keys, indices = self._epoch(epoch)
        end = len(indices) - (len(indices) % self.batch_size if self.drop_last else 0)
        while self.index < end and self.epoch == epoch:
            chosen = indices[self.index:self.index + self.batch_size]
            batch = self.collate(plan[chosen], keys[chosen])
            self.index += len(chosen)
            yield batch
        if self.epoch == epoch:
            self.epoch, self.index = epoch + 1, 0

    def collate(self, rows: np.ndarray, keys: np.ndarray) -> dict[str, torch.Tensor]:
        """Turn plan rows into a padded batch (padded to the longest row)."""
        batch = len(rows)
        shard, a0, a1, b0, b1, label = rows.T
        pair = b0 >= 0
        a_len, b_len = a1 - a0, np.where(pair, b1 - b0, 0)
        seps = [np.empty(0, np.int64)] * batch      # document starts inside a packed span
        if not pair.all():
            for r in np.flatnonzero(~pair):
                starts = self._doc_starts[shard[r]]
                lo, hi = np.searchsorted(starts, [a0[r] + 1, a1[r]])
                seps[r] = starts[lo:hi]
        n_seps = np.fromiter(map(len, seps), np.int64, batch)
        lengths = np.where(pair, 3 + a_len + b_len, 2 + a_len + n_seps)
        width = int(lengths.max())
        ids = np.full((batch, width), self.pad_id, dtype=np.int64)
        ids[:, 0] = self.cls_id
        for r in range(batch):
            tokens = self._tokens[shard[r]]
            la = a_len[r]
            if pair[r]:
                lb = b_len[r]
                ids[r, 1:1 + la] = tokens[a0[r]:a1[r]]
                ids[r, 2 + la:2 + la + lb] = tokens[b0[r]:b1[r]]
                ids[r, 1 + la] = ids[r, 2 + la + lb] = self.sep_id
            else:
                span = tokens[a0[r]:a1[r]]
                if n_seps[r]:
                    span = np.insert(span.astype(np.int64), seps[r] - a0[r], self.sep_id)
                ids[r, 1:1 + len(span)] = span
                ids[r, 1 + len(span)] = self.sep_id
        positions = np.arange(width)[None, :]
        attention = positions < lengths[:, None]
        token_types = pair[:, None] & (positions >= (2 + a_len)[:, None]) & attention
        if OBJECTIVE_TABLE[self.objective].left_to_right:
            labels = np.full_like(ids, -100)
            labels[:, :-1] = np.where(positions[:, 1:] < lengths[:, None], ids[:, 1:], -100)
            inputs = ids
        else:
            inputs, labels = mask_tokens(ids, lengths, keys, self.masking, self.max_predictions, self.tables)
        out = {
            "input_ids": torch.from_numpy(inputs),
            "token_type_ids": torch.from_numpy(token_types.astype(np.int64)),
            "attention_mask": torch.from_numpy(attention.astype(np.int64)),
            "labels": torch.from_numpy(labels),
        }
        if OBJECTIVE_TABLE[self.objective].sentence_task:
            out["next_sentence_label"] = torch.from_numpy(label.astype(np.int64))
        return out

"""bertforge's embedding training step against sentence-transformers', part by part, on the same batches.

One process, one thread by default, all-MiniLM-L6-v2 fine-tuned with MultipleNegativesRankingLoss (scale 20)
on question -> paragraph pairs (`experiments/squad_retrieval.py`'s train.jsonl), batches drawn by bertforge's
no-duplicates sampler. Each side has its own copy of the same weights and its own fused AdamW and takes one
step per batch, the two sides taking turns batch by batch (so drift on a shared machine hits both alike). Each
step is split into its parts, timed in CPU seconds of the (only) thread:

* tokenise: texts -> padded tensors (bertforge: anchors and positives in one call, as `train-embeddings`
  does; sentence-transformers: one call per column, as its data collator does);
* forward: encoder + pooling + loss (sentence-transformers' `MultipleNegativesRankingLoss` module);
* backward;
* optimizer: gradient clipping, AdamW, zero_grad.

The forward + backward share of a step bounds what any trainer can save by changing the rest; the ratio of
the two sides' forward + backward is what the model path (unpadded attention, cheaper dropout) buys.

    python benchmarks/bench_embedding_train.py --pairs ../runs/squad-retrieval/train.jsonl [--steps 8] [--threads 1]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from common import machine_info, markdown_table, median, minilm_folder, start_process  # noqa: E402

from bertforge.model.auto import AutoModel  # noqa: E402
from bertforge.tasks.embedding.data import read_pairs  # noqa: E402
from bertforge.tasks.embedding.losses import in_batch_negatives  # noqa: E402
from bertforge.tasks.embedding.pooling import sentence_vectors  # noqa: E402
from bertforge.tasks.embedding.train import PairBatches  # noqa: E402
from bertforge.tokenization import load_tokenizer  # noqa: E402
from bertforge.training.optim import build_optimizer  # noqa: E402

PARTS = ("tokenise", "forward", "backward", "optimizer")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class Clock:
    """CPU seconds of this thread in each named part of one step (with one torch thread the step runs on this
    thread alone, and CPU time, unlike wall-clock, does not count the time other work on the machine takes)."""

    def __init__(self) -> None:
        self.parts: dict[str, float] = {}
        self.tokens = 0  # token rows through the encoder's layers
        self._last = time.thread_time()

    def lap(self, name: str) -> None:
        now = time.thread_time()
        self.parts[name] = now - self._last
        self._last = now


def finish(loss: torch.Tensor, model: torch.nn.Module, optimizer: torch.optim.Optimizer, clock: Clock) -> dict:
    """The rest of a step, the same on both sides: backward, clipping at 1, AdamW, zero_grad."""
    loss.backward()
    clock.lap("backward")
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    clock.lap("optimizer")
    return {**clock.parts, "tokens": clock.tokens}


def bertforge_side(folder: str, lr: float, max_length: int):
    """One step of `train-embeddings`' stage: tokenise both columns at once, encode, pool, in-batch negatives."""
    model = AutoModel.from_pretrained(folder).train()
    tokenizer = load_tokenizer(folder)
    optimizer = build_optimizer(model, lr)

    def step(anchors: list[str], positives: list[str]) -> dict[str, float]:
        clock = Clock()
        enc = tokenizer(anchors + positives, padding=True, truncation=True, max_length=max_length,
                        return_tensors="pt")
        clock.lap("tokenise")
        inputs = {k: enc[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in enc}
        clock.tokens = int(enc["attention_mask"].sum())  # unpadded: the layers see the real tokens only
        vectors = sentence_vectors(model(**inputs).last_hidden_state, inputs["attention_mask"], "mean", True)
        loss, _ = in_batch_negatives(*vectors.split(len(anchors)), scale=20.0)
        clock.lap("forward")
        return finish(loss, model, optimizer, clock)

    return step


def sentence_transformers_side(folder: str, lr: float, max_length: int):
    """One step as sentence-transformers' trainer takes it: its collator tokenises each column, its loss module
    encodes them, the same fused AdamW (BERT's decay groups) steps."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    model = SentenceTransformer(folder, device="cpu")
    model.max_seq_length = max_length
    model.train()
    loss_fn = MultipleNegativesRankingLoss(model, scale=20.0)
    optimizer = build_optimizer(model, lr)

    def step(anchors: list[str], positives: list[str]) -> dict[str, float]:
        clock = Clock()
        features = [model.tokenize(anchors), model.tokenize(positives)]
        clock.lap("tokenise")
        clock.tokens = sum(int(f["input_ids"].numel()) for f in features)  # each column padded to its longest
        loss = loss_fn(features, None)
        clock.lap("forward")
        return finish(loss, model, optimizer, clock)

    return step


def padded_tokens(pairs: Path, folder: str, batch_size: int, max_length: int, count: int) -> dict[str, int]:
    """Token rows through the layers over `count` batches, without running the model: bertforge's real tokens
    (unpadded) and sentence-transformers' (each column padded to its longest text)."""
    tokenizer = load_tokenizer(folder)
    batches = PairBatches(read_pairs(pairs), batch_size, seed=0)
    totals = {"bertforge": 0, "sentence-transformers": 0}
    for _ in range(min(count, batches.per_epoch)):
        batch = batches.next()
        for column in ([e.anchor for e in batch], [e.positive for e in batch]):
            lengths = [len(ids) for ids in tokenizer(column, truncation=True, max_length=max_length)["input_ids"]]
            totals["bertforge"] += sum(lengths)
            totals["sentence-transformers"] += max(lengths) * len(lengths)
    return totals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=Path, required=True, help="JSONL/CSV/TSV of (anchor, positive) pairs")
    parser.add_argument("--model", default=None, help="encoder folder (default: all-MiniLM-L6-v2 from PyPI)")
    parser.add_argument("--steps", type=int, default=8, help="timed steps per side (after --warmup)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-seq-length", type=int, default=128)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--count-batches", type=int, default=500, help="batches whose padding is counted")
    parser.add_argument("--out", type=Path, default=None, help="write the parts as JSON here")
    args = parser.parse_args(argv)
    start_process(args.threads)
    folder = args.model or str(minilm_folder())
    batches = PairBatches(read_pairs(args.pairs), args.batch_size, seed=0)
    sides = {"bertforge": bertforge_side(folder, args.lr, args.max_seq_length),
             "sentence-transformers": sentence_transformers_side(folder, args.lr, args.max_seq_length)}
    parts: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
    for i in range(args.warmup + args.steps):
        batch = batches.next()
        anchors, positives = [e.anchor for e in batch], [e.positive for e in batch]
        order = list(sides) if i % 2 == 0 else list(reversed(sides))
        for name in order:
            torch.manual_seed(i)  # the same dropout draws are not needed, only the same work
            timed = sides[name](anchors, positives)
            if i >= args.warmup:
                parts[name].append(timed)
        log(f"step {i + 1}/{args.warmup + args.steps}: " + ", ".join(
            f"{n} {sum(parts[n][-1][p] for p in PARTS) if parts[n] else 0:.3f} CPU s" for n in sides))
    medians = {name: {p: median([s[p] for s in steps]) for p in PARTS} for name, steps in parts.items()}
    totals = {name: median([sum(s[p] for p in PARTS) for s in steps]) for name, steps in parts.items()}
    tokens = {name: sum(s["tokens"] for s in steps) for name, steps in parts.items()}
    rows = [[p, *(f"{medians[n][p] * 1000:.0f}" for n in sides),
             f"{medians['sentence-transformers'][p] / max(medians['bertforge'][p], 1e-9):.2f}x"] for p in PARTS]
    rows.append(["step", *(f"{totals[n] * 1000:.0f}" for n in sides),
                 f"{totals['sentence-transformers'] / totals['bertforge']:.2f}x"])
    model_share = {n: (medians[n]["forward"] + medians[n]["backward"]) / totals[n] for n in sides}
    print(markdown_table(["part (median CPU ms)", *sides, "st / bertforge"], rows))
    print("\nforward + backward share of the step: " + ", ".join(f"{n} {v:.1%}" for n, v in model_share.items()))
    print("token rows through the layers: " + ", ".join(f"{n} {t}" for n, t in tokens.items())
          + f" (sentence-transformers / bertforge {tokens['sentence-transformers'] / tokens['bertforge']:.2f}x: "
          "the linear layers' work, most of forward + backward, scales with these)")
    counted = padded_tokens(args.pairs, folder, args.batch_size, args.max_seq_length, args.count_batches)
    print(f"over {args.count_batches} batches: " + ", ".join(f"{n} {t}" for n, t in counted.items())
          + f" token rows ({counted['sentence-transformers'] / counted['bertforge']:.2f}x)")
    print(json.dumps(machine_info()))
    if args.out is not None:
        args.out.write_text(json.dumps({"medians": medians, "totals": totals, "model_share": model_share,
                                        "tokens": tokens, "counted_tokens": counted,
                                        "settings": {k: str(v) for k, v in vars(args).items()},
                                        "machine": machine_info()}, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

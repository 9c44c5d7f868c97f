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
the two sides' forward + backward is what the model path (unpadded attention, cheaper dropout) buys. The matrix
products bound the step ratio: with the same work per token, bertforge's step costs at least sentence-transformers'
matrix products (their share of its step, from torch.profiler on `--profile-steps` further steps) divided by the
token-row ratio (over `--count-batches` batches), so the ratio is at most token-row ratio / share, even if every
other operation cost nothing.

    python benchmarks/bench_embedding_train.py --pairs ../runs/squad-retrieval/train.jsonl [--steps 8] [--threads 1] \\
        [--records DIR]
"""
from __future__ import annotations

import argparse
import json
import os
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
SIDES = ("bertforge", "sentence-transformers")
# the operators of the matrix products: the linear layers (mm, addmm) and attention's batched products (bmm)
MATRIX_PRODUCTS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")
GROUP = "bench-embedding-train"
# the published table's rows: part -> its label; "step" is the whole step (the median of the steps' sums)
LABELS = {"tokenise": "tokenise", "forward": "forward (encoder, pooling, loss)", "backward": "backward",
          "optimizer": "clipping, AdamW, zero_grad", "step": "step"}


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


def matrix_product_share(step, batches: PairBatches, count: int) -> float:
    """The share of `count` steps' operator time (torch.profiler's self CPU time, all operators) spent in the
    matrix products (`MATRIX_PRODUCTS`), on the next `count` batches."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for i in range(count):
            batch = batches.next()
            torch.manual_seed(10**6 + i)
            step([e.anchor for e in batch], [e.positive for e in batch])
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    return sum(e.self_cpu_time_total for e in events if e.key in MATRIX_PRODUCTS) / max(total, 1e-9)


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
    parser.add_argument("--profile-steps", type=int, default=1,
                        help="sentence-transformers steps profiled for its matrix products' share (0: no bound)")
    parser.add_argument("--out", type=Path, default=None, help="write the parts as JSON here")
    parser.add_argument("--records", default=None, metavar="DIR",
                        help=f"also write the table and the bound as results-store records (group {GROUP}) into DIR")
    args = parser.parse_args(argv)
    start_process(args.threads)
    load = [os.getloadavg()[0]]
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
    token_ratio = counted["sentence-transformers"] / counted["bertforge"]
    print(f"over {args.count_batches} batches: " + ", ".join(f"{n} {t}" for n, t in counted.items())
          + f" token rows ({token_ratio:.2f}x)")
    share = bound = None
    if args.profile_steps > 0:
        share = matrix_product_share(sides["sentence-transformers"], batches, args.profile_steps)
        bound = token_ratio / share
        print(f"matrix products: {share:.1%} of sentence-transformers' step (torch.profiler, {args.profile_steps} "
              f"step(s)); the step ratio is at most {token_ratio:.2f} / {share:.2f} = {bound:.2f}x")
    load.append(os.getloadavg()[0])
    print(json.dumps(machine_info()))
    if args.out is not None:
        args.out.write_text(json.dumps({"medians": medians, "totals": totals, "model_share": model_share,
                                        "tokens": tokens, "counted_tokens": counted, "matrix_product_share": share,
                                        "bound": bound, "settings": {k: str(v) for k, v in vars(args).items()},
                                        "machine": machine_info()}, indent=2) + "\n", encoding="utf-8")
    if args.records:
        from bertforge.measuring import portable_command
        from bertforge.results_store import write_records
        command = portable_command("benchmarks/bench_embedding_train.py", list(sys.argv[1:] if argv is None else argv))
        note = f"CPU time of the thread; load average {min(load):.0f}-{max(load):.0f}"
        print(write_records(GROUP, make_records(medians, totals, bound, args, command, note), args.records,
                            tables={f"{GROUP}-mnrl-step": TABLE}))
    return 0


def record_id(part: str, side: str) -> str:
    return f"{GROUP}/mnrl-step/{part}/{'st-bertforge' if side == 'ratio' else side}"


TABLE = {"header": ["part (CPU ms)", *SIDES, "st / bertforge"], "align": ["---", "---:", "---:", "---:"],
         "rows": [[label, *(f"{{{record_id(part, side)}|bare}}" for side in SIDES), f"{{{record_id(part, 'ratio')}}}"]
                  for part, label in LABELS.items() if part != "step"]
         + [["**step**", *(f"**{{{record_id('step', side)}|bare}}**" for side in SIDES),
             f"**{{{record_id('step', 'ratio')}}}**"]]}


def make_records(medians: dict[str, dict[str, float]], totals: dict[str, float], bound: float | None, args,
                 command: str, note: str = "") -> list:
    """The table's records: each side's median CPU ms per part and per step (the median of the steps' sums), and
    sentence-transformers' over bertforge's; and the bound the matrix products set on the step ratio (when
    profiled)."""
    import dataclasses
    from bertforge.results_store import Record
    data = f"the (anchor, positive) pairs of {args.pairs}, batches of {args.batch_size}, {args.max_seq_length} tokens"
    records = []
    for part, label in LABELS.items():
        seconds = {side: totals[side] if part == "step" else medians[side][part] for side in SIDES}
        values = {**{side: 1000 * seconds[side] for side in SIDES},
                  "ratio": seconds["sentence-transformers"] / max(seconds["bertforge"], 1e-9)}
        for side, value in values.items():
            shown = "st / bertforge" if side == "ratio" else side
            records.append(Record.measured(
                record_id(part, side), value, "x" if side == "ratio" else "ms",
                f"bench_embedding_train, one MNRL step, batch {args.batch_size}: {label}, {shown}", data,
                seeds=args.steps, command=command, digits=2 if side == "ratio" else 0, note=note))
    if bound is not None:
        records.append(Record.measured(
            f"{GROUP}/mnrl-step/bound", bound, "x",
            "upper bound of the MNRL step ratio if every operation but the matrix products cost nothing",
            f"{data}; token rows over {args.count_batches} batches, the matrix products' share of "
            f"{args.profile_steps} profiled sentence-transformers step(s)", command=command, digits=2, note=note))
    return [dataclasses.replace(record, threads=args.threads) for record in records]  # the run's torch threads


if __name__ == "__main__":
    raise SystemExit(main())

"""End-to-end pre-training throughput: bertforge vs a plain `transformers` loop, on the same sentence pairs.

One training step = fetch a batch (build + mask, or collate + mask) -> forward -> backward -> clip -> AdamW.
Both sides see the same [CLS] A [SEP] B [SEP] pairs in the same order (taken from bertforge's epoch plan),
the same model shape, batch size and masking rate, start from one state dict (bertforge's initial weights,
saved and loaded by `transformers`; the script stops unless weights and an eval forward pass agree) and train
with the same `torch.optim.AdamW` (`build_optimizer`: same decay groups, same `fused` setting). They take
turns (interleaved repeats, medians) next to the reference matmul of `common.PEAK_GEMM`, which measures what
this machine's GEMM can do right now, so utilisation is the *useful* FLOPs (real tokens, masked rows only,
`bertforge.model.count_flops`) over that peak.

    python benchmarks/bench_pretrain.py --vocab VOCAB_DIR [--data PREPARED_DIR] [--configs mini,base] [--ttq 300]
"""
from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import torch

from bertforge.measuring import prepare_slice
from common import (assert_same_start, interleave, machine_info,  # noqa: E402
                    markdown_table, median, peak_flops, peak_gemm, same_optimizer, save_initial_weights,
                    start_process)

# label -> (preset, batch size, steps per repeat, repeats)
CONFIGS = {"mini": ("mini", 32, 6, 5), "base": ("base", 8, 2, 3)}


class Timers:
    """Seconds per phase of a step, summed: where the time goes."""

    def __init__(self) -> None:
        self.total: dict[str, float] = defaultdict(float)
        self._t = 0.0

    def start(self) -> None:
        self._t = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.total[name] += now - self._t
        self._t = now


class Contender:
    """`steps` training steps per call; counts real tokens and useful FLOPs of what it trained on."""

    precision = "fp32"  # or "bf16": the forward pass under CPU bf16 autocast (what `--precision bf16` runs)

    def __init__(self, steps: int, config) -> None:
        self.steps, self.config = steps, config
        self.timers = Timers()
        self.tokens: list[int] = []
        self.flops: list[float] = []

    def account(self, attention_mask: torch.Tensor, labels: torch.Tensor) -> None:
        from bertforge.model import count_flops
        lengths = attention_mask.sum(1).tolist()
        self.tokens[-1] += int(sum(lengths))
        masked = int((labels != -100).sum())
        self.flops[-1] += count_flops(self.config, lengths, n_masked=masked, pooler=True, nsp=True, training=True,
                                      last_layer_rows=masked + len(lengths))

    def train_on(self, batch: dict) -> None:
        """The timed step both loops share: forward, backward, clip, optimizer, token accounting."""
        t = self.timers
        with (torch.autocast("cpu", dtype=torch.bfloat16) if self.precision == "bf16" else contextlib.nullcontext()):
            loss = self.model(**batch).loss
        t.lap("forward")
        loss.backward()
        t.lap("backward")
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        t.lap("clip + optimizer")
        self.account(batch["attention_mask"], batch["labels"])

    def __call__(self) -> None:
        self.tokens.append(0)
        self.flops.append(0.0)
        for _ in range(self.steps):
            self.step()


class Bertforge(Contender):
    def __init__(self, steps, config, data_dir, tokenizer, batch_size, seq_len, init: Path,
                 mask_rate: float = 0.15):
        super().__init__(steps, config)
        from bertforge.data import MaskingConfig, PretrainingDataset
        from bertforge.model import BertForPreTraining
        self.model = BertForPreTraining.from_pretrained(init).train()
        self.optimizer = same_optimizer(self.model, 1e-4)
        self.data = PretrainingDataset(data_dir, tokenizer, batch_size=batch_size, max_seq_length=seq_len, seed=0,
                                       masking=MaskingConfig(rate=mask_rate))

    def step(self) -> None:
        from bertforge.pretraining.pretrain import next_batch
        t = self.timers
        t.start()
        batch = next_batch(self.data)
        t.lap("data (build + mask)")
        self.train_on(batch)


class Transformers(Contender):
    def __init__(self, steps, config, data_dir, tokenizer, batch_size, seq_len, vocab, init: Path):
        super().__init__(steps, config)
        import transformers
        from bertforge.data import PretrainingDataset
        self.model = transformers.BertForPreTraining.from_pretrained(init).train()
        self.optimizer = same_optimizer(self.model, 1e-4)
        hf_tok = transformers.BertTokenizerFast.from_pretrained(vocab)
        self.collator = transformers.DataCollatorForLanguageModeling(hf_tok, mlm_probability=0.15)
        self.examples = self._pairs(PretrainingDataset(data_dir, tokenizer, batch_size=batch_size,
                                                       max_seq_length=seq_len, seed=0), tokenizer)
        self.batch_size, self.cursor = batch_size, 0

    @staticmethod
    def _pairs(data, tok) -> list[dict]:
        """bertforge's first epoch, in its order, as unmasked feature dicts (what HF's collator takes)."""
        plan, _ = data.epoch_plan(0)
        examples = []
        for shard, a0, a1, b0, b1, label in plan[data.example_indices(0)]:
            tokens = data._tokens[shard]
            a, b = tokens[a0:a1].tolist(), tokens[b0:b1].tolist()
            ids = [tok.cls_token_id] + a + [tok.sep_token_id] + b + [tok.sep_token_id]
            examples.append({"input_ids": ids, "token_type_ids": [0] * (len(a) + 2) + [1] * (len(b) + 1),
                             "next_sentence_label": int(label)})
        return examples

    def check_inputs(self, n: int = 8) -> dict[str, torch.Tensor]:
        """The first `n` pairs, padded and unmasked: what `assert_same_start` runs both models on."""
        rows = self.examples[:n]
        width = max(len(r["input_ids"]) for r in rows)
        def pad(key: str) -> torch.Tensor:
            return torch.tensor([r[key] + [0] * (width - len(r[key])) for r in rows])
        return {"input_ids": pad("input_ids"), "token_type_ids": pad("token_type_ids"),
                "attention_mask": torch.tensor([[1] * len(r["input_ids"]) + [0] * (width - len(r["input_ids"]))
                                                for r in rows])}

    def step(self) -> None:
        t = self.timers
        t.start()
        chunk = self.examples[self.cursor:self.cursor + self.batch_size]
        self.cursor = (self.cursor + self.batch_size) % (len(self.examples) - self.batch_size)
        batch = self.collator(chunk)
        t.lap("data (build + mask)")
        self.train_on(batch)


def run_config(label: str, args, data_dir: Path, tokenizer) -> tuple[list, list]:
    from bertforge.config import BertConfig, dropout_overrides
    preset, batch_size, steps, repeats = CONFIGS[label]
    batch_size = args.batch_size or batch_size
    steps = args.steps or steps
    repeats = args.repeats or repeats
    config = BertConfig.preset(preset, vocab_size=len(tokenizer.vocab), **dropout_overrides(args.dropout))
    init = save_initial_weights(config, args.workdir / f"init-{label}")
    candidates: dict = {}
    for precision in args.precisions:
        ours = Bertforge(steps, config, data_dir, tokenizer, batch_size, args.seq_len, init)
        theirs = Transformers(steps, config, data_dir, tokenizer, batch_size, args.seq_len, args.vocab, init)
        ours.precision = theirs.precision = precision
        diffs = assert_same_start(ours.model, theirs.model, theirs.check_inputs(), label)
        print(f"{label}: same start, max |diff| " + ", ".join(f"{k} {v:.1e}" for k, v in diffs.items()),
              file=sys.stderr)
        candidates[("bertforge", precision)] = ours
        candidates[("transformers", precision)] = theirs
    gemm = peak_gemm()
    print(f"{label}: batch {batch_size}, seq {args.seq_len}, {steps} steps x {repeats} repeats", file=sys.stderr)
    named = {f"{who} {precision}": c for (who, precision), c in candidates.items()}
    times = interleave({**named, "gemm": gemm}, repeats, warmup=1, log=lambda m: print(m, file=sys.stderr))
    peak = peak_flops(median(times["gemm"]))
    rows, profile = [], []
    rates = {}
    for (name, precision), who in candidates.items():
        # skip the warm-up call's counts (index 0)
        key = f"{name} {precision}"
        tok_s = median([n / s for n, s in zip(who.tokens[1:], times[key])])
        flop_s = median([f / s for f, s in zip(who.flops[1:], times[key])])
        rates[(name, precision)] = tok_s
        rows.append([label, name, precision, f"{tok_s:,.0f}", f"{flop_s / 1e9:.1f}", f"{100 * flop_s / peak:.1f}%"])
        total = sum(who.timers.total.values())
        profile.append([label, name, precision] + [f"{100 * v / total:.0f}%" for v in who.timers.total.values()])
    for row in rows:
        name, precision = row[1], row[2]
        row.append(f"**{rates[(name, precision)] / rates[('transformers', precision)]:.2f}x**")
        base = rates.get((name, "fp32"))
        row.append(f"{rates[(name, precision)] / base:.2f}x" if base else "—")
        row.append(f"{peak / 1e9:.0f}")
    return rows, profile


def heldout_mlm_loss(who, data_dir: Path, tokenizer, batches: int = 8) -> float:
    """Mean MLM loss over the same masked held-out tokens, whichever implementation `who.model` is."""
    from bertforge.data import PretrainingDataset
    model = who.model
    data = PretrainingDataset(data_dir, tokenizer, batch_size=32, max_seq_length=128, seed=0, split="heldout")
    model.eval()
    total = count = 0.0
    with torch.no_grad():
        for i, batch in enumerate(data):
            if i == batches:
                break
            n = int((batch["labels"] != -100).sum())
            out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                        token_type_ids=batch["token_type_ids"], labels=batch["labels"])
            mlm = getattr(out, "mlm_loss", None)
            if mlm is None:  # transformers: recompute the MLM part of its summed loss
                logits = out.prediction_logits[batch["labels"] != -100]
                mlm = torch.nn.functional.cross_entropy(logits, batch["labels"][batch["labels"] != -100])
            total += float(mlm) * n
            count += n
    model.train()
    return total / count


TTQ_DEFAULT_LOOPS = "transformers,bertforge,bertforge:lr=1e-3"
TTQ_BASE = {"lr": 5e-4, "mask": 0.15, "dropout": None}  # the shared recipe; dropout None = the preset's 0.1


def parse_ttq_loops(spec: str) -> list[tuple[str, str, dict]]:
    """'transformers,bertforge,bertforge:mask=0.3:dropout=0' -> [(name, implementation, recipe)].

    Each loop starts from the shared recipe and overrides what it names: `lr` (peak), `mask` (masking rate
    of the training batches; held-out loss is always measured on the same 15 % masks) and `dropout` (hidden
    and attention dropout; 0 lets CPU attention take SDPA's fused flash kernel). Only bertforge loops take
    overrides: transformers is the fixed reference.
    """
    loops = []
    for item in filter(None, (part.strip() for part in spec.split(","))):
        kind, *overrides = item.split(":")
        if kind not in ("transformers", "bertforge"):
            raise SystemExit(f"--ttq-loops: unknown implementation {kind!r} in {item!r} "
                             "(expected transformers or bertforge)")
        if kind == "transformers" and overrides:
            raise SystemExit(f"--ttq-loops: {item!r}: the transformers loop is the reference and takes no overrides")
        recipe = dict(TTQ_BASE)
        for override in overrides:
            key, sep, value = override.partition("=")
            if key not in TTQ_BASE or not sep:
                raise SystemExit(f"--ttq-loops: {item!r}: expected key=value with key in {sorted(TTQ_BASE)}, "
                                 f"got {override!r}")
            try:
                recipe[key] = float(value)
            except ValueError:
                raise SystemExit(f"--ttq-loops: {item!r}: {key} must be a number, got {value!r}") from None
        name = "transformers" if kind == "transformers" else (
            "bertforge, same recipe" if not overrides else "bertforge, " + ", ".join(
                f"{k} {recipe[k]:g}" for k in TTQ_BASE if recipe[k] != TTQ_BASE[k]))
        loops.append((name, kind, recipe))
    if [kind for _, kind, _ in loops].count("transformers") != 1:
        raise SystemExit("--ttq-loops must hold exactly one transformers loop: its final loss is the target")
    return loops


def budget_lr(peak: float, spent: float, budget: float, warmup: float = 0.05) -> float:
    """Warm up over the first 5% of the wall-clock budget, then decay linearly to zero at its end."""
    fraction = min(spent / budget, 1.0)
    return peak * (fraction / warmup if fraction < warmup else (1.0 - fraction) / (1.0 - warmup))


def time_to_quality(args, data_dir: Path, tokenizer) -> str:
    """Each loop gets the same wall-clock budget, taken in alternating slices so machine load hits all alike;
    held-out MLM loss (same masked tokens) after every round. Reports when each bertforge loop first
    reaches the loss transformers ends with, and draws the curves."""
    from bertforge.config import BertConfig, dropout_overrides
    loops = {}
    for i, (name, kind, recipe) in enumerate(parse_ttq_loops(args.ttq_loops)):
        config = BertConfig.preset("mini", vocab_size=len(tokenizer.vocab), **dropout_overrides(recipe["dropout"]))
        # every loop starts from the same weights (same seed and shapes; the folder differs only in dropout)
        init = save_initial_weights(config, args.workdir / f"ttq-init-{i}")
        who = (Bertforge(1, config, data_dir, tokenizer, 32, args.seq_len, init, mask_rate=recipe["mask"])
               if kind == "bertforge" else
               Transformers(1, config, data_dir, tokenizer, 32, args.seq_len, args.vocab, init))
        loops[name] = (who, recipe["lr"])
    reference = next(who for who, _ in loops.values() if isinstance(who, Transformers))
    for name, (who, _) in loops.items():
        if isinstance(who, Bertforge):
            assert_same_start(who.model, reference.model, reference.check_inputs(), f"time to quality: {name}")
    for who, _ in loops.values():  # one untimed step at lr 0: first-call allocations are not training time
        for group in who.optimizer.param_groups:
            group["lr"] = 0.0
        who()
    spent = {name: 0.0 for name in loops}
    steps = {name: 0 for name in loops}
    curves = {name: [(0.0, heldout_mlm_loss(who, data_dir, tokenizer))] for name, (who, _) in loops.items()}
    rounds = args.ttq_rounds
    for r in range(1, rounds + 1):
        for name, (who, peak) in loops.items():
            until = args.ttq * r / rounds
            while spent[name] < until:
                for group in who.optimizer.param_groups:
                    group["lr"] = budget_lr(peak, spent[name], args.ttq)
                t0 = time.perf_counter()
                who()
                spent[name] += time.perf_counter() - t0
                steps[name] += 1
            curves[name].append((spent[name], heldout_mlm_loss(who, data_dir, tokenizer)))
        print(f"ttq round {r}/{rounds}: " + ", ".join(f"{n} {c[-1][1]:.3f}" for n, c in curves.items()),
              file=sys.stderr)
    target = curves["transformers"][-1][1]
    rows = []
    for name, (who, peak) in loops.items():
        reached = first_time_below(curves[name], target)
        rows.append(["mini", name, f"{peak:g}", f"{spent[name]:.0f}", steps[name], f"{sum(who.tokens):,}",
                     f"{curves[name][-1][1]:.3f}",
                     "—" if name == "transformers" else
                     (f"{reached:.0f} s ({reached / spent['transformers']:.2f} of the budget)" if reached is not None
                      else "not reached")])
    if args.ttq_plot:
        plot_ttq(curves, target, Path(args.ttq_plot))
    return markdown_table(["config", "loop", "peak lr", "train seconds", "steps (batch 32)", "tokens",
                           "final held-out MLM loss", "reached transformers' final loss at"], rows)


def first_time_below(curve: list[tuple[float, float]], target: float) -> float | None:
    """When the curve first reaches `target`, interpolating linearly between evaluations."""
    if curve[0][1] <= target:
        return curve[0][0]
    for (t0, l0), (t1, l1) in zip(curve, curve[1:]):
        if l1 <= target:
            return t1 if l0 == l1 else t0 + (t1 - t0) * (l0 - target) / (l0 - l1)
    return None


def plot_ttq(curves: dict, target: float, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for name, curve in curves.items():
        ax.plot([t / 60 for t, _ in curve], [loss for _, loss in curve], marker="o", markersize=3, label=name)
    ax.axhline(target, color="grey", linestyle=":", linewidth=1, label="transformers' final loss")
    ax.set_xlabel("training minutes (each loop, alternating slices)")
    ax.set_ylabel("held-out MLM loss")
    ax.set_title("Time to quality: mini BERT on Wikipedia, same wall-clock budget")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vocab", required=True, help="folder with vocab.txt (uncased BERT)")
    parser.add_argument("--data", help="a prepared corpus (default: prepare a slice of the shared Wikipedia)")
    parser.add_argument("--megabytes", type=float, default=4.0, help="size of that slice")
    parser.add_argument("--configs", default="mini,base")
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--steps", type=int, default=None, help="steps per repeat")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--precision", default="fp32", help="comma-separated: fp32, bf16 (CPU autocast), both sides")
    parser.add_argument("--dropout", type=float, default=None, metavar="P",
                        help="throughput configs: hidden and attention dropout on both sides (default: BERT's 0.1)")
    parser.add_argument("--ttq", type=float, default=0, metavar="SECONDS",
                        help="also train mini for this wall-clock budget per loop and compare held-out MLM loss")
    parser.add_argument("--ttq-rounds", type=int, default=8, help="held-out evaluations per loop")
    parser.add_argument("--ttq-plot", default=None, metavar="PNG", help="draw the time-to-quality curves here")
    parser.add_argument("--ttq-loops", default=TTQ_DEFAULT_LOOPS, metavar="SPEC",
                        help="comma-separated loops, e.g. 'transformers,bertforge,bertforge:mask=0.3:dropout=0' "
                             "(overrides: lr, mask, dropout; default %(default)s)")
    args = parser.parse_args()
    args.precisions = [p.strip() for p in args.precision.split(",") if p.strip()]
    start_process(args.threads)
    from bertforge.tokenization import BertTokenizer
    tokenizer = BertTokenizer.from_pretrained(args.vocab)
    with tempfile.TemporaryDirectory() as tmp:
        args.workdir = Path(tmp)
        data_dir = Path(args.data) if args.data else prepare_slice(args.vocab, args.megabytes, Path(tmp))
        rows, profile = [], []
        for label in filter(None, args.configs.split(",")):
            r, p = run_config(label.strip(), args, data_dir, tokenizer)
            rows += r
            profile += p
        ttq = time_to_quality(args, data_dir, tokenizer) if args.ttq else ""
    print(markdown_table(["config", "loop", "precision", "tokens/s", "useful GFLOP/s", "of GEMM peak",
                          "vs transformers (same precision)", "vs its own fp32", "GEMM peak GFLOP/s (fp32)"], rows))
    print()
    print("Where a step's time goes:")
    print(markdown_table(["config", "loop", "precision", "data (build + mask)", "forward", "backward",
                          "clip + optimizer"], profile))
    print()
    if ttq:
        print(f"Time to quality ({args.ttq:.0f} s of training each, warmup 5% then linear decay over the budget, "
              "same held-out masks):")
        print(ttq)
        print()
    print(", ".join(f"{k}: {v}" for k, v in machine_info().items()))


if __name__ == "__main__":
    main()

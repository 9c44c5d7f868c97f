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
                                        [--records DIR]

`--records DIR` also writes what was measured into the results store in DIR: the throughput table as group
bench-pretrain (a table per config) and, with `--ttq`, the time-to-quality table as group bench-ttq.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import torch

from bertforge.measuring import prepare_slice
from common import (assert_same_start, default_shared_data, interleave, machine_info,  # noqa: E402
                    markdown_table, median, peak_flops, peak_gemm, same_optimizer, save_initial_weights,
                    start_process)

# label -> (preset, batch size, steps per repeat, repeats)
CONFIGS = {"mini": ("mini", 32, 6, 5), "base": ("base", 8, 2, 3)}
# the time-to-quality race: its batch size, also of each held-out evaluation, and the held-out batches it reads
TTQ_BATCH, HELDOUT_BATCHES = 32, 8
HF_LOOP = "transformers (`BertForPreTraining` + `DataCollatorForLanguageModeling` + AdamW)"  # its table name


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


def config_settings(label: str, args) -> tuple[str, int, int, int]:
    """(preset, batch size, steps per repeat, repeats) of a config: `CONFIGS`, with what the command line sets."""
    preset, batch_size, steps, repeats = CONFIGS[label]
    return preset, args.batch_size or batch_size, args.steps or steps, args.repeats or repeats


def measure_config(label: str, args, data_dir: Path, tokenizer) -> dict:
    """Build one config's loops (bertforge and transformers at each precision) and time them in turns with the
    GEMM peak: per loop the median tokens/s and useful FLOP/s of the timed repeats and where its time went."""
    from bertforge.config import BertConfig, dropout_overrides
    preset, batch_size, steps, repeats = config_settings(label, args)
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
    loops = {}
    for (name, precision), who in candidates.items():
        # skip the warm-up call's counts (index 0)
        key = f"{name} {precision}"
        loops[(name, precision)] = {"tokens_s": median([n / s for n, s in zip(who.tokens[1:], times[key])]),
                                    "flop_s": median([f / s for f, s in zip(who.flops[1:], times[key])]),
                                    "phases": dict(who.timers.total)}
    return {"label": label, "batch_size": batch_size, "steps": steps, "repeats": repeats,
            "peak": peak_flops(median(times["gemm"])), "loops": loops}


# the throughput table's measured columns: (name, unit, digits)
THROUGHPUT_COLUMNS = (("tokens/s", "tokens/s", 0), ("useful GFLOP/s", "GFLOP/s", 1), ("of GEMM peak", "%", 1),
                      ("vs transformers (same precision)", "x", 2), ("vs its own fp32", "x", 2))


def throughput_numbers(measured: dict) -> dict[tuple[str, str], dict[str, float | None]]:
    """(loop, precision) -> the throughput table's columns: tokens/s, useful GFLOP/s, % of the GEMM peak, tokens/s
    over transformers' at the same precision, and over the loop's own fp32 (None without an fp32 run)."""
    loops, peak = measured["loops"], measured["peak"]
    numbers = {}
    for (name, precision), loop in loops.items():
        own_fp32 = loops.get((name, "fp32"))
        numbers[(name, precision)] = {
            "tokens/s": loop["tokens_s"], "useful GFLOP/s": loop["flop_s"] / 1e9,
            "of GEMM peak": 100 * loop["flop_s"] / peak,
            "vs transformers (same precision)": loop["tokens_s"] / loops[("transformers", precision)]["tokens_s"],
            "vs its own fp32": loop["tokens_s"] / own_fp32["tokens_s"] if own_fp32 else None}
    return numbers


def throughput_rows(measured: dict) -> tuple[list, list]:
    """The printed throughput table's rows and the where-the-time-goes rows of one measured config."""
    rows, profile = [], []
    label = measured["label"]
    for (name, precision), n in throughput_numbers(measured).items():
        own = n["vs its own fp32"]
        rows.append([label, name, precision, f"{n['tokens/s']:,.0f}", f"{n['useful GFLOP/s']:.1f}",
                     f"{n['of GEMM peak']:.1f}%", f"**{n['vs transformers (same precision)']:.2f}x**",
                     f"{own:.2f}x" if own is not None else "—", f"{measured['peak'] / 1e9:.0f}"])
        phases = measured["loops"][(name, precision)]["phases"]
        total = sum(phases.values())
        profile.append([label, name, precision] + [f"{100 * v / total:.0f}%" for v in phases.values()])
    return rows, profile


# ---- results-store records -----------------------------------------------------------------------------------------
def slug(text: str) -> str:
    """A column's or loop's name as a part of a record id: lower case, runs of anything else one dash."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def portable_path(path: str | Path) -> str:
    """`path` as a record names it (`bertforge.measuring.portable_path`)."""
    from bertforge.measuring import portable_path
    return portable_path(path)


def describe_corpus(args, data_dir: Path) -> str:
    """The records' `data`: the slice of the shared Wikipedia this run prepared, or the prepared folder it was given
    with the inputs and the token count its manifest names."""
    if not args.data:
        source = portable_path(default_shared_data() / "corpus" / "wikipedia-en-2018" / "wiki_en.txt.xz")
        return f"a {args.megabytes:g} MB slice of {source} prepared by bertforge prepare"
    try:
        manifest = json.loads((data_dir / "manifest.json").read_text(encoding="utf-8"))
        inputs = ", ".join(portable_path(entry["path"]) for entry in manifest["inputs"])
        tokens = manifest["counts"]["tokens"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"the corpus prepared into {portable_path(args.data)}"
    return f"{inputs} ({tokens / 1e6:.2f} M tokens) prepared into {portable_path(args.data)}"


def run_command(argv: list[str] | None) -> str:
    """The records' `command`: this run's command line without `--records` and without this machine's folders, after
    the OMP_NUM_THREADS it ran under."""
    from bertforge.measuring import portable_command
    command = portable_command("benchmarks/bench_pretrain.py", list(sys.argv[1:] if argv is None else argv))
    threads = os.environ.get("OMP_NUM_THREADS")
    return f"OMP_NUM_THREADS={threads} {command}" if threads else command


def config_key(measured: dict, args) -> tuple[str, str]:
    """(id part, description) of a measured config: its label, and any batch size, sequence length or dropout
    other than the preset's default (`mini`, or `mini-b2-seq32` and "mini batch 2, seq 32")."""
    label, batch_size = measured["label"], measured["batch_size"]
    key, what = label, f"{label} batch {batch_size}"
    if batch_size != CONFIGS[label][1]:
        key += f"-b{batch_size}"
    if args.seq_len != 128:
        key, what = key + f"-seq{args.seq_len}", what + f", seq {args.seq_len}"
    if args.dropout is not None:
        key, what = key + f"-dropout{slug(f'{args.dropout:g}')}", what + f", dropout {args.dropout:g}"
    return key, what


def make_records(measured: list[dict], args, data: str, command: str) -> list:
    """Group bench-pretrain: per config, loop and precision the throughput table's five columns (tokens/s,
    useful GFLOP/s, of GEMM peak, vs transformers at the same precision, vs its own fp32)."""
    import dataclasses
    from bertforge.results_store import Record
    records = []
    for config in measured:
        key, setting = config_key(config, args)
        for (name, precision), numbers in throughput_numbers(config).items():
            what = f"bench_pretrain, {setting}, data + masking + step: {config['label']} {name} {precision}"
            for column, unit, digits in THROUGHPUT_COLUMNS:
                if numbers[column] is None:
                    continue
                record = Record.measured(f"bench-pretrain/{key}/{name}-{precision}/{slug(column)}", numbers[column],
                                         unit, f"{what}, {column}", data, seeds=config["repeats"], command=command,
                                         digits=digits)
                records.append(dataclasses.replace(record, threads=args.threads))  # torch's threads (start_process)
    return records


def make_tables(measured: list[dict], args) -> dict:
    """The throughput table of each config (`bench-pretrain-<config>`), its cells the records of `make_records`:
    bertforge's speed-ups in bold."""
    tables = {}
    for config in measured:
        key, _ = config_key(config, args)
        header = ["config", "loop", "precision", *(column for column, _, _ in THROUGHPUT_COLUMNS)]
        rows = []
        for (name, precision), numbers in throughput_numbers(config).items():
            base = f"bench-pretrain/{key}/{name}-{precision}"
            cells = [config["label"], name, precision]
            for column, unit, _ in THROUGHPUT_COLUMNS:
                cell = "{" + f"{base}/{slug(column)}" + ("|bare}" if unit in ("tokens/s", "GFLOP/s") else "}")
                bold = name == "bertforge" and (column.startswith("vs transformers") or
                                                (column == "vs its own fp32" and precision != "fp32"))
                cells.append("—" if numbers[column] is None else f"**{cell}**" if bold else cell)
            rows.append(cells)
        tables[f"bench-pretrain-{key}"] = {"header": header, "align": ["---"] * len(header), "rows": rows}
    return tables


def heldout_mlm_loss(who, data_dir: Path, tokenizer, batches: int = HELDOUT_BATCHES) -> float:
    """Mean MLM loss over the same masked held-out tokens, whichever implementation `who.model` is."""
    from bertforge.data import PretrainingDataset
    model = who.model
    data = PretrainingDataset(data_dir, tokenizer, batch_size=TTQ_BATCH, max_seq_length=128, seed=0,
                              split="heldout")
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


def time_to_quality(args, data_dir: Path, tokenizer) -> list[dict]:
    """Each loop gets the same wall-clock budget, taken in alternating slices so machine load hits all alike;
    held-out MLM loss (same masked tokens) after every round. Per loop (in `--ttq-loops` order): its name, kind
    and recipe, the seconds it trained, its steps and the tokens they trained on, and its curve of (seconds
    trained, held-out MLM loss), from before the first step to the end of each round."""
    from bertforge.config import BertConfig, dropout_overrides
    loops = {}
    for i, (name, kind, recipe) in enumerate(parse_ttq_loops(args.ttq_loops)):
        config = BertConfig.preset("mini", vocab_size=len(tokenizer.vocab), **dropout_overrides(recipe["dropout"]))
        # every loop starts from the same weights (same seed and shapes; the folder differs only in dropout)
        init = save_initial_weights(config, args.workdir / f"ttq-init-{i}")
        who = (Bertforge(1, config, data_dir, tokenizer, TTQ_BATCH, args.seq_len, init, mask_rate=recipe["mask"])
               if kind == "bertforge" else
               Transformers(1, config, data_dir, tokenizer, TTQ_BATCH, args.seq_len, args.vocab, init))
        loops[name] = (who, kind, recipe)
    reference = next(who for who, _, _ in loops.values() if isinstance(who, Transformers))
    for name, (who, _, _) in loops.items():
        if isinstance(who, Bertforge):
            assert_same_start(who.model, reference.model, reference.check_inputs(), f"time to quality: {name}")
    for who, _, _ in loops.values():  # one untimed step at lr 0: first-call allocations are not training time
        for group in who.optimizer.param_groups:
            group["lr"] = 0.0
        who()
    spent = {name: 0.0 for name in loops}
    steps = {name: 0 for name in loops}
    curves = {name: [(0.0, heldout_mlm_loss(who, data_dir, tokenizer))] for name, (who, _, _) in loops.items()}
    rounds = args.ttq_rounds
    for r in range(1, rounds + 1):
        for name, (who, _, recipe) in loops.items():
            until = args.ttq * r / rounds
            while spent[name] < until:
                for group in who.optimizer.param_groups:
                    group["lr"] = budget_lr(recipe["lr"], spent[name], args.ttq)
                t0 = time.perf_counter()
                who()
                spent[name] += time.perf_counter() - t0
                steps[name] += 1
            curves[name].append((spent[name], heldout_mlm_loss(who, data_dir, tokenizer)))
        print(f"ttq round {r}/{rounds}: " + ", ".join(f"{n} {c[-1][1]:.3f}" for n, c in curves.items()),
              file=sys.stderr)
    # tokens: the trained steps' (the untimed warm-up call, index 0, left out)
    return [{"name": name, "kind": kind, "recipe": recipe, "spent": spent[name], "steps": steps[name],
             "tokens": sum(who.tokens[1:]), "curve": curves[name]} for name, (who, kind, recipe) in loops.items()]


def reached_target(results: list[dict]) -> tuple[float, dict[str, float | None]]:
    """Transformers' final held-out loss, and per loop the seconds at which it first reached that loss (None: not
    within the budget; transformers itself is left out)."""
    target = next(r for r in results if r["kind"] == "transformers")["curve"][-1][1]
    return target, {r["name"]: first_time_below(r["curve"], target) for r in results if r["kind"] != "transformers"}


def ttq_table(results: list[dict], budget: float) -> str:
    """The printed time-to-quality table."""
    _, reached = reached_target(results)
    rows = []
    for r in results:
        at = reached.get(r["name"])
        rows.append(["mini", r["name"], f"{r['recipe']['lr']:g}", f"{r['spent']:.0f}", r["steps"], f"{r['tokens']:,}",
                     f"{r['curve'][-1][1]:.3f}",
                     "—" if r["kind"] == "transformers" else
                     (f"{at:.0f} s ({at / budget:.2f} of the budget)" if at is not None else "not reached")])
    return markdown_table(["config", "loop", "peak lr", "train seconds", f"steps (batch {TTQ_BATCH})", "tokens",
                           "final held-out MLM loss", "reached transformers' final loss at"], rows)


def lr_text(lr: float) -> str:
    """A learning rate as the docs write it: 5e-4, 1e-3, 2.5e-4."""
    mantissa, exponent = f"{lr:e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def loop_name(kind: str, recipe: dict) -> tuple[str, str]:
    """(id part, table name) of a time-to-quality loop: transformers, bertforge (the shared recipe), or
    bertforge with what it changes (`bertforge-lr1e-3`, "bertforge, lr 1e-3")."""
    if kind == "transformers":
        return "transformers", HF_LOOP
    changed = {key: lr_text(recipe[key]) if key == "lr" else f"{recipe[key]:g}"
               for key in TTQ_BASE if recipe[key] != TTQ_BASE[key]}
    if not changed:
        return "bertforge", "bertforge, same recipe"
    return ("bertforge-" + "-".join(f"{key}{slug(value)}" for key, value in changed.items()),
            "bertforge, " + ", ".join(f"{key} {value}" for key, value in changed.items()))


def ttq_checkpoints(budget: float, rounds: int) -> list[tuple[int, str]]:
    """The evaluations the records give the loss at: (round, minutes) at a tenth, half and all of the budget
    (the 2 / 10 / 20 min of a 20-minute race in ten rounds)."""
    picked = sorted({max(1, round(rounds * share)) for share in (0.1, 0.5)} | {rounds})
    return [(r, f"{budget * r / rounds / 60:g}") for r in picked]


def ttq_columns(args) -> dict[str, str]:
    """The time-to-quality table's columns, by role, as named in the records' descriptions and the table."""
    minutes = " / ".join(m for _, m in ttq_checkpoints(args.ttq, args.ttq_rounds))
    return {"steps": f"steps of {TTQ_BATCH}", "tokens": "tokens", "loss": f"held-out MLM loss at {minutes} min",
            "reached": f"reached transformers' {args.ttq / 60:g}-minute loss at"}


def ttq_key(args) -> str:
    """The race's id part: mini and the budget in minutes (`mini-20m`), and a sequence length other than 128."""
    return f"mini-{slug(f'{args.ttq / 60:g}')}m" + (f"-seq{args.seq_len}" if args.seq_len != 128 else "")


def make_ttq_records(results: list[dict], args, data: str, command: str) -> list:
    """Group bench-ttq: per loop its steps, tokens and held-out MLM loss at a tenth, half and all of the budget;
    per bertforge loop also when it reached transformers' final loss, in seconds and as a share of the budget."""
    import dataclasses
    from bertforge.results_store import Record
    columns, (_, reached) = ttq_columns(args), reached_target(results)
    seq = f", sequence length {args.seq_len}" if args.seq_len != 128 else ""
    records = []
    for r in results:
        part, name = loop_name(r["kind"], r["recipe"])
        base = f"bench-ttq/{ttq_key(args)}/{part}"
        what = f"time to quality, mini MLM + NSP{seq}, {args.ttq:,g} s of wall clock each: {name.replace('`', '')}"
        values = [("steps", "", float(r["steps"]), "steps", 0), ("tokens", "", float(r["tokens"]), "tokens", 0)]
        values += [("loss", f"-{i + 1}" if i else "", r["curve"][at][1], "", 3)
                   for i, (at, _) in enumerate(ttq_checkpoints(args.ttq, args.ttq_rounds))]
        if reached.get(r["name"]) is not None:
            values += [("reached", "", reached[r["name"]], "s", 0), ("reached", "-2", reached[r["name"]] / args.ttq, "", 2)]
        for role, suffix, value, unit, digits in values:
            record = Record.measured(f"{base}/{slug(columns[role])}{suffix}", value, unit, f"{what}, {columns[role]}",
                                     data, command=command, digits=digits)
            records.append(dataclasses.replace(record, threads=args.threads))
    return records


def make_ttq_tables(results: list[dict], args) -> dict:
    """The time-to-quality table (`bench-ttq-<key>`), its cells the records of `make_ttq_records`: the final loss of
    transformers and of bertforge's same-recipe loop in bold, and when the latter reached transformers'."""
    columns, (_, reached) = ttq_columns(args), reached_target(results)
    rows = []
    for r in results:
        part, name = loop_name(r["kind"], r["recipe"])
        base = f"bench-ttq/{ttq_key(args)}/{part}"
        bold = r["kind"] == "transformers" or r["recipe"] == TTQ_BASE
        losses = ["{" + f"{base}/{slug(columns['loss'])}{f'-{i + 1}' if i else ''}|bare" + "}"
                  for i in range(len(ttq_checkpoints(args.ttq, args.ttq_rounds)))]
        losses[-1] = f"**{losses[-1]}**" if bold else losses[-1]
        at = f"{base}/{slug(columns['reached'])}"
        if r["kind"] == "transformers":
            cell = "—"
        elif reached[r["name"]] is None:
            cell = "not reached"
        else:
            cell = "{" + at + "}: {" + at + "-2|bare} of the budget"
            cell = f"**{cell}**" if bold else cell
        rows.append([name, lr_text(r["recipe"]["lr"]), "{" + f"{base}/{slug(columns['steps'])}|bare" + "}",
                     "{" + f"{base}/{slug(columns['tokens'])}|bare" + "}", " / ".join(losses), cell])
    header = ["loop", "peak lr", columns["steps"], columns["tokens"], columns["loss"], columns["reached"]]
    return {f"bench-ttq-{ttq_key(args)}": {"header": header, "align": ["---"] * len(header), "rows": rows}}


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


def main(argv: list[str] | None = None) -> None:
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
    parser.add_argument("--records", default=None, metavar="DIR",
                        help="also write the tables as results-store records into DIR (groups bench-pretrain and, "
                             "with --ttq, bench-ttq)")
    args = parser.parse_args(argv)
    args.precisions = [p.strip() for p in args.precision.split(",") if p.strip()]
    start_process(args.threads)
    from bertforge.tokenization import BertTokenizer
    tokenizer = BertTokenizer.from_pretrained(args.vocab)
    with tempfile.TemporaryDirectory() as tmp:
        args.workdir = Path(tmp)
        data_dir = Path(args.data) if args.data else prepare_slice(args.vocab, args.megabytes, Path(tmp))
        corpus = describe_corpus(args, data_dir)
        measured = [measure_config(label.strip(), args, data_dir, tokenizer)
                    for label in filter(None, args.configs.split(","))]
        ttq = time_to_quality(args, data_dir, tokenizer) if args.ttq else []
    rows, profile = [], []
    for config in measured:
        r, p = throughput_rows(config)
        rows += r
        profile += p
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
        print(ttq_table(ttq, args.ttq))
        print()
        if args.ttq_plot:
            plot_ttq({r["name"]: r["curve"] for r in ttq}, reached_target(ttq)[0], Path(args.ttq_plot))
    print(", ".join(f"{k}: {v}" for k, v in machine_info().items()))
    if args.records:
        from bertforge.results_store import write_records
        command = run_command(argv)
        if measured:
            print(write_records("bench-pretrain", make_records(measured, args, corpus, command), args.records,
                                tables=make_tables(measured, args)))
        if ttq:
            data = f"{corpus}; {HELDOUT_BATCHES} held-out batches of {TTQ_BATCH}"
            print(write_records("bench-ttq", make_ttq_records(ttq, args, data, command), args.records,
                                tables=make_ttq_tables(ttq, args)))


if __name__ == "__main__":
    main()

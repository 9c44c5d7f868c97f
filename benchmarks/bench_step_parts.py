"""What each hand-tuned part of bertforge's CPU training step buys: cheaper dropout masks, explicit attention
with dropout, attention groups, the tiled vocabulary decoder, a last layer that runs on the read rows only.

Three questions, each answered by interleaved repeats (medians) in one process, one thread by default:

* ops: dropout forward + backward, `F.dropout` against `bertforge.model.dropout` (the attention-probability
  and hidden-state sizes of `mini` at batch 32 x 128), and attention with dropout 0.1 forward + backward,
  SDPA (which takes its math path on CPU when dropout > 0) against `attention_with_dropout`, and the
  vocabulary decoder's forward matmul `[576, 256] x [256, 30522]`, `F.linear` against `tiled_linear`;
* steps: the `mini` training step (forward, backward, AdamW), one model copy per variant, same weights and
  batches: `before` = `nn.Dropout` + SDPA + one grid per batch + one decoder matmul + the whole last layer,
  `+ dropout` = cheaper masks and the explicit path, `+ groups` = also attention groups, `+ tiles` = also the
  tiled decoder, `+ read rows` = also the last layer on the masked and [CLS] rows only (the default);
* on two kinds of batches: real pre-training batches (`PretrainingDataset` on a prepared slice of the shared
  Wikipedia, BERT's segment pairs, about a quarter padding) and `bench_model.py`'s sentence pairs (half).

`--records DIR` also writes both tables as records of the results store (group `bench-step`, tables
`bench-step-ops` and `bench-step-cumulative`).

    python benchmarks/bench_step_parts.py [--data PREPARED_DIR] [--repeats 7] [--threads 1] [--records DIR]
"""
from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from bench_model import log, portable_path, pretraining_batches  # noqa: E402
from bertforge.measuring import portable_command, prepare_slice
from common import (default_shared_data, interleave, machine_info, markdown_table, median, minilm_folder,  # noqa: E402
                    start_process)

from bertforge.config import BertConfig  # noqa: E402
from bertforge.model import BertForPreTraining, attention, packing, tiled_linear  # noqa: E402
from bertforge.model.dropout import dropout  # noqa: E402
from bertforge.model.kernels import Kernels  # noqa: E402
from bertforge.tokenization import BertTokenizer  # noqa: E402
from bertforge.training.optim import build_optimizer  # noqa: E402


def fwd_bwd(fn, *inputs):
    def run() -> None:
        leaves = [x.detach().requires_grad_() for x in inputs]
        out = fn(*leaves)
        out.backward(torch.ones_like(out))
    return run


def forward_only(fn, *inputs):
    def run() -> None:  # returns None: `interleave` then times the call itself
        fn(*inputs)
    return run


def time_ops(repeats: int) -> dict[str, tuple[str, list[float], list[float]]]:
    """Each op's id slug -> (the op as the table names it, PyTorch's seconds, bertforge's seconds), `repeats` each."""
    ops = {}
    for slug, what, shape in (("dropout-attention", "attention probabilities", (4, 32, 128, 128)),
                              ("dropout-hidden", "hidden states", (4096, 256))):
        x = torch.randn(shape)
        t = interleave({"F.dropout": fwd_bwd(lambda a: F.dropout(a, 0.1, True), x),
                        "bertforge": fwd_bwd(lambda a: dropout(a, 0.1), x)}, repeats, warmup=2)
        ops[slug] = (f"dropout 0.1 fwd+bwd, {what} {list(shape)}", t["F.dropout"], t["bertforge"])
    h, B, L, d = 4, 32, 128, 64
    q, k, v = (torch.randn(h, B, L, d) for _ in range(3))
    lengths = torch.randint(L // 4, L + 1, (B,))
    mask = (torch.arange(L)[None] < lengths[:, None])[None, :, None, :]
    t = interleave({"sdpa": fwd_bwd(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, attn_mask=mask,
                                                                                  dropout_p=0.1), q, k, v),
                    "explicit": fwd_bwd(lambda a, b, c: attention.attention_with_dropout(a, b, c, mask, 0.1), q, k, v)},
                   repeats, warmup=2)
    ops["attention"] = (f"attention, dropout 0.1, fwd+bwd, [{h}, {B}, {L}, {d}], padding mask (SDPA math path vs "
                        "explicit)", t["sdpa"], t["explicit"])
    x, w, b = torch.randn(576, 256), torch.randn(30522, 256), torch.randn(30522)
    t = interleave({"F.linear": forward_only(F.linear, x, w, b),
                    "tiled": forward_only(tiled_linear.tiled_linear, x, w, b)}, repeats, warmup=2)
    ops["decoder"] = (f"vocabulary decoder forward, {list(x.shape)} x {list(w.T.shape)} (`F.linear` vs tiles)",
                      t["F.linear"], t["tiled"])
    return ops


def op_rows(ops: dict[str, tuple[str, list[float], list[float]]]) -> list[list[str]]:
    rows = []
    for what, ref, ours in ops.values():
        rows.append([what, f"{median(ref) * 1e3:.1f}", f"{median(ours) * 1e3:.1f}",
                     f"**{median(ref) / median(ours):.2f}x**"])
    return rows


# variant -> the model's kernels (`bertforge.model.kernels`), each adding one piece of the speed machinery
VARIANTS = {
    "before": Kernels(cheap_dropout=False, explicit_attention_dropout=False, attention_groups=1, tiled_decoder=False,
                      read_rows_only=False),
    "+ dropout": Kernels(attention_groups=1, tiled_decoder=False, read_rows_only=False),
    "+ groups": Kernels(tiled_decoder=False, read_rows_only=False),
    "+ tiles": Kernels(read_rows_only=False),
    "+ read rows": Kernels(),
}


def step_candidate(model: nn.Module, batches: list[dict]):
    optimizer = build_optimizer(model, 1e-4)

    def run() -> None:
        for b in batches:
            model(**b).loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    return run


def time_steps(batches: list[dict], repeats: int, vocab_size: int) -> dict:
    """Each variant's seconds per turn (`repeats` each, the variants taking turns), the batches' share of real
    tokens and the attention grid's cost in groups over its cost as one grid."""
    torch.manual_seed(0)
    base = BertForPreTraining(BertConfig.preset("mini", vocab_size=vocab_size)).train()
    candidates = {}
    for label, kernels in VARIANTS.items():
        candidates[label] = step_candidate(copy.deepcopy(base).set_kernels(kernels), batches)
    times = interleave(candidates, repeats, warmup=1, log=log)
    fill = sum(int(b["attention_mask"].sum()) for b in batches) / sum(b["attention_mask"].numel() for b in batches)
    grid = {}
    for groups in (1, 4):
        grid[groups] = sum(g.count * g.length ** 2 for b in batches for g in packing.PackedBatch.from_mask(
            b["attention_mask"], *b["attention_mask"].shape, torch.device("cpu"), max_groups=groups).groups)
    return dict(times=times, fill=fill, grid=grid[4] / grid[1], batch_size=len(batches[0]["attention_mask"]),
                n_batches=len(batches))


def step_rows(name: str, measured: dict) -> list[list[str]]:
    times, before = measured["times"], measured["times"]["before"]
    rows = []
    for label in VARIANTS:
        paired = median([b / t for b, t in zip(before, times[label])])
        rows.append([name, f"{measured['fill']:.0%}", f"{measured['grid']:.2f}", label, f"{median(times[label]):.3f}",
                     f"**{median(before) / median(times[label]):.2f}x**", f"{paired:.2f}x"])
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=None, help="a prepared corpus (default: prepare 2 MB of Wikipedia)")
    p.add_argument("--vocab", type=Path, default=None, help="folder with vocab.txt (default: all-MiniLM-L6-v2's)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--batches", type=int, default=3, help="optimizer steps per timed turn")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--shared-data", type=Path, default=default_shared_data())
    p.add_argument("--records", default=None, metavar="DIR",
                   help="also write both tables as results-store records (group bench-step) into DIR")
    args = p.parse_args(argv)
    start_process(args.threads)
    args.vocab = args.vocab or minilm_folder()
    log(" | ".join(f"{k}: {v}" for k, v in machine_info().items()))
    tok = BertTokenizer.from_pretrained(args.vocab)
    ops = time_ops(args.repeats)
    print(markdown_table(["op", "PyTorch ms", "bertforge ms", "speed-up"], op_rows(ops)), flush=True)

    from bertforge.data import MaskingConfig, PretrainingDataset
    from bertforge.pretraining.pretrain import next_batch
    with tempfile.TemporaryDirectory() as tmp:
        data = args.data or prepare_slice(str(args.vocab), 2.0, Path(tmp))
        ds = PretrainingDataset(data, tok, batch_size=args.batch_size, max_seq_length=128, seed=0,
                                masking=MaskingConfig(rate=0.15))
        real = [next_batch(ds) for _ in range(args.batches)]
    pairs = [dict(**b.tensors, **b.extra) for b in
             pretraining_batches(tok, args.shared_data, args.batch_size, args.batches, seed=1)]
    steps = {kind: time_steps(batches, args.repeats, tok.vocab_size) for kind, batches in (("pretrain", real),
                                                                                          ("pairs", pairs))}
    rows = [row for kind, measured in steps.items() for row in step_rows(kind_name(kind), measured)]
    print()
    print(markdown_table(["batches", "real tokens", "grouped grid cost / one grid", "variant", "s per turn",
                          "vs before", "paired"], rows))
    if args.records:
        from bertforge.results_store import write_records
        command = portable_command("benchmarks/bench_step_parts.py", list(sys.argv[1:] if argv is None else argv))
        log("records: " + str(write_records("bench-step", make_records(ops, steps, args, command), args.records,
                                            tables=make_tables(ops, steps))))
    return 0


# ---- records -----------------------------------------------------------------------------------------------------
# each kind of batches -> (its name, what it is made of when the name does not say)
KINDS = {"pretrain": ("pre-training batches", "segment pairs"), "pairs": ("bench_model's sentence pairs", "")}
# each variant of `VARIANTS` -> (its part of the records' ids, the variant as the table names it)
VARIANT_RECORDS = {"before": ("before", "before (none of the parts)"),
                   "+ dropout": ("dropout", "+ cheaper dropout, explicit attention"),
                   "+ groups": ("groups", "+ attention groups"),
                   "+ tiles": ("tiled", "+ tiled decoder"),
                   "+ read rows": ("rows", "+ last layer on the read rows")}


def variant_label(kind: str, variant: str) -> str:
    """A variant as the table names it: "before" is spelled out on the first kind of batches only."""
    label = VARIANT_RECORDS[variant][1]
    return "before" if variant == "before" and kind != next(iter(KINDS)) else label


def kind_name(kind: str, *more: str) -> str:
    """A kind of batches by name, what it is made of and `more` in one parenthesis after it."""
    name, detail = KINDS[kind]
    inside = ", ".join(part for part in (detail, *more) if part)
    return f"{name} ({inside})" if inside else name


def real_tokens(measured: dict) -> str:
    return f"{100 * measured['fill']:.0f} % real tokens"


def corpus_data(args) -> str:
    """Where the pre-training batches come from: the prepared folder and the inputs its manifest names."""
    if args.data is None:
        return f"the first 2 MB of {portable_path(args.shared_data)}/corpus/wikipedia-en-2018/wiki_en.txt.xz, prepared"
    try:
        inputs = [portable_path(entry["path"])
                  for entry in json.loads((Path(args.data) / "manifest.json").read_text())["inputs"]]
    except (OSError, ValueError, KeyError, TypeError):
        inputs = []
    return f"{', '.join(inputs) or 'a corpus'} prepared into {portable_path(args.data)}"


def make_records(ops: dict, steps: dict, args, command: str) -> list:
    """Each op's PyTorch and bertforge milliseconds (medians) and the speed-up (the two medians divided); each kind
    of batches' seconds per turn of every variant (medians) and its speed-up over "before" (the medians divided)."""
    import dataclasses
    from bertforge.results_store import Record
    records = []

    def add(rid: str, value: float, unit: str, what: str, data: str, digits: int) -> None:
        record = Record.measured(rid, value, unit, what, data, seeds=args.repeats, command=command, digits=digits)
        records.append(dataclasses.replace(record, threads=args.threads))  # torch's threads (start_process)

    for slug, (label, ref, ours) in ops.items():
        what, data = f"bench_step_parts, one op: {label.replace('`', '')}", "random tensors of the shapes named"
        add(f"bench-step/ops/{slug}/pytorch-ms", median(ref) * 1e3, "ms", f"{what}, PyTorch ms", data, 1)
        add(f"bench-step/ops/{slug}/bertforge-ms", median(ours) * 1e3, "ms", f"{what}, bertforge ms", data, 1)
        add(f"bench-step/ops/{slug}/speed-up", median(ref) / median(ours), "x", f"{what}, speed-up", data, 2)
    sources = {"pretrain": corpus_data(args),
               "pairs": f"{portable_path(args.shared_data)}/corpus/wikipedia-en-2018/wiki_en.txt.xz"}
    for kind, measured in steps.items():
        batches = f"{measured['batch_size']} x {measured['n_batches']} batches"
        data = f"{kind_name(kind, batches, real_tokens(measured))} of {sources[kind]}"
        before = median(measured["times"]["before"])
        for variant, (slug, _) in VARIANT_RECORDS.items():
            what = (f"bench_step_parts, mini training step, each part added to the one above: {kind_name(kind)} "
                    f"{variant_label(kind, variant)}")
            seconds = median(measured["times"][variant])
            add(f"bench-step/cumulative/{kind}-{slug}/s-per-turn", seconds, "s", f"{what}, s per turn", data, 3)
            add(f"bench-step/cumulative/{kind}-{slug}/vs-before", before / seconds, "x", f"{what}, vs before", data, 2)
    return records


def make_tables(ops: dict, steps: dict) -> dict[str, dict]:
    """The two tables: a row per op (`bench-step-ops`), a row per variant of each kind of batches
    (`bench-step-cumulative`, the last variant's speed-up in bold)."""
    op_table = [[label, f"{{bench-step/ops/{slug}/pytorch-ms|bare}}", f"{{bench-step/ops/{slug}/bertforge-ms|bare}}",
                 f"**{{bench-step/ops/{slug}/speed-up}}**"] for slug, (label, _, _) in ops.items()]
    last = list(VARIANT_RECORDS)[-1]
    cumulative = []
    for kind, measured in steps.items():
        for i, (variant, (slug, _)) in enumerate(VARIANT_RECORDS.items()):
            base = f"bench-step/cumulative/{kind}-{slug}"
            vs = f"{{{base}/vs-before}}"
            cumulative.append([kind_name(kind, real_tokens(measured)) if i == 0 else "", variant_label(kind, variant),
                               f"{{{base}/s-per-turn|bare}}", f"**{vs}**" if variant == last else vs])
    return {"bench-step-ops": {"header": ["op", "PyTorch ms", "bertforge ms", "speed-up"], "align": ["---"] * 4,
                               "rows": op_table},
            "bench-step-cumulative": {"header": ["batches", "variant", "s per turn", "vs before"],
                                      "align": ["---"] * 4, "rows": cumulative}}


if __name__ == "__main__":
    raise SystemExit(main())

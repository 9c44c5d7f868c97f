"""bertforge's BERT against `transformers.BertForPreTraining` / `BertModel` (sdpa), identical weights, CPU.

One run measures, for each config (`mini`, `base`), with bertforge, Hugging Face and a same-size fp32 GEMM
taking turns (medians of `--repeats`):

* pre-training batches: real consecutive-sentence pairs from the shared Wikipedia corpus (50% random B for
  NSP), [CLS] A [SEP] B [SEP], at most 128 tokens, lengths as they come, 15% of the real non-special
  tokens masked (80/10/10), padded to the batch's longest;
* variable-length single sentences: shuffled SST-2 training sentences, padded to the batch's longest;

(a) a training step (forward + backward + AdamW step; both sides with the same `torch.optim.AdamW`, built by
`build_optimizer` with the same decay groups and `fused` setting) -- BertForPreTraining on the pairs,
BertModel + dropout + linear head on the pooled output (the same head on both sides) on SST-2; (b)
inference (`BertModel`, `torch.no_grad`, eval mode) on both kinds of batches. Before each training workload
both models are loaded from one state dict (bertforge's, saved and read back by `transformers`), and the
script stops unless the weights are equal and an eval forward pass agrees.

Throughput is real (non-padding) tokens per second for both sides, so the ratio is a time ratio.
"speed-up" is the ratio of the two medians, "paired" the median of the per-repeat ratios (more robust when
the machine's load drifts within a repeat).
Utilisation: `count_flops` of the useful work (real tokens, decoder on masked rows) divided by the time,
over the GEMM peak measured in the same interleaved loop (`common.PEAK_GEMM`, fp32, best of 5 per turn).
For HF the FLOPs it executes (padding included, decoder on every position) are shown as well. `--records DIR`
also writes the table as records of the results store (group `bench-model`, table `bench-model-<config>`).

    python benchmarks/bench_model.py [--configs mini,base] [--repeats 5] [--batch-size N] [--quick]
                                     [--shared-data ../shared/data] [--vocab DIR] [--profile] [--records DIR]
"""
from __future__ import annotations

import argparse
import lzma
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn
import torch.nn.functional as F

from common import (assert_same_start, default_shared_data, interleave, machine_info,  # noqa: E402
                    markdown_table, median, minilm_folder, peak_flops, peak_gemm, same_optimizer, start_process)

from bertforge.measuring import portable_command  # noqa: E402

from bertforge.config import BertConfig, dropout_overrides  # noqa: E402
from bertforge.model import BertForPreTraining, count_flops  # noqa: E402
from bertforge.tokenization import BertTokenizer  # noqa: E402

MAX_LEN = 128
DEFAULT_BATCH = {  # (pre-training pairs, SST-2 sentences) per step
    "mini": (64, 64),
    "base": (16, 32),
}


def log(msg: str) -> None:
    print(msg, flush=True)


# ---- data ------------------------------------------------------------------------------------------------------
@dataclass
class Batch:
    tensors: dict[str, torch.Tensor]
    lens: list[int]                       # real length of every sequence
    n_masked: int = 0
    extra: dict[str, torch.Tensor] = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        return sum(self.lens)

    @property
    def padded_len(self) -> int:
        return self.tensors["input_ids"].shape[1]


def _is_heading(line: str) -> bool:
    # the corpus writes section titles as short lines ending in "." ("Professional career.")
    return len(line.split()) <= 4 and line.endswith(".") and line.count(".") == 1


def wiki_articles(shared: Path, n_sentences: int) -> list[list[str]]:
    """Sentences of the first articles (title and section headings dropped) until n_sentences in total."""
    from bertforge.data.sentences import split_sentences
    articles: list[list[str]] = []
    current: list[str] = []
    title_next = True
    total = 0
    with lzma.open(shared / "corpus/wikipedia-en-2018/wiki_en.txt.xz", "rt", encoding="utf-8") as f:
        for raw in f:
            line = raw.strip()
            if not line:
                if len(current) >= 2:
                    articles.append(current)
                    total += len(current)
                    if total >= n_sentences:
                        break
                current, title_next = [], True
                continue
            if title_next:
                title_next = False
                continue
            if _is_heading(line):
                continue
            current.extend(split_sentences(line))
    return articles


def pad(rows: list[list[int]], value: int = 0) -> torch.Tensor:
    L = max(len(r) for r in rows)
    return torch.tensor([r + [value] * (L - len(r)) for r in rows], dtype=torch.long)


def pretraining_batches(tok: BertTokenizer, shared: Path, batch_size: int, n_batches: int,
                        seed: int = 0) -> list[Batch]:
    rng = random.Random(seed)
    n_pairs = batch_size * n_batches
    articles = wiki_articles(shared, 3 * n_pairs + 100)
    flat = [s for a in articles for s in a]
    ids = tok.encode_batch_ids(flat)
    it = iter(ids)
    art_ids = [[next(it) for _ in a] for a in articles]
    pairs: list[tuple[list[int], list[int], int]] = []
    for ai, sents in enumerate(art_ids):
        for i in range(0, len(sents) - 1, 2):
            a, b, is_random = sents[i], sents[i + 1], 0
            if rng.random() < 0.5:
                other = rng.choice([j for j in range(len(art_ids)) if j != ai])
                b, is_random = rng.choice(art_ids[other]), 1
            pairs.append((list(a), list(b), is_random))
    if len(pairs) < n_pairs:
        raise SystemExit(f"only {len(pairs)} sentence pairs read, need {n_pairs}")
    pairs = pairs[:n_pairs]
    cls_id, sep_id, mask_id = tok.cls_token_id, tok.sep_token_id, tok.mask_token_id
    vocab_size = tok.vocab_size
    batches = []
    for start in range(0, n_pairs, batch_size):
        rows, types, labels, nsp, lens = [], [], [], [], []
        for a, b, is_random in pairs[start:start + batch_size]:
            while len(a) + len(b) > MAX_LEN - 3:          # truncate the longer one, as BERT does
                (a if len(a) >= len(b) else b).pop()
            seq = [cls_id] + a + [sep_id] + b + [sep_id]
            tt = [0] * (len(a) + 2) + [1] * (len(b) + 1)
            real = [i for i in range(len(seq)) if i not in (0, len(a) + 1, len(seq) - 1)]
            k = max(1, round(0.15 * len(real)))
            lab = [-100] * len(seq)
            for p in rng.sample(real, k):
                lab[p] = seq[p]
                r = rng.random()
                seq[p] = mask_id if r < 0.8 else (rng.randrange(1000, vocab_size) if r < 0.9 else seq[p])
            rows.append(seq), types.append(tt), labels.append(lab), nsp.append(is_random), lens.append(len(seq))
        input_ids = pad(rows)
        lab_t = pad(labels, -100)
        batches.append(Batch(
            tensors=dict(input_ids=input_ids, attention_mask=(pad([[1] * n for n in lens])),
                         token_type_ids=pad(types)),
            lens=lens, n_masked=int((lab_t != -100).sum()),
            extra=dict(labels=lab_t, next_sentence_label=torch.tensor(nsp))))
    return batches


def sst2_batches(tok: BertTokenizer, shared: Path, batch_size: int, n_batches: int, seed: int = 0) -> list[Batch]:
    rows = []
    with open(shared / "glue/SST-2/train.tsv", encoding="utf-8") as f:
        next(f)
        for line in f:
            text, label = line.rstrip("\n").rsplit("\t", 1)
            rows.append((text, int(label)))
    rng = random.Random(seed)
    rng.shuffle(rows)                               # what a fine-tuning loader does
    rows = rows[:batch_size * n_batches]
    ids = tok.encode_batch_ids([t for t, _ in rows])
    batches = []
    for start in range(0, len(rows), batch_size):
        seqs = [[tok.cls_token_id] + x[:MAX_LEN - 2] + [tok.sep_token_id] for x in ids[start:start + batch_size]]
        lens = [len(s) for s in seqs]
        batches.append(Batch(
            tensors=dict(input_ids=pad(seqs), attention_mask=pad([[1] * n for n in lens]),
                         token_type_ids=pad([[0] * n for n in lens])),
            lens=lens, extra=dict(labels=torch.tensor([lab for _, lab in rows[start:start + batch_size]]))))
    return batches


# ---- models ----------------------------------------------------------------------------------------------------
class ClassifierHead(nn.Module):
    """BertForSequenceClassification's head: dropout on the pooled output, then a linear layer."""

    def __init__(self, hidden: int, n_labels: int = 2, p: float = 0.1) -> None:
        super().__init__()
        self.dropout = nn.Dropout(p)
        self.classifier = nn.Linear(hidden, n_labels)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.dropout(pooled))


def build_pair(name: str, vocab_size: int, tmp: Path, dropout: float | None = None):
    """(ours, hf): BertForPreTraining with the same weights (ours saved, HF loaded from the folder)."""
    import transformers
    config = BertConfig.preset(name, vocab_size=vocab_size, **dropout_overrides(dropout))
    torch.manual_seed(0)
    ours = BertForPreTraining(config)
    folder = tmp / name
    ours.save_pretrained(folder)
    hf, info = transformers.BertForPreTraining.from_pretrained(folder, attn_implementation="sdpa",
                                                               output_loading_info=True)
    bad = {k: v for k, v in info.items() if v}
    if bad:
        raise SystemExit(f"HF did not load our {name} checkpoint cleanly: {bad}")
    assert hf.cls.predictions.decoder.weight is hf.bert.embeddings.word_embeddings.weight
    return config, ours, hf


def check_parity(ours, hf, batch: Batch, what: str) -> dict[str, float]:
    """Stop unless both start equal (`common.assert_same_start`); the differences and both losses, to log."""
    diffs = assert_same_start(ours, hf, batch.tensors, what)
    modes = ours.training, hf.training
    ours.eval(), hf.eval()
    with torch.no_grad():
        o, h = ours(**batch.tensors, **batch.extra), hf(**batch.tensors, **batch.extra)
    ours.train(modes[0]), hf.train(modes[1])
    return {**diffs, "loss ours": o.loss.item(), "loss hf": h.loss.item()}


# ---- steps -----------------------------------------------------------------------------------------------------
def pretrain_step(model, opt, batches: list[Batch]):
    def run() -> None:
        for b in batches:
            out = model(**b.tensors, labels=b.extra["labels"], next_sentence_label=b.extra["next_sentence_label"])
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    return run


def classify_step(encoder, head, opt, batches: list[Batch]):
    def run() -> None:
        for b in batches:
            pooled = encoder(**b.tensors).pooler_output
            loss = F.cross_entropy(head(pooled), b.extra["labels"])
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    return run


def infer(encoder, batches: list[Batch]):
    @torch.no_grad()
    def run() -> None:
        for b in batches:
            encoder(**b.tensors)
    return run


# ---- one config --------------------------------------------------------------------------------------------------
def useful_flops(config: BertConfig, batches: list[Batch], kind: str) -> float:
    H = config.hidden_size
    total = 0.0
    for b in batches:
        if kind == "pretrain":
            total += count_flops(config, b.lens, n_masked=b.n_masked, pooler=True, nsp=True, training=True,
                                 last_layer_rows=b.n_masked + len(b.lens))
        elif kind == "classify":
            total += count_flops(config, b.lens, pooler=True, training=True) + 3 * len(b.lens) * 2 * H * 2
        else:
            total += count_flops(config, b.lens, pooler=True, training=False)
    return total


def executed_flops_hf(config: BertConfig, batches: list[Batch], kind: str) -> float:
    """What HF multiplies: every padded position, the vocabulary decoder on all of them."""
    H = config.hidden_size
    total = 0.0
    for b in batches:
        B, L = b.tensors["input_ids"].shape
        if kind == "pretrain":
            total += count_flops(config, [L] * B, n_masked=B * L, pooler=True, nsp=True, training=True)
        elif kind == "classify":
            total += count_flops(config, [L] * B, pooler=True, training=True) + 3 * B * 2 * H * 2
        else:
            total += count_flops(config, [L] * B, pooler=True, training=False)
    return total


TARGETS = {  # (config, workload) -> required speed-up over HF
    ("mini", "train: pre-training pairs"): 3.0,
    ("base", "train: pre-training pairs"): 1.3,
    ("mini", "train: SST-2 sentences"): 2.0,
    ("base", "train: SST-2 sentences"): 2.0,
    ("mini", "inference: SST-2 sentences"): 2.0,
    ("base", "inference: SST-2 sentences"): 2.0,
}


def run_config(name: str, args, tok: BertTokenizer, tmp: Path) -> list[dict]:
    pt_bs, cls_bs = DEFAULT_BATCH[name]
    if args.quick:
        pt_bs, cls_bs = max(pt_bs // 2, 8), max(cls_bs // 2, 16)
    if args.batch_size:
        pt_bs = cls_bs = args.batch_size
    n_batches = args.batches or 1
    pt = pretraining_batches(tok, args.shared_data, pt_bs, n_batches, seed=1)
    sst = sst2_batches(tok, args.shared_data, cls_bs, n_batches, seed=2)

    def fresh_pair(stage: str):
        """Both models from the one saved state dict, checked equal, before each training workload."""
        config, ours, hf = build_pair(name, tok.vocab_size, tmp, args.dropout)
        parity = check_parity(ours, hf, pt[0], f"[{name}] {stage}")
        log(f"[{name}] {stage}: same start (max |diff|, eval mode): "
            + ", ".join(f"{k} {v:.2e}" for k, v in parity.items()))
        return config, ours, hf

    config, ours, hf = fresh_pair("pre-training step")
    H = config.hidden_size
    gemm = peak_gemm()
    results = []

    def record(workload: str, kind: str, batches: list[Batch], times: dict[str, list[float]]):
        peak = peak_flops(median(times["gemm"]))
        t_ours, t_hf = median(times["ours"]), median(times["hf"])
        tokens = sum(b.tokens for b in batches)
        padded = sum(b.tensors["input_ids"].numel() for b in batches)
        useful = useful_flops(config, batches, kind)
        row = dict(config=name, workload=workload, batch=f"{len(batches[0].lens)} x {len(batches)}",
                   batch_size=len(batches[0].lens), n_batches=len(batches),
                   mean_len=tokens / sum(len(b.lens) for b in batches), pad=1 - tokens / padded,
                   ours=tokens / t_ours, hf=tokens / t_hf, speedup=t_hf / t_ours,
                   paired=median([h / o for o, h in zip(times["ours"], times["hf"])]),
                   util_ours=useful / t_ours / peak, util_hf=useful / t_hf / peak,
                   exec_hf=executed_flops_hf(config, batches, kind) / t_hf / peak, peak=peak / 1e9,
                   spread_ours=(min(times["ours"]) / t_ours, max(times["ours"]) / t_ours),
                   spread_hf=(min(times["hf"]) / t_hf, max(times["hf"]) / t_hf),
                   target=TARGETS.get((name, workload)))
        log(f"[{name}] {workload}: ours {row['ours']:.0f} tok/s, HF {row['hf']:.0f} tok/s, "
            f"x{row['speedup']:.2f} (paired x{row['paired']:.2f}); "
            f"useful util ours {row['util_ours']:.0%} HF {row['util_hf']:.0%}, HF executed {row['exec_hf']:.0%} "
            f"of {row['peak']:.0f} GFLOP/s")
        results.append(row)

    lr = 1e-4
    # (a) training, pre-training batches
    ours.train(), hf.train()
    opt_o, opt_h = same_optimizer(ours, lr), same_optimizer(hf, lr)
    log(f"[{name}] training step, pre-training pairs ({pt_bs} x {n_batches} batches)")
    times = interleave({"ours": pretrain_step(ours, opt_o, pt), "hf": pretrain_step(hf, opt_h, pt), "gemm": gemm},
                       args.repeats, warmup=1, log=log)
    record("train: pre-training pairs", "pretrain", pt, times)
    del opt_o, opt_h

    # (a) training, SST-2 sentences: encoder + the same classifier head on both sides, from the same start
    config, ours, hf = fresh_pair("SST-2 step")
    ours.train(), hf.train()
    torch.manual_seed(1)
    head_o = ClassifierHead(H)
    head_h = ClassifierHead(H)
    head_h.load_state_dict(head_o.state_dict())
    opt_o = same_optimizer(nn.ModuleList([ours.bert, head_o]), lr)
    opt_h = same_optimizer(nn.ModuleList([hf.bert, head_h]), lr)
    log(f"[{name}] training step, SST-2 sentences ({cls_bs} x {n_batches} batches)")
    times = interleave({"ours": classify_step(ours.bert, head_o, opt_o, sst),
                        "hf": classify_step(hf.bert, head_h, opt_h, sst), "gemm": gemm},
                       args.repeats, warmup=1, log=log)
    record("train: SST-2 sentences", "classify", sst, times)
    del opt_o, opt_h

    # (b) inference
    ours.eval(), hf.eval()
    for workload, batches in (("inference: pre-training pairs", pt), ("inference: SST-2 sentences", sst)):
        log(f"[{name}] {workload}")
        times = interleave({"ours": infer(ours.bert, batches), "hf": infer(hf.bert, batches), "gemm": gemm},
                           args.repeats, warmup=1, log=log)
        record(workload, "infer", batches, times)
    return results


# ---- profile -----------------------------------------------------------------------------------------------------
CATEGORIES = [  # (category, substrings of op / autograd-node names); an op goes to its outermost matching frame
    ("optimizer (fused AdamW)", ("Optimizer.", "_fused_adamw")),
    ("loss", ("cross_entropy", "log_softmax", "LogSoftmax", "nll_loss", "NllLoss")),
    ("dropout fwd+bwd (masks and scaling, hidden and attention)", ("dropout", "Dropout", "bernoulli", "_MaskedScale",
                                                                   "aten::randint", "aten::random_", "aten::ge")),
    ("attention (explicit with dropout, fused SDPA without)", ("scaled_dot_product", "ScaledDotProduct", "Bmm",
                                                              "aten::bmm", "softmax", "Softmax", "baddbmm")),
    ("GEMMs (linear fwd+bwd)", ("aten::linear", "aten::addmm", "aten::mm", "AddmmBackward", "MmBackward",
                                "aten::matmul")),
    ("embedding fwd+bwd", ("aten::embedding", "EmbeddingBackward", "embedding_dense_backward")),
    ("index ops (pack/unpack/row picks)", ("index_select", "IndexSelectBackward", "index_copy", "IndexCopyBackward",
                                           "aten::index", "IndexBackward", "nonzero", "searchsorted",
                                           "index_put", "index_add")),
    ("layernorm fwd+bwd", ("layer_norm", "LayerNormBackward")),
    ("gelu / tanh fwd+bwd", ("gelu", "Gelu", "tanh", "Tanh")),
    ("residual adds / grad accumulation", ("aten::add", "AddBackward", "aten::add_")),
]


def _category(event) -> str:
    chain = []
    e = event
    while e is not None:
        chain.append(e.name)
        e = e.cpu_parent
    for name in reversed(chain):  # outermost first
        for cat, keys in CATEGORIES:
            if any(k in name for k in keys):
                return cat
    return "other"


def profile_training(name: str, args, tok: BertTokenizer, tmp: Path, steps: int) -> str:
    from torch.profiler import ProfilerActivity, profile
    config = BertConfig.preset(name, vocab_size=tok.vocab_size, **dropout_overrides(args.dropout))
    torch.manual_seed(0)
    model = BertForPreTraining(config).train()
    bs = args.batch_size or DEFAULT_BATCH[name][0]
    batches = pretraining_batches(tok, args.shared_data, bs, steps, seed=1)
    opt = same_optimizer(model, 1e-4)
    step = pretrain_step(model, opt, batches)
    step()  # warm-up (optimizer state, allocator)
    reference = peak_gemm()
    peaks = [peak_flops(reference())]
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        step()
    wall = time.perf_counter() - t0
    peaks.append(peak_flops(reference()))
    cats: dict[str, float] = {}
    uncategorised: dict[str, list[float]] = {}  # op -> [calls, self time]: what "other" is made of
    for e in prof.events():
        if e.self_cpu_time_total > 0:
            cat = _category(e)
            cats[cat] = cats.get(cat, 0.0) + e.self_cpu_time_total
            if cat == "other":
                entry = uncategorised.setdefault(e.name, [0, 0.0])
                entry[0] += 1
                entry[1] += e.self_cpu_time_total
    events = [e for e in prof.key_averages() if e.self_cpu_time_total > 0]
    total = sum(cats.values())
    rows = [(c, f"{t / 1e3:.0f}", f"{t / total:.1%}") for c, t in sorted(cats.items(), key=lambda kv: -kv[1])]
    useful = useful_flops(config, batches, "pretrain")
    out = [f"### Profile: bertforge `{name}` training step, pre-training pairs, {bs} x {steps} batches "
           f"(wall {wall:.2f} s under the profiler; dropout {config.hidden_dropout_prob:g} / attention "
           f"{config.attention_probs_dropout_prob:g})", "",
           markdown_table(["category (self CPU time)", "ms", "share"], rows), "",
           markdown_table(["top ops by self CPU time", "calls", "ms", "share"],
                          [(e.key, e.count, f"{e.self_cpu_time_total / 1e3:.0f}",
                            f"{e.self_cpu_time_total / total:.1%}")
                           for e in sorted(events, key=lambda e: -e.self_cpu_time_total)[:15]]),
           "", markdown_table(["ops in \"other\"", "calls", "ms", "share"],
                              [(op, calls, f"{t / 1e3:.0f}", f"{t / total:.1%}") for op, (calls, t)
                               in sorted(uncategorised.items(), key=lambda kv: -kv[1][1])[:8]]),
           "", gemm_shape_table(prof, peaks, useful, total / 1e6, wall)]
    return "\n".join(out)


def gemm_shape_table(prof, peaks: list[float], useful: float, step_seconds: float, wall: float) -> str:
    """Each GEMM shape's rate against the `common.PEAK_GEMM` reference timed just before and after the profiled
    step: whether the model's own GEMMs run at the peak, and so what utilisation the rest of the step leaves."""
    peak = max(peaks)
    rows, gemm_time, gemm_flop = [], 0.0, 0.0
    for e in prof.key_averages(group_by_input_shape=True):
        if e.key not in ("aten::mm", "aten::addmm") or not e.input_shapes:
            continue
        a, b = (e.input_shapes[0], e.input_shapes[1]) if e.key == "aten::mm" else (e.input_shapes[1], e.input_shapes[2])
        seconds, flop = e.self_cpu_time_total / 1e6, 2.0 * a[0] * a[1] * b[1] * e.count
        gemm_time, gemm_flop = gemm_time + seconds, gemm_flop + flop
        rows.append((seconds, [e.key, f"{a} x {b}", e.count, f"{seconds * 1e3:.0f}", f"{flop / seconds / 1e9:.1f}",
                               f"{flop / seconds / peak:.0%}"]))
    rows = [r for _, r in sorted(rows, key=lambda r: -r[0])[:12]]
    summary = (f"All GEMMs: {gemm_time:.2f} s of {step_seconds:.2f} s ({gemm_time / step_seconds:.0%} of the step) at "
               f"{gemm_flop / gemm_time / 1e9:.1f} GFLOP/s = {gemm_flop / gemm_time / peak:.0%} of the reference peak "
               f"({', '.join(f'{p / 1e9:.1f}' for p in peaks)} GFLOP/s before/after). Useful-FLOP utilisation of the "
               f"profiled step (wall time, profiler included): {useful / wall / peak:.0%}.")
    return "\n".join([markdown_table(["GEMM", "shape", "calls", "ms", "GFLOP/s", "of peak"], rows), "", summary])


# ---- main --------------------------------------------------------------------------------------------------------
def fmt_rows(results: list[dict]) -> str:
    rows = []
    for r in results:
        target = "" if r["target"] is None else (f">= {r['target']:g}x: " +
                                                   ("hit" if r["speedup"] >= r["target"] else "missed"))
        rows.append((r["config"], r["workload"], r["batch"], f"{r['mean_len']:.1f}", f"{r['pad']:.0%}",
                     f"{r['ours']:,.0f}", f"{r['hf']:,.0f}", f"**{r['speedup']:.2f}x**", f"{r['paired']:.2f}x", target,
                     f"{r['util_ours']:.0%}", f"{r['util_hf']:.0%}", f"{r['exec_hf']:.0%}", f"{r['peak']:.0f}"))
    return markdown_table(["config", "workload", "batch x n", "mean len", "pad", "bertforge tok/s", "HF tok/s",
                           "speed-up", "paired", "target", "useful util (ours)", "useful util (HF)",
                           "executed util (HF)", "GEMM peak GFLOP/s"], rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--configs", default="mini,base")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=None, help="override every workload's batch size")
    p.add_argument("--batches", type=int, default=None,
                   help="distinct batches (optimizer steps) per timed turn (default 1)")
    p.add_argument("--quick", action="store_true", help="half-size batches, for a shorter run")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--shared-data", type=Path, default=default_shared_data())
    p.add_argument("--vocab", type=Path, default=None, help="folder with vocab.txt (default: all-MiniLM-L6-v2's)")
    p.add_argument("--profile", action="store_true", help="also profile bertforge's training step per config")
    p.add_argument("--profile-only", action="store_true")
    p.add_argument("--profile-steps", type=int, default=2)
    p.add_argument("--dropout", type=float, default=None, metavar="P",
                   help="hidden and attention dropout on both sides (default: BERT's 0.1; 0 lets CPU attention "
                        "take SDPA's fused kernel)")
    p.add_argument("--records", default=None, metavar="DIR",
                   help="also write the table as results-store records (group bench-model) into DIR")
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error("--repeats must be >= 1")
    start_process(args.threads)
    args.vocab = args.vocab or minilm_folder()
    tok = BertTokenizer.from_pretrained(args.vocab)
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    for c in configs:
        if c not in DEFAULT_BATCH:
            p.error(f"--configs: {c!r} not one of {', '.join(DEFAULT_BATCH)}")
    log(" | ".join(f"{k}: {v}" for k, v in machine_info().items()))
    start = time.perf_counter()
    results: list[dict] = []
    profiles: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        if not args.profile_only:
            for c in configs:
                results += run_config(c, args, tok, Path(tmp))
        if args.profile or args.profile_only:
            for c in configs:
                profiles.append(profile_training(c, args, tok, Path(tmp), args.profile_steps))
    if results:
        print("\n" + fmt_rows(results))
        for r in results:
            log(f"  spread (min/median, max/median) {r['config']} {r['workload']}: ours "
                f"{r['spread_ours'][0]:.2f}/{r['spread_ours'][1]:.2f}, "
                f"HF {r['spread_hf'][0]:.2f}/{r['spread_hf'][1]:.2f}")
    for text in profiles:
        print("\n" + text)
    if args.records and results:
        from bertforge.results_store import write_records
        command = portable_command("benchmarks/bench_model.py", list(sys.argv[1:] if argv is None else argv))
        log("records: " + str(write_records("bench-model", make_records(results, args, command), args.records,
                                            tables=make_tables(results, args))))
    log(f"\ntotal {time.perf_counter() - start:.0f} s")
    return 0


# ---- records -----------------------------------------------------------------------------------------------------
# each workload of `run_config` -> its part of the records' ids
WORKLOAD_SLUGS = {"train: pre-training pairs": "train-pairs", "train: SST-2 sentences": "train-sst2",
                  "inference: pre-training pairs": "infer-pairs", "inference: SST-2 sentences": "infer-sst2"}
# a workload's records: (id slug, column of the published table, key of the result row, unit, digits, cell style)
RECORD_COLUMNS = (("bertforge-tok-s", "bertforge tok/s", "ours", "tokens/s", 0, "bare"),
                  ("transformers-tok-s", "transformers tok/s", "hf", "tokens/s", 0, "bare"),
                  ("vs-transformers", "vs transformers", "speedup", "x", 2, "bold"),
                  ("useful-util-ours", "useful util (ours)", "util_ours", "%", 0, ""))
THREADS = {1: "one thread", 2: "two threads"}


def portable_path(path: Path | str) -> str:
    """`path` as a record names it (`bertforge.measuring.portable_path`)."""
    from bertforge.measuring import portable_path
    return portable_path(path)


def record_group(config: str, args) -> str:
    """A config's part of the ids: the config, and a dropout other than BERT's default under ids of its own."""
    return config if args.dropout is None else f"{config}-dropout-{args.dropout:g}".replace(".", "-")


def workload_label(row: dict) -> str:
    """A workload as the table names it: a training workload with its batch size and its share of padding."""
    if not row["workload"].startswith("train: "):
        return row["workload"]
    batch = f"{row['batch_size']}" + (f" x {row['n_batches']}" if row["n_batches"] > 1 else "")
    return f"{row['workload']} ({batch}, {100 * row['pad']:.0f} % padding)"


def config_data(results: list[dict], config: str, args) -> str:
    """`data` of a config's records: both kinds of batches (the inference workloads run the training ones) with
    their size and padding, and the files they are read from."""
    shared = portable_path(args.shared_data)
    batches = {row["workload"]: f"{row['batch_size']} x {row['n_batches']} batches, {100 * row['pad']:.0f} % padding"
               for row in results if row["config"] == config and row["workload"].startswith("train: ")}
    return (f"pre-training pairs ({batches['train: pre-training pairs']}) from "
            f"{shared}/corpus/wikipedia-en-2018/wiki_en.txt.xz; sentences ({batches['train: SST-2 sentences']}) of "
            f"{shared}/glue/SST-2/train.tsv")


def make_records(results: list[dict], args, command: str) -> list:
    """Each workload's records: both sides' real tokens per second (medians), the speed-up (the two medians
    divided, so also the two throughputs divided) and bertforge's useful utilisation (%)."""
    import dataclasses
    from bertforge.results_store import Record
    threads = THREADS.get(args.threads, f"{args.threads} threads")
    dropout = "" if args.dropout is None else f", dropout {args.dropout:g}"
    records = []
    for row in results:
        what = f"bench_model, {row['config']}{dropout}, {threads}: {row['config']} {row['workload']}"
        data = config_data(results, row["config"], args)
        base = f"bench-model/{record_group(row['config'], args)}/{WORKLOAD_SLUGS[row['workload']]}"
        for slug, column, key, unit, digits, _ in RECORD_COLUMNS:
            value = 100 * row[key] if unit == "%" else row[key]
            record = Record.measured(f"{base}/{slug}", value, unit, f"{what}, {column}", data, seeds=args.repeats,
                                     command=command, digits=digits)
            records.append(dataclasses.replace(record, threads=args.threads))  # torch's threads (start_process)
    return records


def make_tables(results: list[dict], args) -> dict[str, dict]:
    """One table per config (`bench-model-<config>`): a row per workload, a cell per record."""
    styles = {"bare": "{{{}|bare}}", "bold": "**{{{}}}**", "": "{{{}}}"}
    tables: dict[str, dict] = {}
    for row in results:
        group = record_group(row["config"], args)
        spec = tables.setdefault(f"bench-model-{group}", {
            "header": ["config", "workload", *(column[1] for column in RECORD_COLUMNS)],
            "align": ["---"] * (2 + len(RECORD_COLUMNS)), "rows": []})
        base = f"bench-model/{group}/{WORKLOAD_SLUGS[row['workload']]}"
        spec["rows"].append([row["config"], workload_label(row),
                             *(styles[style].format(f"{base}/{slug}") for slug, *_, style in RECORD_COLUMNS)])
    return tables


if __name__ == "__main__":
    raise SystemExit(main())

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

    python benchmarks/bench_step_parts.py [--data PREPARED_DIR] [--repeats 7] [--threads 1]
"""
from __future__ import annotations

import argparse
import copy
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from bench_model import log, pretraining_batches  # noqa: E402
from bertforge.measuring import prepare_slice
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


def op_rows(repeats: int) -> list[list[str]]:
    rows = []
    for what, shape in (("attention probabilities", (4, 32, 128, 128)), ("hidden states", (4096, 256))):
        x = torch.randn(shape)
        t = interleave({"F.dropout": fwd_bwd(lambda a: F.dropout(a, 0.1, True), x),
                        "bertforge": fwd_bwd(lambda a: dropout(a, 0.1), x)}, repeats, warmup=2)
        ref, ours = median(t["F.dropout"]), median(t["bertforge"])
        rows.append([f"dropout 0.1 fwd+bwd, {what} {list(shape)}", f"{ref * 1e3:.1f}", f"{ours * 1e3:.1f}",
                     f"**{ref / ours:.2f}x**"])
    h, B, L, d = 4, 32, 128, 64
    q, k, v = (torch.randn(h, B, L, d) for _ in range(3))
    lengths = torch.randint(L // 4, L + 1, (B,))
    mask = (torch.arange(L)[None] < lengths[:, None])[None, :, None, :]
    t = interleave({"sdpa": fwd_bwd(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, attn_mask=mask,
                                                                                  dropout_p=0.1), q, k, v),
                    "explicit": fwd_bwd(lambda a, b, c: attention.attention_with_dropout(a, b, c, mask, 0.1), q, k, v)},
                   repeats, warmup=2)
    rows.append([f"attention, dropout 0.1, fwd+bwd, [{h}, {B}, {L}, {d}], padding mask",
                 f"{median(t['sdpa']) * 1e3:.1f}", f"{median(t['explicit']) * 1e3:.1f}",
                 f"**{median(t['sdpa']) / median(t['explicit']):.2f}x**"])
    x, w, b = torch.randn(576, 256), torch.randn(30522, 256), torch.randn(30522)
    t = interleave({"F.linear": forward_only(F.linear, x, w, b),
                    "tiled": forward_only(tiled_linear.tiled_linear, x, w, b)}, repeats, warmup=2)
    rows.append(["vocabulary decoder forward, [576, 256] x [256, 30522]", f"{median(t['F.linear']) * 1e3:.1f}",
                 f"{median(t['tiled']) * 1e3:.1f}", f"**{median(t['F.linear']) / median(t['tiled']):.2f}x**"])
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


def step_rows(name: str, batches: list[dict], repeats: int, vocab_size: int) -> list[list[str]]:
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
    before = times["before"]
    rows = []
    for label in VARIANTS:
        paired = median([b / t for b, t in zip(before, times[label])])
        rows.append([name, f"{fill:.0%}", f"{grid[4] / grid[1]:.2f}", label, f"{median(times[label]):.3f}",
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
    args = p.parse_args(argv)
    start_process(args.threads)
    args.vocab = args.vocab or minilm_folder()
    log(" | ".join(f"{k}: {v}" for k, v in machine_info().items()))
    tok = BertTokenizer.from_pretrained(args.vocab)
    print(markdown_table(["op", "PyTorch ms", "bertforge ms", "speed-up"], op_rows(args.repeats)), flush=True)

    from bertforge.data import MaskingConfig, PretrainingDataset
    from bertforge.pretraining.pretrain import next_batch
    with tempfile.TemporaryDirectory() as tmp:
        data = args.data or prepare_slice(str(args.vocab), 2.0, Path(tmp))
        ds = PretrainingDataset(data, tok, batch_size=args.batch_size, max_seq_length=128, seed=0,
                                masking=MaskingConfig(rate=0.15))
        real = [next_batch(ds) for _ in range(args.batches)]
    pairs = [dict(**b.tensors, **b.extra) for b in
             pretraining_batches(tok, args.shared_data, args.batch_size, args.batches, seed=1)]
    rows = step_rows("pre-training batches (segment pairs)", real, args.repeats, tok.vocab_size)
    rows += step_rows("bench_model's sentence pairs", pairs, args.repeats, tok.vocab_size)
    print()
    print(markdown_table(["batches", "real tokens", "grouped grid cost / one grid", "variant", "s per turn",
                          "vs before", "paired"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

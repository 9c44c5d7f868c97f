"""Infilling held-out Wikipedia sentences with a masked LM: Mask-Predict at several T, Gibbs, MH, left to right.

Sentences come from the LAST `--articles` articles of the corpus (a model continued-pre-trained on a slice
from the front has not seen them). In each sentence one span of 1-4 word pieces (length uniform, position
uniform among the non-special tokens) is masked; every method fills the same spans. Reported per method:
token accuracy (masked pieces recovered exactly), exact span match (the whole span right), and with --pll
the mean pseudo-log-likelihood per token of the filled sentences (higher = more probable under the MLM
itself; the originals' value is given for reference).

    python experiments/generation_infill.py --model DIR [--corpus ../shared/data/corpus/wikipedia-en-2018/wiki_en.txt.xz]
        [--articles 300] [--sentences 100] [--methods NAME,...] [--pll] [--seed 0] [--out results.json]
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import torch

from bertforge.generation import generate, load_mlm, pseudo_log_likelihood
from bertforge.measuring import last_articles, pick_sentences

METHODS = {
    # name: generate() options
    "mask-predict T=1": {"sampler": "mask-predict", "iterations": 1},
    "mask-predict T=2": {"sampler": "mask-predict", "iterations": 2},
    "mask-predict T=4": {"sampler": "mask-predict", "iterations": 4},
    "mask-predict T=10": {"sampler": "mask-predict", "iterations": 10},
    "left-to-right (greedy)": {"sampler": "left-to-right"},
    "gibbs 10 sweeps temperature 1": {"sampler": "gibbs", "iterations": 10},
    "gibbs 10 sweeps temperature 0.1": {"sampler": "gibbs", "iterations": 10, "temperature": 0.1},
    "mh 3 sweeps temperature 1": {"sampler": "mh", "iterations": 3},
}


def mask_span(tokenizer, sentence: str, rng: random.Random) -> tuple[str, list[str]]:
    """The sentence as word pieces with one span of 1-4 pieces replaced by masks, and the true pieces."""
    pieces = tokenizer.convert_ids_to_tokens(tokenizer.encode(sentence, add_special_tokens=False))
    length = rng.randint(1, 4)
    start = rng.randint(0, len(pieces) - length)
    truth = pieces[start:start + length]
    masked = pieces[:start] + [tokenizer.mask_token] * length + pieces[start + length:]
    return masked, truth


def pieces_to_text(tokenizer, pieces: list[str]) -> str:
    """Word pieces back to text whose re-tokenization gives the same pieces (and masks)."""
    out = []
    for piece in pieces:
        if piece.startswith("##") and out:
            out[-1] += piece[2:]
        else:
            out.append(piece)
    return " ".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--corpus", default="../shared/data/corpus/wikipedia-en-2018/wiki_en.txt.xz")
    parser.add_argument("--articles", type=int, default=300)
    parser.add_argument("--sentences", type=int, default=100)
    parser.add_argument("--pll", action="store_true", help="also score the filled sentences (slow: one copy per token)")
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset of the methods")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    model, tokenizer = load_mlm(args.model)
    rng = random.Random(args.seed)
    sentences = pick_sentences(last_articles(Path(args.corpus), args.articles), tokenizer, args.sentences, rng)
    cases = []
    for sentence in sentences:
        masked, truth = mask_span(tokenizer, sentence, rng)
        text = pieces_to_text(tokenizer, masked)
        n_masks = tokenizer.encode(text).count(tokenizer.mask_token_id)
        original = pieces_to_text(tokenizer, [*masked[:masked.index(tokenizer.mask_token)], *truth,
                                              *masked[masked.index(tokenizer.mask_token) + len(truth):]])
        if n_masks == len(truth):
            cases.append((text, truth, original))
    print(f"{len(cases)} sentences, {sum(len(t) for _, t, _ in cases)} masked pieces", file=sys.stderr)

    results = {"sentences": len(cases), "masked_pieces": sum(len(t) for _, t, _ in cases), "methods": {}}
    if args.pll:
        results["originals_pll_per_token"] = pll_per_token(model, tokenizer, [o for _, _, o in cases])
        print(f"originals: PLL/token {results['originals_pll_per_token']:.3f}", flush=True)
    for name in [m for m in args.methods.split(",") if m]:
        options = METHODS[name]
        start = time.perf_counter()
        right = spans_right = total = 0
        filled, acceptance = [], []
        by_length: dict[int, list[int]] = {}   # span length -> [pieces right, pieces, spans right, spans]
        for i, (text, truth, _) in enumerate(cases):
            out = generate(model, tokenizer, text=text, seed=args.seed + i, **options)[0]
            right += sum(a == b for a, b in zip(out["tokens"], truth))
            spans_right += out["tokens"] == truth
            total += len(truth)
            tally = by_length.setdefault(len(truth), [0, 0, 0, 0])
            tally[0] += sum(a == b for a, b in zip(out["tokens"], truth))
            tally[1] += len(truth)
            tally[2] += out["tokens"] == truth
            tally[3] += 1
            filled.append(out["text"])
            if "acceptance_rate" in out:
                acceptance.append(out["acceptance_rate"])
        seconds = time.perf_counter() - start
        row = {"token_accuracy": right / total, "exact_span_match": spans_right / len(cases), "seconds": seconds,
               "by_span_length": {n: {"spans": t[3], "token_accuracy": t[0] / t[1], "exact_span_match": t[2] / t[3]}
                                  for n, t in sorted(by_length.items())}}
        if acceptance:
            row["acceptance_rate"] = sum(acceptance) / len(acceptance)
        if args.pll:
            row["pll_per_token"] = pll_per_token(model, tokenizer, filled)
        results["methods"][name] = row
        print(f"{name:34s} token acc {row['token_accuracy']:.3f}  span match {row['exact_span_match']:.3f}  "
              f"{seconds:.0f} s" + (f"  acceptance {row['acceptance_rate']:.2f}" if acceptance else "")
              + (f"  PLL/token {row['pll_per_token']:.3f}" if args.pll else ""), flush=True)
        print(" " * 34 + "  by span length: " + "  ".join(
            f"{n}: {v['token_accuracy']:.3f}/{v['exact_span_match']:.3f}" for n, v in row["by_span_length"].items()),
            flush=True)
        if args.out:
            args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


def pll_per_token(model, tokenizer, texts: list[str]) -> float:
    scored = pseudo_log_likelihood(model, tokenizer, texts)
    return sum(r["pll"] for r in scored) / sum(len(tokenizer.encode(t, add_special_tokens=False)) for t in texts)


if __name__ == "__main__":
    torch.set_grad_enabled(False)
    main()

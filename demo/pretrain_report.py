"""What the demo's from-scratch model answered, and whether it left the frequent-word plateau.

A masked LM early in training answers every mask with the corpus's most frequent tokens ("the , . a and");
that is the plateau. The demo's mark: for every probe, at least one of the top-5 answers is a word outside the
corpus's 20 most frequent tokens. How far a time budget gets depends on how many steps the machine made in
it, so the report gives the steps and the held-out loss beside the verdict instead of a fixed claim.

    python demo/pretrain_report.py --model demo-output/tiny-fast --corpus demo-output/data/reviews.txt PROBE...
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

FREQUENT = 20  # the plateau's answers come from the corpus's most frequent tokens
LEFT_PLATEAU_STEPS = 1874  # steps of batch 8 after which the demo's model had left it (docs/RESULTS.md)


def frequent_tokens(corpus: Path, n: int = FREQUENT) -> set[str]:
    """The corpus's `n` most frequent tokens (lowercased words and punctuation marks)."""
    counts: Counter[str] = Counter()
    with corpus.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            counts.update(re.findall(r"\w+|[^\w\s]", line.lower()))
    return {token for token, _ in counts.most_common(n)}


def off_plateau(answers: list[str], frequent: set[str]) -> list[str]:
    """The answers that are words outside the frequent tokens (word pieces and punctuation do not count)."""
    return [a for a in answers if a not in frequent and not a.startswith("##") and re.fullmatch(r"[a-z]+", a)]


def more_training(steps: int) -> str:
    """What to run after a run of `steps` steps missed the mark: a step count, which a busy machine reaches too
    (a time budget there buys fewer steps, so a longer budget may still fall short)."""
    target = max(LEFT_PLATEAU_STEPS, 2 * steps)
    why = (f"a run of {LEFT_PLATEAU_STEPS:,} steps left it (docs/RESULTS.md)" if steps < LEFT_PLATEAU_STEPS
           else f"this run's {steps:,} steps were not enough: twice as many")
    return (f"{why}; give the demo a step count, which a busy machine reaches too, only later: "
            f"DEMO_PRETRAIN_STEPS={target} make demo")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="the pre-trained folder")
    parser.add_argument("--corpus", type=Path, required=True, help="the text it was pre-trained on")
    parser.add_argument("--baseline", action="store_true",
                        help="a run meant to stay on the plateau (the demo's first): no advice to train longer")
    parser.add_argument("probes", nargs="+", help="sentences with one [MASK] each")
    args = parser.parse_args(argv)

    from bertforge.generation.fill_mask import fill_mask
    from bertforge.generation.loading import load_mlm

    summary = json.loads((args.model / "training_summary.json").read_text(encoding="utf-8"))
    model, tokenizer = load_mlm(str(args.model), device="cpu")
    frequent = frequent_tokens(args.corpus)
    filled = fill_mask(model, tokenizer, args.probes, top_k=5)
    left = 0
    print(f"{args.model.name}: {summary['step']:,} steps in {summary['elapsed_seconds']:.0f} s, held-out MLM loss "
          f"{(summary.get('final_eval') or {}).get('mlm_loss', float('nan')):.2f}; it answered:")
    for probe, masks in zip(args.probes, filled):
        answers = [token for token, _ in masks[0]["top"]] if masks else []
        fresh = off_plateau(answers, frequent)
        left += bool(fresh)
        print(f"  {probe}  ->  {' '.join(answers)}")
    if left == len(args.probes):
        print(f"mark reached: every probe has an answer beyond the corpus's {FREQUENT} most frequent tokens "
              "(the model left the frequent-word plateau)")
    else:
        print(f"mark not reached: {len(args.probes) - left} of {len(args.probes)} probes are answered with the "
              f"corpus's {FREQUENT} most frequent tokens only (the frequent-word plateau). "
              + ("As expected this early: the next run trains longer." if args.baseline
                 else more_training(int(summary["step"]))))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`bertforge score`: pseudo-log-likelihood of sentences under a masked LM; one JSON line per sentence."""
from __future__ import annotations

import argparse
import json

from bertforge.commands.generate import add_mlm_run_arguments


def register(sub) -> None:
    p = sub.add_parser("score", help="pseudo-log-likelihood of sentences under a masked LM",
                       description="Score each sentence by its pseudo-log-likelihood (Salazar et al. 2020): "
                                   "every token between the special tokens is masked in turn and the natural "
                                   "log-probabilities of the true tokens are summed. All masked copies of many "
                                   "sentences run together in batches of --max-tokens padded tokens.")
    p.add_argument("--model", required=True, metavar="DIR", help="a checkpoint folder with a trained MLM head")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--input", metavar="FILE", help="one sentence per line (.txt/.gz/.xz); blank lines skipped")
    source.add_argument("--text", action="append", help="a sentence (repeatable)")
    p.add_argument("--per-token", action="store_true", help="also print the tokens and their log-probabilities")
    add_mlm_run_arguments(p)
    p.set_defaults(run=run)


def read_sentences(path: str) -> tuple[list[str], list[str]]:
    """The non-blank lines of `path` and their "FILE:LINE" labels for error messages."""
    from bertforge.textio import iter_lines
    texts, labels = [], []
    for number, line in enumerate(iter_lines(path), 1):
        if line.strip():
            texts.append(line.strip())
            labels.append(f"{path}:{number}")
    if not texts:
        raise ValueError(f"{path}: no sentences (the file is empty or blank)")
    return texts, labels


def run(args: argparse.Namespace) -> int:
    from bertforge.generation import load_mlm, pseudo_log_likelihood
    from bertforge.training.progress import progress

    if args.max_tokens < 1:
        raise ValueError(f"--max-tokens must be at least 1, got {args.max_tokens}")
    if args.input:
        texts, labels = read_sentences(args.input)
    else:
        texts, labels = args.text, [f"--text #{i + 1}" for i in range(len(args.text))]
    model, tokenizer = load_mlm(args.model, device=args.device)
    bar = None if args.no_progress else (lambda total: progress(total, bar=True, desc="score", unit="copy"))
    results = pseudo_log_likelihood(model, tokenizer, texts, per_token=args.per_token,
                                    max_tokens=args.max_tokens, precision=args.precision, labels=labels,
                                    progress=bar)
    for result in results:
        print(json.dumps(result, ensure_ascii=False), flush=True)
    return 0

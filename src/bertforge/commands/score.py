"""`bertforge score`: pseudo-log-likelihood of sentences under a masked LM; one JSON line per sentence."""
from __future__ import annotations

import argparse
import json

from bertforge.commands.generate import add_mlm_run_arguments, naming_the_model
from bertforge.commands.options import add_text_argument, check_plain_text


def register(sub) -> None:
    p = sub.add_parser("score", help="pseudo-log-likelihood of sentences under a masked LM",
                       description="Score each sentence by its pseudo-log-likelihood (Salazar et al. 2020): "
                                   "every token between the special tokens is masked in turn and the natural "
                                   "log-probabilities of the true tokens are summed. All masked copies of many "
                                   "sentences run together in batches of --max-tokens padded tokens.")
    p.add_argument("--model", required=True, metavar="DIR", help="a checkpoint folder with a trained MLM head")
    p.add_argument("--input", metavar="FILE", help="one sentence per line (.txt/.gz/.xz); blank lines skipped")
    add_text_argument(p, "sentences given on the command line (repeatable; scored before --input's)")
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

    if not args.text and not args.input:
        raise ValueError("nothing to score: give --input FILE or --text")
    texts, labels = list(args.text or []), [f"--text #{i + 1}" for i in range(len(args.text or []))]
    if args.input:
        check_plain_text(args.input, "score")
        more, where = read_sentences(args.input)
        texts, labels = texts + more, labels + where
    model, tokenizer = load_mlm(args.model, device=args.device)
    bar = None if args.no_progress else (lambda total: progress(total, bar=True, desc="score", unit="copy"))
    with naming_the_model(args):
        results = pseudo_log_likelihood(model, tokenizer, texts, per_token=args.per_token,
                                        max_tokens=args.max_tokens, precision=args.precision, labels=labels,
                                        progress=bar)
    for result in results:
        print(json.dumps(result, ensure_ascii=False), flush=True)
    return 0

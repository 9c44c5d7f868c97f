"""`bertforge generate`: infill masks or generate text with a masked LM; one JSON line per sample."""
from __future__ import annotations

import argparse
import json

from bertforge.commands import add_common
from bertforge.commands.options import existing_file, non_negative_int, positive_int


def register(sub) -> None:
    p = sub.add_parser("generate", help="fill masks or generate text with a masked language model",
                       description="Sample from a masked LM (BERT, RoBERTa, ALBERT, DistilBERT...). Infilling: "
                                   "a --text with mask tokens ([MASK] works for every family; a run of masks is "
                                   "a span), optionally expanded by --span-lengths. Unconditional: --length N "
                                   "tokens after an optional --prefix. Samplers: mask-predict (Ghazvininejad et "
                                   "al. 2019), gibbs (Wang & Cho 2019), mh (Metropolis-Hastings over the MLM's "
                                   "energy, Goyal et al. 2021) and left-to-right. Prints one JSON line per "
                                   "sample; the same --seed gives the same samples. With an encoder-decoder "
                                   "(`bertforge seq2seq`'s output): one target per --source (or per line of "
                                   "--input), by mask-predict or left-to-right.")
    p.add_argument("--model", required=True, metavar="DIR",
                   help="a checkpoint folder with a trained MLM head, or an encoder-decoder folder")
    p.add_argument("--source", action="append", help="encoder-decoder: a source text (repeat for more)")
    p.add_argument("--input", type=existing_file, metavar="FILE",
                   help='encoder-decoder: sources, one per line (.txt) or {"source": ...} per line (.jsonl)')
    p.add_argument("--length-beam", type=positive_int, default=3,
                   help="encoder-decoder: target lengths tried per source (the most likely ones)")
    p.add_argument("--max-source-length", type=positive_int, default=256, help="encoder-decoder: source tokens kept")
    p.add_argument("--text", help='text with masks, e.g. "the [MASK] [MASK] sat on the mat ."')
    p.add_argument("--span-lengths", metavar="N,...", help="expand the i-th mask of --text into N masks")
    p.add_argument("--length", type=int, help="generate this many tokens (unconditional generation)")
    p.add_argument("--prefix", help="with --length: text the generated tokens follow")
    p.add_argument("--sampler", default="mask-predict", help="mask-predict (default), gibbs, mh or left-to-right")
    p.add_argument("--iterations", type=int, help="mask-predict: T; gibbs and mh: sweeps over the targets "
                                          "(default 10)")
    p.add_argument("--num-samples", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=8, help="samples run together")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--temperature", type=float, help="default 0 (greedy) for mask-predict and left-to-right, "
                                             "1 for gibbs and mh")
    p.add_argument("--top-k", type=non_negative_int, default=0, help="sample from the k most likely tokens (0: all)")
    p.add_argument("--burn-in", type=non_negative_int, default=0, help="gibbs: sweeps drawn from the full distribution "
                                                  "before --top-k applies")
    p.add_argument("--parallel", action="store_true", help="gibbs: re-draw all targets at once each sweep")
    add_mlm_run_arguments(p)
    p.set_defaults(run=run)


def add_mlm_run_arguments(p) -> None:
    """How a masked LM runs, for `generate` and `score` alike: batch size in tokens, device, precision."""
    p.add_argument("--max-tokens", type=positive_int, default=8192, help="padded tokens per model call")
    p.add_argument("--device", default="cpu", choices=["auto", "cpu", "cuda"], help="where the model runs")
    p.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16"],
                   help="auto: bf16 on CUDA, fp32 on CPU; bf16 is faster on CPUs with native bf16 but moves "
                        "log-probabilities by about 1e-2")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    add_common(p)


def parse_lengths(text: str | None, flag: str = "--span-lengths") -> list[int] | None:
    if not text:
        return None
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"{flag}: expected comma-separated whole numbers such as 2,3, got {text!r}") from None


def run(args: argparse.Namespace) -> int:
    from bertforge.generation import generate, load_mlm
    from bertforge.generation.loading import is_encoder_decoder
    from bertforge.training.progress import progress

    if is_encoder_decoder(args.model):
        return run_conditional(args)
    if args.source or args.input:
        raise ValueError(f"--source/--input need an encoder-decoder folder; {args.model} is a masked LM (give "
                         "--text, or --length)")
    lengths = parse_lengths(args.span_lengths)
    model, tokenizer = load_mlm(args.model, device=args.device)
    bar = None if args.no_progress else (lambda total: progress(total, bar=True, desc="generate", unit="call"))
    results = generate(model, tokenizer, text=args.text, span_lengths=lengths, length=args.length,
                       prefix=args.prefix, sampler=args.sampler, iterations=args.iterations,
                       num_samples=args.num_samples, batch_size=args.batch_size, seed=args.seed,
                       temperature=args.temperature, top_k=args.top_k, burn_in=args.burn_in,
                       parallel=args.parallel, max_tokens=args.max_tokens, precision=args.precision,
                       progress=bar)
    for result in results:
        print(json.dumps(result, ensure_ascii=False), flush=True)
    return 0


def read_sources(args: argparse.Namespace) -> list[str]:
    """--source texts, then --input's lines (.jsonl: each line's "source"); one-line errors name the line."""
    sources = list(args.source or [])
    if args.input is not None:
        from bertforge.tasks.readers.base import iter_lines
        for number, line in iter_lines(args.input):
            if not line.strip():
                continue
            if str(args.input).endswith(".jsonl"):
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as err:
                    raise ValueError(f"{args.input}, line {number}: expected a JSON object, got invalid JSON "
                                     f"({err.msg})") from None
                if not isinstance(record, dict) or not isinstance(record.get("source"), str):
                    raise ValueError(f"{args.input}, line {number}, field 'source': expected a string")
                line = record["source"]
            sources.append(line)
    if not sources:
        raise ValueError("an encoder-decoder generates from --source TEXT or --input FILE")
    return sources


def run_conditional(args: argparse.Namespace) -> int:
    from bertforge.generation.conditional import CONDITIONAL_SAMPLERS, generate_conditional
    from bertforge.generation.loading import load_encoder_decoder
    from bertforge.training.progress import progress

    if args.text or args.length:
        raise ValueError("--text/--length are for masked LMs; an encoder-decoder takes --source or --input")
    if args.sampler not in CONDITIONAL_SAMPLERS:
        raise ValueError(f"--sampler: an encoder-decoder decodes with {' or '.join(CONDITIONAL_SAMPLERS)}, "
                         f"got {args.sampler!r}")
    sources = read_sources(args)
    model, tokenizer = load_encoder_decoder(args.model, device=args.device)
    bar = None if args.no_progress else (lambda total: progress(total, bar=True, desc="generate", unit="source"))
    results = generate_conditional(model, tokenizer, sources, sampler=args.sampler,
                                   iterations=10 if args.iterations is None else args.iterations,
                                   length_beam=args.length_beam, batch_size=args.batch_size,
                                   max_source_length=args.max_source_length, precision=args.precision,
                                   progress=bar)
    for result in results:
        print(json.dumps(result, ensure_ascii=False), flush=True)
    return 0

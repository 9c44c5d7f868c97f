"""`bertforge generate`: infill masks or generate text with a masked LM; one JSON line per sample."""
from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Iterator

from bertforge.commands import add_common
from bertforge.commands.flags import add_settings_arguments
from bertforge.commands.options import add_text_argument, bounded_int, existing_file
from bertforge.device import PRECISION_HELP, DeviceOptions
from bertforge.commands.options import at_most, non_negative_float

# Upper bounds of the counts, checked at parse time: each is far beyond any useful run (mask-predict uses T=10,
# Gibbs sampling a few hundred sweeps), and a slip of the keyboard past it would otherwise run for days or
# allocate without limit.
MAX_ITERATIONS = 1_000
MAX_SAMPLES = 10_000
MAX_BATCH = 1_024
MAX_LENGTH = 8_192       # the longest position table of any family (ModernBERT); the model's own limit is checked too
MAX_LENGTH_BEAM = 100
MAX_TOP_K = 1_000_000    # beyond every vocabulary: "all tokens"
MAX_SEED = 2**32 - 1
MAX_TOKENS = 1 << 20


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
    p.add_argument("--length-beam", type=bounded_int(1, MAX_LENGTH_BEAM), default=3,
                   help=f"encoder-decoder: target lengths tried per source, the most likely ones (default 3; "
                        f"1-{MAX_LENGTH_BEAM})")
    p.add_argument("--max-source-length", type=bounded_int(1, MAX_LENGTH), default=256,
                   help=f"encoder-decoder: source tokens kept (default 256; 1-{MAX_LENGTH:,})")
    add_text_argument(p, 'masked LM: a text with masks, e.g. "the [MASK] [MASK] sat on the mat ." (repeatable: '
                         '--num-samples samples of each; every sample\'s "input" is the index of its --text)')
    p.add_argument("--span-lengths", metavar="N,...", help="expand the i-th mask of each --text into N masks")
    p.add_argument("--length", type=bounded_int(1, MAX_LENGTH),
                   help=f"generate this many tokens (unconditional generation; 1-{MAX_LENGTH:,}, and at most "
                        "what the model takes)")
    p.add_argument("--prefix", help="with --length: text the generated tokens follow")
    p.add_argument("--sampler", default="mask-predict", help="mask-predict (default), gibbs, mh or left-to-right")
    p.add_argument("--iterations", type=bounded_int(1, MAX_ITERATIONS),
                   help=f"mask-predict: T; gibbs and mh: sweeps over the targets (default 10; 1-{MAX_ITERATIONS:,})")
    p.add_argument("--num-samples", type=bounded_int(1, MAX_SAMPLES), default=1,
                   help=f"samples per --text (default 1; 1-{MAX_SAMPLES:,})")
    p.add_argument("--batch-size", type=bounded_int(1, MAX_BATCH), default=8,
                   help=f"samples run together (default 8; 1-{MAX_BATCH:,})")
    p.add_argument("--seed", type=bounded_int(0, MAX_SEED), default=0,
                   help=f"the same seed gives the same samples (default 0; 0-{MAX_SEED:,})")
    p.add_argument("--temperature", type=at_most(non_negative_float, 100.0), help="default 0 (greedy) for mask-predict and "
                                                                 "left-to-right, 1 for gibbs and mh")
    p.add_argument("--top-k", type=bounded_int(0, MAX_TOP_K), default=0,
                   help=f"sample from the k most likely tokens (default 0: all; at most {MAX_TOP_K:,})")
    p.add_argument("--burn-in", type=bounded_int(0, MAX_ITERATIONS - 1), default=0,
                   help="gibbs: sweeps drawn from the full distribution before --top-k applies (default 0; "
                        "below --iterations)")
    p.add_argument("--parallel", action="store_true", help="gibbs: re-draw all targets at once each sweep")
    add_mlm_run_arguments(p)
    p.set_defaults(run=run)


def add_mlm_run_arguments(p) -> None:
    """How a masked LM runs, for `generate` and `score` alike: batch size in tokens, device, precision."""
    p.add_argument("--max-tokens", type=bounded_int(1, MAX_TOKENS), default=8192,
                   help=f"padded tokens per model call (default 8192; 1-{MAX_TOKENS:,})")
    add_settings_arguments(p, DeviceOptions, help={
        "precision": PRECISION_HELP + "; bf16 is faster on CPUs with native bf16 but moves "
        "log-probabilities by about 1e-2"})
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    add_common(p)


@contextlib.contextmanager
def naming_the_model(args: argparse.Namespace) -> Iterator[None]:
    """NaN/inf scores are reported with the model folder they came from (and the flag that may help)."""
    from bertforge.generation.mlm import NonFiniteScoresError
    try:
        yield
    except NonFiniteScoresError as err:
        hint = "" if args.precision == "fp32" else "; --precision fp32 rules out an overflow"
        raise NonFiniteScoresError(f"{args.model}: {err}{hint}") from None


def parse_lengths(text: str | None, flag: str = "--span-lengths") -> list[int] | None:
    if not text:
        return None
    try:
        lengths = [int(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"{flag}: expected comma-separated whole numbers such as 2,3, got {text!r}") from None
    if not all(1 <= n <= MAX_LENGTH for n in lengths):
        raise ValueError(f"{flag}: expected lengths from 1 to {MAX_LENGTH:,}, got {text!r}")
    return lengths


def run(args: argparse.Namespace) -> int:
    from bertforge.generation import generate, load_mlm
    from bertforge.generation.loading import is_encoder_decoder
    from bertforge.training.progress import progress

    if is_encoder_decoder(args.model):
        return run_conditional(args)
    if args.source or args.input:
        raise ValueError(f"--source/--input need an encoder-decoder folder; {args.model} is a masked LM (give "
                         "--text, or --length)")
    if not args.text and args.length is None:
        raise ValueError("give --text with mask tokens (infilling) or --length N (unconditional generation)")
    if args.sampler == "gibbs" and args.burn_in >= (args.iterations or 10):
        raise ValueError(f"--burn-in {args.burn_in} must be below --iterations ({args.iterations or 10})")
    lengths = parse_lengths(args.span_lengths)
    model, tokenizer = load_mlm(args.model, device=args.device)
    bar = None if args.no_progress else (lambda total: progress(total, bar=True, desc="generate", unit="call"))
    samples = []  # every text's samples, printed once all are drawn: a bad --text never leaves half an output
    for index, text in enumerate(args.text or [None]):
        with naming_the_model(args):
            results = generate(model, tokenizer, text=text, span_lengths=lengths, length=args.length,
                               prefix=args.prefix, sampler=args.sampler, iterations=args.iterations,
                               num_samples=args.num_samples, batch_size=args.batch_size, seed=args.seed,
                               temperature=args.temperature, top_k=args.top_k, burn_in=args.burn_in,
                               parallel=args.parallel, max_tokens=args.max_tokens, precision=args.precision,
                               progress=bar)
        samples += [result if text is None else {"input": index, **result} for result in results]
    for sample in samples:
        print(json.dumps(sample, ensure_ascii=False), flush=True)
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

"""`bertforge predict`: run a fine-tuned predictor on a file of inputs; one record per input, in input order."""
from __future__ import annotations

import argparse
import sys

from bertforge.commands import add_common
from bertforge.commands.flags import add_settings_arguments
from bertforge.device import DeviceOptions
from bertforge.commands.options import MAX_BATCH_TOKENS, MAX_CHARS, at_most
from bertforge.settings import MAX_BATCH


def positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return int(text)


def add_inference_flags(p: argparse.ArgumentParser, batch_size: int) -> None:
    """--device, --precision and --batch-size, shared by predict, evaluate and features."""
    add_settings_arguments(p, DeviceOptions)
    p.add_argument("--batch-size", type=at_most(positive_int, MAX_BATCH), default=batch_size, help="most inputs per batch")


def register(sub) -> None:
    from bertforge.tasks.predictor import DEFAULT_MAX_BATCH_TOKENS, DEFAULT_MAX_CHARS
    p = sub.add_parser("predict", help="predict with a fine-tuned predictor folder",
                       description="Reads what fine-tuning reads: .csv / .tsv with a header row, .jsonl "
                                   "({\"text\": ..., \"text_pair\": ...}, or the columns named by --text-column / "
                                   "--text-pair-column; QA: question/context; NER: text or words; multiple "
                                   "choice: context/endings), or .txt with one input per line (a tab splits a "
                                   "pair or question<TAB>context). Writes one record per input, in input order: "
                                   "JSON lines, or CSV when --output ends in .csv; without --output, JSON lines "
                                   "to stdout. The count and examples/s go to stderr.")
    p.add_argument("--model", required=True, metavar="DIR", help="predictor folder (has task.json)")
    p.add_argument("--input", metavar="FILE|-", help="input file ('-' = stdin, read as .txt lines)")
    p.add_argument("--text", nargs="+", action="extend", help="inputs given on the command line, as .txt lines")
    p.add_argument("--text-column", metavar="C", help="column/key holding the text (default: text, sentence, ...)")
    p.add_argument("--text-pair-column", metavar="C2", help="column/key holding the second text of a pair")
    p.add_argument("--output", metavar="FILE", help="write records here (.csv for CSV, else JSON lines)")
    p.add_argument("--overwrite", action="store_true", help="replace --output if it exists")
    add_inference_flags(p, 64)
    p.add_argument("--max-batch-tokens", type=at_most(positive_int, MAX_BATCH_TOKENS), default=DEFAULT_MAX_BATCH_TOKENS,
                   help=f"most padded tokens per batch (rows x longest row; default {DEFAULT_MAX_BATCH_TOKENS})")
    p.add_argument("--max-chars", type=at_most(positive_int, MAX_CHARS), default=DEFAULT_MAX_CHARS,
                   help=f"characters kept of each input text before tokenization (default {DEFAULT_MAX_CHARS:,}); "
                        "longer inputs are cut and their record says \"truncated\": true")
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bertforge.atomic import atomic_path
    from bertforge.outputs import claim_output_file
    from bertforge.tasks.prediction_io import output_format, parse_lines, read_inputs, write_records
    from bertforge.tasks.predictor import Predictor
    if not args.text and not args.input:
        raise ValueError("nothing to predict: give --input FILE or --text")
    if args.output:
        claim_output_file(args.output, overwrite=args.overwrite, inputs=(args.input,))
    predictor = Predictor.load(args.model, args.device, args.precision, max_chars=args.max_chars,
                               max_batch_tokens=args.max_batch_tokens)
    inputs = parse_lines(args.text or [], predictor.head, "--text")
    if args.input:
        inputs += read_inputs(args.input, predictor.head, text_column=args.text_column,
                              text_pair_column=args.text_pair_column)
    if not inputs:
        raise ValueError(f"{args.input}: no inputs (the file has no non-blank lines or rows)")
    records = predictor.predict(inputs, batch_size=args.batch_size, progress=sys.stderr.isatty())
    if args.output:
        with atomic_path(args.output) as tmp, open(tmp, "w", encoding="utf-8", newline="") as handle:
            write_records(records, handle, output_format(args.output))
    else:
        write_records(records, sys.stdout)
    t = predictor.timing
    where = f" -> {args.output}" if args.output else ""
    print(f"{t['n']} examples in {t['seconds']:.3f}s ({t['examples_per_second']:.1f} examples/s) on "
          f"{predictor.device.type}, {predictor.precision}{where}", file=sys.stderr)
    return 0

"""`bertforge features`: per-word BERT features (the paper's feature-based approach) into a safetensors file."""
from __future__ import annotations

import argparse
import json
import re
import sys

from bertforge.commands import add_common
from bertforge.commands.options import add_text_argument, at_most, check_plain_text
from bertforge.commands.predict import add_inference_flags
from bertforge.commands.options import MAX_BATCH_TOKENS, MAX_CHARS, positive_int
from bertforge.settings import MAX_LENGTH

DEFAULT_LAYERS = [-1, -2, -3, -4]  # the paper's best feature-based choice: the last four layers, concatenated


def _layers(value: str) -> list[int]:
    try:
        layers = [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--layers takes comma-separated integers, not {value!r}") from None
    if not layers:
        raise argparse.ArgumentTypeError("--layers needs at least one index")
    return layers


def register(sub) -> None:
    from bertforge.tasks.predictor import DEFAULT_MAX_BATCH_TOKENS, DEFAULT_MAX_CHARS
    p = sub.add_parser("features", help="extract per-word features from frozen BERT layers",
                       description="One text per --text and per input line (blank lines skipped), split into "
                                   "words (punctuation apart). Writes one [words, dim] tensor per text (keys "
                                   "text_0, text_1, ...: the --text ones first, then the file's lines) and the "
                                   "words as JSON in the file's metadata.")
    p.add_argument("--model", required=True, metavar="DIR",
                   help="checkpoint folder (any head; the encoder is used)")
    p.add_argument("--input", metavar="FILE|-", help="plain text file, one text per line ('-' = stdin)")
    add_text_argument(p, "texts given on the command line (repeatable)")
    # let "--layers -1,-2,-3,-4" read as a value, not as an option (argparse only knows plain "-1")
    p._negative_number_matcher = re.compile(r"^-\d+(,-?\d+)*$")
    p.add_argument("--layers", type=at_most(_layers, 1_000), default=None,
                   help="hidden-state indices: 0 = embeddings, 1..L = layers, negative from the top "
                        "(default -1,-2,-3,-4)")
    p.add_argument("--combine", default="concat", choices=("concat", "sum", "last", "second-to-last"),
                   help="how the chosen layers make one vector per word")
    p.add_argument("--max-seq-length", type=at_most(positive_int, MAX_LENGTH), default=512,
                   help="tokens per input, longer ones truncated")
    p.add_argument("--max-chars", type=at_most(positive_int, MAX_CHARS), default=DEFAULT_MAX_CHARS,
                   help=f"characters kept of each line before splitting into words (default "
                        f"{DEFAULT_MAX_CHARS:,}); the rest of a longer line is dropped")
    add_inference_flags(p, 32)
    p.add_argument("--max-batch-tokens", type=at_most(positive_int, MAX_BATCH_TOKENS), default=DEFAULT_MAX_BATCH_TOKENS,
                   help=f"most padded tokens per batch (default {DEFAULT_MAX_BATCH_TOKENS})")
    p.add_argument("--output", required=True, metavar="FILE.safetensors", help="where to write the features")
    p.add_argument("--overwrite", action="store_true", help="replace --output if it exists")
    add_common(p)
    p.set_defaults(run=run)


def check_paths(input_file: str | None, output: str) -> None:
    """A table given as text would be read line by line, header included; an output not named .safetensors
    would hold safetensors under another name."""
    check_plain_text(input_file, "features")
    if not output.endswith(".safetensors"):
        raise ValueError(f"--output {output}: expected a file name ending in .safetensors (the format written)")


def check_layers(layers: list[int], combine: str, n_layers: int, given: bool) -> None:
    """Hidden-state indices outside the model, named with the flag (and said to be the default if it is)."""
    from bertforge.tasks.feature_extraction import select_layers
    bad = [i for i in select_layers(layers, combine) if not -(n_layers + 1) <= i <= n_layers]
    if not bad:
        return
    indices = f"hidden-state indices 0..{n_layers} or {-(n_layers + 1)}..-1"
    if given:
        raise ValueError(f"--layers {','.join(map(str, bad))}: the model has {n_layers} layers; use {indices}")
    raise ValueError(f"the default --layers {','.join(map(str, layers))} needs {len(layers)} layers and the model has "
                     f"{n_layers}: give --layers with {indices}")


def run(args: argparse.Namespace) -> int:
    import time

    from bertforge.atomic import atomic_save_safetensors
    from bertforge.device import placement
    from bertforge.model.auto import AutoModel
    from bertforge.tasks.feature_extraction import word_features
    from bertforge.tasks.prediction_io import open_input
    from bertforge.tasks.predictor import split_words
    from bertforge.outputs import claim_output_file
    from bertforge.tokenization import load_tokenizer
    check_paths(args.input, args.output)
    claim_output_file(args.output, overwrite=args.overwrite, inputs=(args.input,))
    texts, cut = [], 0
    lines = list(args.text or [])
    blank = next((i for i, text in enumerate(lines, 1) if not text.strip()), None)
    if blank is not None:
        raise ValueError(f"--text #{blank} is empty; every --text is one text to read")
    if args.input:
        with open_input(args.input) as handle:
            lines += [line for line in handle if line.strip()]
    for line in lines:
        cut += len(line.rstrip("\r\n")) > args.max_chars
        texts.append([w for w, _, _ in split_words(line[:args.max_chars])])
    if not texts:
        raise ValueError(f"{args.input}: no text lines" if args.input else "nothing to read: give --input FILE or --text")
    device, precision = placement(args.device, args.precision)
    model = AutoModel.from_pretrained(args.model)
    layers = DEFAULT_LAYERS if args.layers is None else args.layers
    check_layers(layers, args.combine, model.config.num_hidden_layers, given=args.layers is not None)
    model.to(device)
    start = time.perf_counter()
    feats = word_features(model, load_tokenizer(args.model), texts, layers, args.combine, args.max_seq_length,
                          args.batch_size, device=device, precision=precision, max_batch_tokens=args.max_batch_tokens,
                          progress=sys.stderr.isatty())
    seconds = time.perf_counter() - start
    tensors = {f"text_{i}": f.contiguous() for i, f in enumerate(feats)}
    meta = {"layers": json.dumps(layers), "combine": args.combine, "words": json.dumps(texts)}
    atomic_save_safetensors(tensors, args.output, metadata=meta)
    note = f"; {cut} lines cut at {args.max_chars:,} characters" if cut else ""
    print(f"{len(texts)} texts, {sum(len(t) for t in texts)} words, dim {feats[0].shape[-1]} -> {args.output} "
          f"({seconds:.1f}s, {len(texts) / max(seconds, 1e-9):.1f} texts/s on {device.type}, {precision}{note})",
          file=sys.stderr)
    return 0

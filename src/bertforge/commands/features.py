"""`bertforge features`: per-word BERT features (the paper's feature-based approach) into a safetensors file."""
from __future__ import annotations

import argparse
import json
import re

from bertforge.commands import add_common


def _layers(value: str) -> list[int]:
    try:
        return [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--layers takes comma-separated integers, not {value!r}") from None


def register(sub) -> None:
    p = sub.add_parser("features", help="extract per-word features from frozen BERT layers",
                       description="One text per input line, split into words (punctuation apart). Writes one "
                                   "[words, dim] tensor per line (keys text_0, text_1, ...) and the words as "
                                   "JSON in the file's metadata.")
    p.add_argument("--model", required=True, metavar="DIR",
                   help="checkpoint folder (any BERT head; the encoder is used)")
    p.add_argument("--input", required=True, metavar="FILE", help="text file, one text per line")
    # let "--layers -1,-2,-3,-4" read as a value, not as an option (argparse only knows plain "-1")
    p._negative_number_matcher = re.compile(r"^-\d+(,-?\d+)*$")
    p.add_argument("--layers", type=_layers, default=[-1, -2, -3, -4], help="hidden-state indices, e.g. -1,-2,-3,-4")
    p.add_argument("--combine", default="concat", choices=("concat", "sum", "last", "second-to-last"))
    p.add_argument("--max-seq-length", type=int, default=512)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--output", required=True, metavar="FILE.safetensors")
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import time

    from bertforge import BertModel
    from bertforge.atomic import atomic_save_safetensors
    from bertforge.tasks.feature_extraction import word_features
    from bertforge.tasks.predictor import split_words
    from bertforge.tokenization import BertTokenizer
    with open(args.input, encoding="utf-8") as handle:
        texts = [[w for w, _, _ in split_words(line)] for line in handle if line.strip()]
    if not texts:
        raise ValueError(f"{args.input}: no text lines")
    start = time.perf_counter()
    model = BertModel.from_pretrained(args.model)
    feats = word_features(model, BertTokenizer.from_pretrained(args.model), texts, args.layers, args.combine,
                          args.max_seq_length, args.batch_size)
    tensors = {f"text_{i}": f.contiguous() for i, f in enumerate(feats)}
    meta = {"layers": json.dumps(args.layers), "combine": args.combine, "words": json.dumps(texts)}
    atomic_save_safetensors(tensors, args.output, metadata=meta)
    seconds = time.perf_counter() - start
    print(f"{len(texts)} texts, {sum(len(t) for t in texts)} words, dim {feats[0].shape[-1]} -> {args.output} "
          f"({seconds:.1f}s)")
    return 0

"""`bertforge embed`: sentence embeddings of texts, pooled the way the model folder declares."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bertforge.commands import add_common
from bertforge.commands.flags import add_settings_arguments
from bertforge.commands.options import add_text_argument, check_plain_text
from bertforge.device import DeviceOptions
from bertforge.commands.options import at_most, positive_int
from bertforge.settings import MAX_BATCH

OUTPUT_KINDS = (".npy", ".jsonl")


def register(sub) -> None:
    p = sub.add_parser("embed", help="sentence embeddings of texts",
                       description="One vector per input text: the --text ones first, then the input's lines. "
                                   "Blank input lines are skipped and counted on stderr, so the vectors follow the "
                                   "non-blank lines in order. A sentence-transformers folder's own pooling and "
                                   "normalization are used (modules.json); other folders get mean pooling. "
                                   "--output FILE.npy writes a float32 [texts, dim] array; FILE.jsonl, or - for "
                                   "standard output, one {\"index\", \"text\", \"embedding\"} object per line.")
    p.add_argument("--model", required=True, metavar="DIR", help="encoder folder (HF or sentence-transformers)")
    p.add_argument("--input", metavar="FILE|-", help="texts, one per line ('-' = stdin)")
    add_text_argument(p, "texts given on the command line (repeatable)")
    p.add_argument("--output", required=True, metavar="FILE|-", help="where to write: .npy, .jsonl or - (JSON lines "
                                                                     "to standard output)")
    p.add_argument("--overwrite", action="store_true", help="replace --output if it exists")
    p.add_argument("--pooling", choices=("mean", "cls", "max"), default=None,
                   help="override the folder's pooling")
    p.add_argument("--normalize", action=argparse.BooleanOptionalAction, default=None,
                   help="unit-length vectors (default: what the folder declares)")
    p.add_argument("--batch-size", type=at_most(positive_int, MAX_BATCH), default=32, help="texts per model call")
    p.add_argument("--backend", choices=("torch", "onnx"), default="torch",
                   help="run the model with PyTorch, or the model.onnx of an exported folder with ONNX Runtime")
    add_settings_arguments(p, DeviceOptions)
    add_common(p)
    p.set_defaults(run=run)


def read_texts(input_file: str | None, texts: list[str] | None) -> tuple[list[str], int]:
    """Texts from --text, then the input file's non-blank lines, and how many blank lines were skipped.

    A blank --text is an error (it was asked for explicitly); a blank line of a file is a gap between texts,
    as `predict`, `score` and `features` read it."""
    out = list(texts or [])
    empty = next((i for i, text in enumerate(out, 1) if not text.strip()), None)
    if empty is not None:
        raise ValueError(f"--text #{empty} is empty; every --text is one text to embed")
    blank = 0
    if input_file:
        from bertforge.textio import open_text
        handle = sys.stdin if input_file == "-" else open_text(input_file)
        with handle:
            for line in handle:
                line = line.rstrip("\r\n")
                if line.strip():
                    out.append(line)
                else:
                    blank += 1
    if not out:
        where = f"{input_file} has no text lines" if input_file else "nothing to embed"
        raise ValueError(f"{where}: give --text or an --input file with one text per line")
    return out, blank


def write_embeddings(target: str, texts: list[str], vectors) -> None:
    """A .npy array or JSON lines, written atomically (a run killed while writing leaves no half-written file),
    or JSON lines on standard output (target '-')."""
    import numpy as np

    from bertforge.atomic import atomic_path
    if target == "-":
        _write_jsonl(sys.stdout, texts, vectors)
        sys.stdout.flush()
        return
    path = Path(target)
    with atomic_path(path) as tmp:
        if path.suffix == ".npy":
            with tmp.open("wb") as out:
                np.save(out, vectors.astype(np.float32))
        else:
            with tmp.open("w", encoding="utf-8") as out:
                _write_jsonl(out, texts, vectors)


def _write_jsonl(handle, texts: list[str], vectors) -> None:
    for i, (text, vector) in enumerate(zip(texts, vectors)):
        handle.write(json.dumps({"index": i, "text": text, "embedding": vector.tolist()}) + "\n")


def run(args: argparse.Namespace) -> int:
    from bertforge.serving.embeddings import SentenceEncoder
    if args.output != "-" and Path(args.output).suffix not in OUTPUT_KINDS:
        raise ValueError(f"--output {args.output}: expected a file ending in {' or '.join(OUTPUT_KINDS)}, or - for "
                         "JSON lines on standard output")
    check_plain_text(args.input, "embed")
    if args.output != "-":
        from bertforge.outputs import claim_output_file
        claim_output_file(Path(args.output), overwrite=args.overwrite, inputs=(args.input,))
    texts, blank = read_texts(args.input, args.text)
    encoder = SentenceEncoder.load(args.model, device=args.device, precision=args.precision, backend=args.backend)
    vectors = encoder.encode(texts, batch_size=args.batch_size, pooling=args.pooling, normalize=args.normalize)
    write_embeddings(args.output, texts, vectors)
    where = "standard output" if args.output == "-" else args.output
    skipped = f" (skipped {blank} blank line{'s' if blank != 1 else ''} of {args.input})" if blank else ""
    print(f"wrote {len(texts)} embeddings of dimension {vectors.shape[1]} to {where}{skipped}", file=sys.stderr)
    return 0

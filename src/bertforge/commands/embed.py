"""`bertforge embed`: sentence embeddings of texts, pooled the way the model folder declares."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bertforge.commands import add_common
from bertforge.device import DEVICES, PRECISIONS

OUTPUT_KINDS = (".npy", ".jsonl")


def register(sub) -> None:
    p = sub.add_parser("embed", help="sentence embeddings of texts",
                       description="One vector per input text. A sentence-transformers folder's own pooling and "
                                   "normalization are used (modules.json); other folders get mean pooling. "
                                   "--output FILE.npy writes a float32 [texts, dim] array; FILE.jsonl one "
                                   "{\"index\", \"text\", \"embedding\"} object per line.")
    p.add_argument("--model", required=True, metavar="DIR", help="encoder folder (HF or sentence-transformers)")
    p.add_argument("--input", metavar="FILE|-", help="texts, one per line ('-' = stdin)")
    p.add_argument("--text", nargs="+", action="extend", help="texts given on the command line (repeatable)")
    p.add_argument("--output", required=True, metavar="FILE", help="where to write: .npy or .jsonl")
    p.add_argument("--overwrite", action="store_true", help="replace --output if it exists")
    p.add_argument("--pooling", choices=("mean", "cls", "max"), default=None,
                   help="override the folder's pooling")
    p.add_argument("--normalize", action=argparse.BooleanOptionalAction, default=None,
                   help="unit-length vectors (default: what the folder declares)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--backend", choices=("torch", "onnx"), default="torch")
    p.add_argument("--device", choices=DEVICES, default="auto")
    p.add_argument("--precision", choices=PRECISIONS, default="auto")
    add_common(p)
    p.set_defaults(run=run)


def read_texts(input_file: str | None, texts: list[str] | None) -> list[str]:
    """Texts from --text and/or the input file; an empty line is an error naming its number."""
    out = list(texts or [])
    if input_file:
        from bertforge.textio import open_text
        handle = sys.stdin if input_file == "-" else open_text(input_file)
        with handle:
            for number, line in enumerate(handle, 1):
                line = line.rstrip("\n")
                if not line.strip():
                    raise ValueError(f"{input_file}:{number}: empty line (one text per line expected)")
                out.append(line)
    if not out:
        raise ValueError("nothing to embed: give --text or an --input file with one text per line")
    return out


def write_embeddings(path: Path, texts: list[str], vectors) -> None:
    """Written atomically: a run killed while writing leaves no half-written file."""
    import numpy as np

    from bertforge.atomic import atomic_path
    with atomic_path(path) as tmp:
        if path.suffix == ".npy":
            with tmp.open("wb") as out:
                np.save(out, vectors.astype(np.float32))
        else:
            with tmp.open("w", encoding="utf-8") as out:
                for i, (text, vector) in enumerate(zip(texts, vectors)):
                    out.write(json.dumps({"index": i, "text": text, "embedding": vector.tolist()}) + "\n")


def run(args: argparse.Namespace) -> int:
    from bertforge.serving.embeddings import SentenceEncoder
    output = Path(args.output)
    if output.suffix not in OUTPUT_KINDS:
        raise ValueError(f"--output {args.output}: expected a file ending in {' or '.join(OUTPUT_KINDS)}")
    if args.batch_size < 1:
        raise ValueError(f"--batch-size must be at least 1, got {args.batch_size}")
    from bertforge.outputs import claim_output_file
    claim_output_file(output, overwrite=args.overwrite, inputs=(args.input,))
    texts = read_texts(args.input, args.text)
    encoder = SentenceEncoder.load(args.model, device=args.device, precision=args.precision, backend=args.backend)
    vectors = encoder.encode(texts, batch_size=args.batch_size, pooling=args.pooling, normalize=args.normalize)
    write_embeddings(output, texts, vectors)
    print(f"wrote {len(texts)} embeddings of dimension {vectors.shape[1]} to {output}", file=sys.stderr)
    return 0

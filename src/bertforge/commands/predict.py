"""`bertforge predict`: run a fine-tuned predictor on texts; JSON lines out, throughput on stderr."""
from __future__ import annotations

import argparse
import json
import sys

from bertforge.commands import add_common


def register(sub) -> None:
    p = sub.add_parser("predict", help="predict with a fine-tuned predictor folder",
                       description="Inputs are one per line (or --text). Sentence pairs and QA take a tab "
                                   "between the two parts (question<TAB>context); a JSON line may instead hold "
                                   "{\"text\": ..., \"text_pair\": ...}, {\"question\": ..., \"context\": ...}, "
                                   "{\"words\": [...]} or {\"context\": ..., \"endings\": [...]}.")
    p.add_argument("--model", required=True, metavar="DIR", help="predictor folder (has task.json)")
    p.add_argument("--input", metavar="FILE|-", help="input file, one example per line ('-' = stdin)")
    p.add_argument("--text", nargs="+", action="extend", help="inputs given on the command line (repeatable)")
    p.add_argument("--batch-size", type=int, default=64)
    add_common(p)
    p.set_defaults(run=run)


def parse_line(line: str, head: str):
    """One input line -> what `Predictor.predict` takes for this head."""
    line = line.rstrip("\n")
    if line.lstrip().startswith("{"):
        obj = json.loads(line)
        if "question" in obj:
            return obj["question"], obj["context"]
        if "endings" in obj:
            return obj["context"], obj.get("start", ""), obj["endings"]
        if "words" in obj:
            return obj["words"]
        return (obj["text"], obj["text_pair"]) if obj.get("text_pair") is not None else obj["text"]
    if "\t" in line and head != "token_classification":
        first, second = line.split("\t", 1)
        if head == "multiple_choice":
            return first, second.split("\t")
        return first, second
    if head == "question_answering":
        raise ValueError(f"QA input needs question<TAB>context, got {line[:60]!r}")
    return line


def run(args: argparse.Namespace) -> int:
    from bertforge.tasks.predictor import Predictor
    predictor = Predictor.load(args.model)
    lines: list[str] = list(args.text or [])
    if args.input:
        handle = sys.stdin if args.input == "-" else open(args.input, encoding="utf-8")
        with handle:
            lines.extend(line for line in handle if line.strip())
    if not lines:
        raise ValueError("nothing to predict: give --text or --input")
    inputs = [parse_line(line, predictor.head) for line in lines]
    results = predictor.predict(inputs, batch_size=args.batch_size)
    for line, result in zip(lines, results):
        print(json.dumps({"input": line.rstrip("\n"), **result}, ensure_ascii=False))
    t = predictor.timing
    print(f"{t['n']} examples in {t['seconds']:.3f}s ({t['examples_per_second']:.1f} examples/s)", file=sys.stderr)
    return 0

"""`bertforge predict`: run a fine-tuned predictor on a file of inputs; one record per input, in input order."""
from __future__ import annotations

import argparse
import sys

from bertforge.commands import add_common
from bertforge.commands.flags import add_settings_arguments, settings_from_args


def register(sub) -> None:
    from bertforge.tasks.predict import PredictSettings
    p = sub.add_parser("predict", help="predict with a fine-tuned predictor folder",
                       description="Reads what fine-tuning reads: .csv / .tsv with a header row, .jsonl "
                                   "({\"text\": ..., \"text_pair\": ...}, or the columns named by --text-column / "
                                   "--text-pair-column; QA: question/context; NER: text or words; multiple "
                                   "choice: context/endings), or .txt with one input per line (a tab splits a "
                                   "pair or question<TAB>context). Writes one record per input, in input order: "
                                   "JSON lines, or CSV when --output ends in .csv; without --output, JSON lines "
                                   "to stdout. The count and examples/s go to stderr.")
    add_settings_arguments(p, PredictSettings)
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bertforge.tasks.predict import PredictSettings, predict
    settings = settings_from_args(PredictSettings, args)
    predictor = predict(settings, progress=sys.stderr.isatty())
    t = predictor.timing
    where = f" -> {settings.output}" if settings.output else ""
    print(f"{t['n']} examples in {t['seconds']:.3f}s ({t['examples_per_second']:.1f} examples/s) on "
          f"{predictor.device.type}, {predictor.precision}{where}", file=sys.stderr)
    return 0


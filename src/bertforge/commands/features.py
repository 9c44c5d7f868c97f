"""`bertforge features`: per-word BERT features (the paper's feature-based approach) into a safetensors file."""
from __future__ import annotations

import argparse
import re
import sys

from bertforge.commands import add_common
from bertforge.commands.flags import add_settings_arguments, settings_from_args


def register(sub) -> None:
    from bertforge.tasks.feature_extraction import FeaturesSettings
    p = sub.add_parser("features", help="extract per-word features from frozen BERT layers",
                       description="One text per --text and per input line (blank lines skipped), split into "
                                   "words (punctuation apart). Writes one [words, dim] tensor per text (keys "
                                   "text_0, text_1, ...: the --text ones first, then the file's lines) and the "
                                   "words as JSON in the file's metadata.")
    # let "--layers -1,-2,-3,-4" read as a value, not as an option (argparse only knows plain "-1")
    p._negative_number_matcher = re.compile(r"^-\d+(,-?\d+)*$")
    add_settings_arguments(p, FeaturesSettings)
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bertforge.tasks.feature_extraction import FeaturesSettings, extract_features
    settings = settings_from_args(FeaturesSettings, args)
    done = extract_features(settings, progress=sys.stderr.isatty())
    limit = settings.inference.max_chars
    note = f"; {done.cut} lines cut at {limit:,} characters" if done.cut else ""
    texts = len(done.words)
    print(f"{texts} texts, {sum(len(t) for t in done.words)} words, dim {done.dim} -> {settings.output} "
          f"({done.seconds:.1f}s, {texts / max(done.seconds, 1e-9):.1f} texts/s on {done.device.type}, "
          f"{done.precision}{note})", file=sys.stderr)
    return 0

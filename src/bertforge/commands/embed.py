"""`bertforge embed`: sentence embeddings of texts, pooled the way the model folder declares."""
from __future__ import annotations

import argparse
import sys

from bertforge.commands import add_common
from bertforge.commands.flags import add_settings_arguments, settings_from_args


def register(sub) -> None:
    from bertforge.serving.embed import EmbedSettings
    p = sub.add_parser("embed", help="sentence embeddings of texts",
                       description="One vector per input text: the --text ones first, then the input's lines. "
                                   "Blank input lines are skipped and counted on stderr, so the vectors follow the "
                                   "non-blank lines in order. A sentence-transformers folder's own pooling and "
                                   "normalization are used (modules.json); other folders get mean pooling. "
                                   "--output FILE.npy writes a float32 [texts, dim] array; FILE.jsonl, or - for "
                                   "standard output, one {\"index\", \"text\", \"embedding\"} object per line.")
    add_settings_arguments(p, EmbedSettings)
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bertforge.serving.embed import EmbedSettings, embed
    settings = settings_from_args(EmbedSettings, args)
    done = embed(settings)
    where = "standard output" if settings.output == "-" else settings.output
    skipped = (f" (skipped {done.blank} blank line{'s' if done.blank != 1 else ''} of {settings.input})"
               if done.blank else "")
    print(f"wrote {done.count} embeddings of dimension {done.dimension} to {where}{skipped}", file=sys.stderr)
    return 0

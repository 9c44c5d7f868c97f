"""`bertforge score`: pseudo-log-likelihood of sentences under a masked LM; one JSON line per sentence."""
from __future__ import annotations

import argparse
import json

from bertforge.commands import add_common
from bertforge.commands.flags import add_settings_arguments, settings_from_args


def register(sub) -> None:
    from bertforge.generation.runs import ScoreSettings
    p = sub.add_parser("score", help="pseudo-log-likelihood of sentences under a masked LM",
                       description="Score each sentence by its pseudo-log-likelihood (Salazar et al. 2020): "
                                   "every token between the special tokens is masked in turn and the natural "
                                   "log-probabilities of the true tokens are summed. All masked copies of many "
                                   "sentences run together in batches of --max-tokens padded tokens.")
    add_settings_arguments(p, ScoreSettings)
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bertforge.generation.runs import ScoreSettings, score_sentences
    for result in score_sentences(settings_from_args(ScoreSettings, args)):
        print(json.dumps(result, ensure_ascii=False), flush=True)
    return 0

"""`bertforge generate`: infill masks or generate text with a masked LM; one JSON line per sample."""
from __future__ import annotations

import argparse
import json

from bertforge.commands import add_common
from bertforge.commands.flags import add_settings_arguments, settings_from_args


def register(sub) -> None:
    from bertforge.generation.runs import GenerateSettings
    p = sub.add_parser("generate", help="fill masks or generate text with a masked language model",
                       description="Sample from a masked LM (BERT, RoBERTa, ALBERT, DistilBERT...). Infilling: "
                                   "a --text with mask tokens ([MASK] works for every family; a run of masks is "
                                   "a span), optionally expanded by --span-lengths. Unconditional: --length N "
                                   "tokens after an optional --prefix. Samplers: mask-predict (Ghazvininejad et "
                                   "al. 2019), gibbs (Wang & Cho 2019), mh (Metropolis-Hastings over the MLM's "
                                   "energy, Goyal et al. 2021) and left-to-right. Prints one JSON line per "
                                   "sample; the same --seed gives the same samples. With an encoder-decoder "
                                   "(`bertforge seq2seq`'s output): one target per --source (or per line of "
                                   "--input), by mask-predict or left-to-right.")
    add_settings_arguments(p, GenerateSettings)
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bertforge.generation.runs import GenerateSettings, generate_samples
    for sample in generate_samples(settings_from_args(GenerateSettings, args)):
        print(json.dumps(sample, ensure_ascii=False), flush=True)
    return 0

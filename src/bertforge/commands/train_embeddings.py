"""`bertforge train-embeddings`: train sentence embeddings on pairs and save a sentence-transformers folder."""
from __future__ import annotations

import argparse

from bertforge.commands import add_common
from bertforge.commands.flags import add_settings_arguments, settings_from_args


def register(sub) -> None:
    from bertforge.tasks.embedding.train import EmbeddingSettings
    p = sub.add_parser("train-embeddings", help="train sentence embeddings on pairs (sentence-transformers folder)",
                       description="Fine-tune an encoder's sentence vectors as sentence-transformers does: "
                       "(anchor, positive[, negative]) pairs with in-batch negatives (MultipleNegativesRankingLoss), "
                       "scored pairs (sentence1, sentence2, score) with CoSENT or the cosine loss. OUTPUT is a "
                       "sentence-transformers folder that `SentenceTransformer(OUTPUT)`, `bertforge embed` and "
                       "`bertforge serve` load. --eval scores the model on STS pairs or a BEIR retrieval folder "
                       "(--keep best, --patience). Running the same command again resumes (with --save-every).")
    add_settings_arguments(p, EmbeddingSettings)
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bertforge.commands.pretrain import _report
    from bertforge.tasks.embedding.train import EmbeddingSettings, train_embeddings
    _report(train_embeddings(settings_from_args(EmbeddingSettings, args), say=print,
                             hooks=getattr(args, "hooks", None)))
    return 0

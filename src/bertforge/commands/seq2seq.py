"""`bertforge seq2seq`: train a warm-started encoder-decoder as a conditional masked LM (Mask-Predict)."""
from __future__ import annotations

import argparse

from bertforge.commands import add_common
from bertforge.commands.flags import add_settings_arguments, settings_from_args


def register(sub) -> None:
    from bertforge.tasks.seq2seq import Seq2SeqConfig
    p = sub.add_parser("seq2seq", help="train an encoder-decoder (BERT2BERT) as a conditional masked LM",
                       description="Warm-start an encoder and a decoder from BERT checkpoints (the decoder gains "
                       "cross-attention and an MLM head) or continue an encoder-decoder folder, and train it on "
                       "source/target pairs as Mask-Predict does: a random number of target tokens masked and "
                       "predicted, plus the target's length. OUTPUT is in transformers' EncoderDecoderModel "
                       "layout; decode it with `bertforge generate --model OUTPUT --source TEXT`. Running the "
                       "same command again resumes from the newest checkpoint.")
    add_settings_arguments(p, Seq2SeqConfig)
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bertforge.commands.pretrain import _report
    from bertforge.tasks.seq2seq import Seq2SeqConfig, train_seq2seq
    if bool(args.encoder or args.decoder) == bool(args.init_from):
        raise ValueError("give --encoder DIR [--decoder DIR] to warm-start, or --init-from DIR to continue")
    _report(train_seq2seq(settings_from_args(Seq2SeqConfig, args), hooks=getattr(args, "hooks", None)))
    return 0

"""`bertforge seq2seq`: train a warm-started encoder-decoder as a conditional masked LM (Mask-Predict)."""
from __future__ import annotations

import argparse

from bertforge.commands import add_common
from bertforge.commands.dataclass_args import add_dataclass_arguments, dataclass_from_args, positive_int
from bertforge.commands.options import existing_dir, existing_file


def register(sub) -> None:
    from bertforge.training.options import TrainOptions
    p = sub.add_parser("seq2seq", help="train an encoder-decoder (BERT2BERT) as a conditional masked LM",
                       description="Warm-start an encoder and a decoder from BERT checkpoints (the decoder gains "
                       "cross-attention and an MLM head) or continue an encoder-decoder folder, and train it on "
                       "source/target pairs as Mask-Predict does: a random number of target tokens masked and "
                       "predicted, plus the target's length. OUTPUT is in transformers' EncoderDecoderModel "
                       "layout; decode it with `bertforge generate --model OUTPUT --source TEXT`. Running the "
                       "same command again resumes from the newest checkpoint.")
    p.add_argument("--train", dest="train_file", required=True, type=existing_file, metavar="FILE",
                   help='JSONL of {"source": ..., "target": ...}')
    p.add_argument("--eval", dest="eval_file", type=existing_file, metavar="FILE", help="held-out pairs, same format")
    p.add_argument("--encoder", type=existing_dir, metavar="DIR", help="BERT checkpoint for the encoder")
    p.add_argument("--decoder", type=existing_dir, metavar="DIR", help="BERT checkpoint for the decoder "
                   "(default: the encoder's)")
    p.add_argument("--init-from", type=existing_dir, metavar="DIR", help="continue an encoder-decoder folder instead")
    p.add_argument("--output", required=True, metavar="DIR")
    p.add_argument("--overwrite", action="store_true",
                   help="start again in an OUTPUT that holds another run (its contents are deleted)")
    p.add_argument("--max-source-length", type=positive_int, default=256, help="source tokens kept (with specials)")
    p.add_argument("--max-target-length", type=positive_int, default=64,
                   help="target tokens kept; also the longest length the length predictor knows")
    p.add_argument("--batch-size", type=positive_int, default=32)
    p.add_argument("--eval-samples", type=positive_int, default=500, help="held-out pairs each evaluation reads")
    add_dataclass_arguments(p, TrainOptions, defaults=TrainOptions(lr=1e-4, warmup_steps=100, save_every=1000),
                            title="training")
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bertforge.commands.pretrain import _report
    from bertforge.training.options import TrainOptions
    from bertforge.training.seq2seq import Seq2SeqConfig, train_seq2seq
    if bool(args.encoder or args.decoder) == bool(args.init_from):
        raise ValueError("give --encoder DIR [--decoder DIR] to warm-start, or --init-from DIR to continue")
    for name in ("train_file", "eval_file", "encoder", "decoder", "init_from"):
        if getattr(args, name) is not None:
            setattr(args, name, str(getattr(args, name)))
    cfg = dataclass_from_args(Seq2SeqConfig, args, train=dataclass_from_args(TrainOptions, args))
    _report(train_seq2seq(cfg, hooks=getattr(args, "hooks", None)))
    return 0

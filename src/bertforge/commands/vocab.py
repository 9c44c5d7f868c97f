"""`bertforge vocab`: train a vocabulary from text files: WordPiece (BERT), byte-level BPE (RoBERTa) or
SentencePiece unigram (ALBERT's or XLNet's layout). The flags are `tokenization.build.VocabSettings`' fields."""
from __future__ import annotations

import argparse

from bertforge.commands import add_common
from bertforge.commands.flags import add_settings_arguments, settings_from_args


def register(sub) -> None:
    from bertforge.tokenization.build import VocabSettings
    p = sub.add_parser("vocab", help="train a WordPiece, byte-level BPE or SentencePiece vocabulary from text files",
                       description="Train a vocabulary and write a tokenizer folder that bertforge and "
                       "transformers.AutoTokenizer load. wordpiece: BERT's vocab.txt ([PAD]=0, [unused*], [UNK], "
                       "[CLS], [SEP], [MASK]); bpe: RoBERTa's vocab.json + merges.txt (<s> <pad> </s> <unk> ... "
                       "<mask>); sentencepiece: ALBERT's spiece.model (<pad> <unk> [CLS] [SEP] [MASK] ...), or with "
                       "--family xlnet XLNet's (<unk> <s> </s> <cls> <sep> <pad> <mask> <eod> <eop>; A <sep> <cls>, "
                       "padded on the left). Every folder also holds tokenizer.json.")
    add_settings_arguments(p, VocabSettings)
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bertforge.data.identity import check_input_content, record_input_content
    from bertforge.outputs import fresh_output
    from bertforge.settings import check_settings
    from bertforge.tokenization import load_tokenizer
    from bertforge.tokenization.build import VocabSettings, check_size, train_vocab
    settings = settings_from_args(VocabSettings, args)
    check_settings(settings)
    check_size(settings)
    casing = "cased" if settings.cased or settings.kind == "bpe" else "uncased"
    content = check_input_content(settings.output, "vocab", settings.input, settings.overwrite)
    with fresh_output(settings.output, verb="vocab", overwrite=settings.overwrite, settings=settings.record(),
                      inputs=settings.input) as output:
        record_input_content(output, content)
        out = train_vocab(settings, output)
        tok = load_tokenizer(output)
    kind = f"{settings.kind}, {settings.family}" if settings.xlnet else settings.kind
    print(f"vocabulary: {tok.vocab_size} tokens ({kind}, {casing}) -> {out}")
    return 0

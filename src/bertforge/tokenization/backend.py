"""Construction of the Rust (``tokenizers``) pipelines behind :class:`BertTokenizer`.

Two pipelines share one WordPiece vocabulary:

* the *fast* one does everything in Rust (BERT normaliser, BERT pre-tokeniser,
  WordPiece, ``[CLS] A [SEP] B [SEP]`` template) and handles ordinary text;
* the *words* one has no normaliser and no pre-tokeniser: it is fed words already
  split by :class:`~.pretokenize.ReferencePreTokenizer` and only runs WordPiece
  and the template, so truncation, strides and padding stay in Rust for every text.
"""

from __future__ import annotations

from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

__all__ = ["MAX_INPUT_CHARS_PER_WORD", "bert_normalizer", "build_fast", "build_words"]

# Words longer than this many characters become [UNK], as in the original BERT.
MAX_INPUT_CHARS_PER_WORD = 100


def bert_normalizer(
    lowercase: bool, strip_accents: bool | None, tokenize_chinese_chars: bool
) -> normalizers.Normalizer:
    """BERT's cleaning, CJK spacing, accent stripping and lowercasing in Rust."""
    return normalizers.BertNormalizer(
        clean_text=True,
        handle_chinese_chars=tokenize_chinese_chars,
        strip_accents=strip_accents,
        lowercase=lowercase,
    )


def _wordpiece(vocab: dict[str, int], unk_token: str) -> models.WordPiece:
    return models.WordPiece(
        vocab,
        unk_token=unk_token,
        max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD,
        continuing_subword_prefix="##",
    )


def _template(cls_token: str, cls_id: int, sep_token: str, sep_id: int) -> processors.TemplateProcessing:
    return processors.TemplateProcessing(
        single=f"{cls_token}:0 $A:0 {sep_token}:0",
        pair=f"{cls_token}:0 $A:0 {sep_token}:0 $B:1 {sep_token}:1",
        special_tokens=[(cls_token, cls_id), (sep_token, sep_id)],
    )


def build_words(vocab: dict[str, int], *, unk_token: str, cls_token: str, sep_token: str) -> Tokenizer:
    """WordPiece + template only; input must be pre-split words (``is_pretokenized=True``)."""
    tok = Tokenizer(_wordpiece(vocab, unk_token))
    tok.post_processor = _template(cls_token, vocab[cls_token], sep_token, vocab[sep_token])
    return tok


def build_fast(
    vocab: dict[str, int],
    *,
    lowercase: bool,
    strip_accents: bool | None,
    tokenize_chinese_chars: bool,
    unk_token: str,
    cls_token: str,
    sep_token: str,
    special_tokens: list[str],
) -> Tokenizer:
    """The all-Rust BERT pipeline, with special tokens matched verbatim in the raw text."""
    tok = Tokenizer(_wordpiece(vocab, unk_token))
    tok.normalizer = bert_normalizer(lowercase, strip_accents, tokenize_chinese_chars)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = _template(cls_token, vocab[cls_token], sep_token, vocab[sep_token])
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    # Special tokens typed in the text map to their ids (not normalised, so with
    # lowercasing "[MASK]" matches and "[mask]" does not), as in the original.
    tok.add_special_tokens(
        [
            AddedToken(t, special=True, normalized=False, lstrip=False, rstrip=False, single_word=False)
            for t in special_tokens
        ]
    )
    return tok


def configure_call(engine: Tokenizer, truncate: tuple[int, str, int] | None, pad_length: int | str | None,
                   pad_id: int, pad_token: str) -> None:
    """Set a call engine's truncation (max length, strategy, stride; None: off) and right padding ("longest", a
    length, or None: off) for one call (the caller holds the tokenizer's lock)."""
    if truncate is None:
        engine.no_truncation()
    else:
        engine.enable_truncation(truncate[0], stride=truncate[2], strategy=truncate[1], direction="right")
    if pad_length is None:
        engine.no_padding()
    else:
        engine.enable_padding(direction="right", pad_id=pad_id, pad_type_id=0, pad_token=pad_token,
                              length=None if pad_length == "longest" else pad_length)

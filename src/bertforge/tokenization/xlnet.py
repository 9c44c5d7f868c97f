"""``XLNetTokenizer``: XLNet's SentencePiece unigram tokenizer, and ``train_xlnet_sentencepiece``.

The pieces, normalisation and Viterbi are ALBERT's pipeline (`sentencepiece.py`; XLNet is cased by default);
what is XLNet's own is where the special tokens go and which way padding runs: ``A <sep> <cls>`` and
``A <sep> B <sep> <cls>`` with token types A = 0, B = 1, <cls> = 2, padded on the LEFT, so that the
summary token <cls> is always the last one (`XLNetSequenceSummary` reads position -1). The ids equal
``transformers.XLNetTokenizer``'s built from the same ``spiece.model``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer, processors

from .fast import FastTokenizer
from .hf_json import TOKENIZER_JSON
from .sentencepiece import MODEL_FILE, AlbertTokenizer, UnigramModel, _preprocessed_lines

__all__ = ["XLNetTokenizer", "train_xlnet_sentencepiece", "XLNET_SPECIALS"]

# XLNet's layout: <unk>=0, <s>=1, </s>=2, then the control symbols <cls>=3, <sep>=4, <pad>=5, <mask>=6, <eod>=7,
# <eop>=8 (so a model's pad_token_id is 5)
XLNET_SPECIALS = ("<cls>", "<sep>", "<pad>", "<mask>", "<eod>", "<eop>")
CLS_TYPE = 2  # the token type of <cls> (A = 0, B = 1)


class XLNetTokenizer(AlbertTokenizer):
    """XLNet's SentencePiece tokenizer with :class:`BertTokenizer`'s call API: ``A <sep> (B <sep>) <cls>``, padded
    on the left. ``vocab_file`` is a ``spiece.model`` (path or bytes) or a :class:`UnigramModel`."""

    def __init__(
        self,
        vocab_file: str | os.PathLike[str] | bytes | UnigramModel,
        do_lower_case: bool = False,
        keep_accents: bool = False,
        model_max_length: int = 512,
        bos_token: str = "<s>",
        eos_token: str = "</s>",
        unk_token: str = "<unk>",
        sep_token: str = "<sep>",
        pad_token: str = "<pad>",
        cls_token: str = "<cls>",
        mask_token: str = "<mask>",
    ) -> None:
        super().__init__(vocab_file, do_lower_case, keep_accents, model_max_length, bos_token=bos_token,
                         eos_token=eos_token, unk_token=unk_token, sep_token=sep_token, pad_token=pad_token,
                         cls_token=cls_token, mask_token=mask_token)
        # ALBERT's template put [CLS] first; XLNet's puts <sep> <cls> last. Re-seat the pipeline with it.
        backend = Tokenizer.from_str(self.backend.to_str())
        backend.post_processor = processors.TemplateProcessing(
            single=f"$A:0 {sep_token}:0 {cls_token}:{CLS_TYPE}",
            pair=f"$A:0 {sep_token}:0 $B:1 {sep_token}:1 {cls_token}:{CLS_TYPE}",
            special_tokens=[(sep_token, self.sep_token_id), (cls_token, self.cls_token_id)])
        source = (TOKENIZER_JSON if isinstance(vocab_file, UnigramModel) else
                  MODEL_FILE if isinstance(vocab_file, bytes) else str(vocab_file))
        FastTokenizer.__init__(self, backend, self._special_tokens, self.model_max_length, source)

    def _configure(self, engine: Tokenizer, truncate: tuple[int, str, int] | None,
                   pad_length: int | str | None) -> None:
        """As every tokenizer's, but padding goes on the left (with token type 0, as transformers 5 pads)."""
        super()._configure(engine, truncate, None)
        if pad_length is not None:
            engine.enable_padding(direction="left", pad_id=self.pad_token_id, pad_type_id=0,
                                  pad_token=self.pad_token, length=None if pad_length == "longest" else pad_length)

    def _write_configs(self, out: Path, settings: dict[str, Any]) -> tuple[Path, Path]:
        return super()._write_configs(out, {**settings, "tokenizer_class": "XLNetTokenizer", "padding_side": "left"})


def train_xlnet_sentencepiece(
    files: Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
    output_dir: str | os.PathLike[str],
    vocab_size: int = 32000,
    do_lower_case: bool = False,
    character_coverage: float = 0.99995,
    max_sentences: int = 2_000_000,
    skip_bad_lines: bool = False,
) -> Path:
    """Learn a SentencePiece unigram model with XLNet's special-token layout and write an XLNet tokenizer folder.

    Lines are preprocessed as the tokenizer will (accents stripped; lowercased only with ``do_lower_case``). A
    small corpus may give fewer than ``vocab_size`` pieces. A line that is not UTF-8 stops the run, naming its
    file and line, unless ``skip_bad_lines``. Returns ``output_dir``."""
    import sentencepiece

    paths = [Path(files)] if isinstance(files, (str, os.PathLike)) else [Path(f) for f in files]
    if not paths:
        raise ValueError("train_xlnet_sentencepiece needs at least one input file")
    n_special = 3 + len(XLNET_SPECIALS)
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size <= n_special:
        raise ValueError(f"vocab_size must be an int > {n_special} (the special tokens take {n_special} ids), got "
                         f"{vocab_size!r}")
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    seen = [0]
    lines: Iterator[str] = _preprocessed_lines(paths, lambda _: None, seen, do_lower_case, False, skip_bad_lines)
    failed: list[ValueError] = []

    def guarded() -> Iterator[str]:  # SentencePiece's C++ would bury a bad line's message in its own
        try:
            yield from lines
        except ValueError as exc:
            failed.append(exc)

    try:
        sentencepiece.SentencePieceTrainer.Train(
            sentence_iterator=guarded(), model_prefix=str(out / "spiece"), vocab_size=vocab_size, model_type="unigram",
            unk_id=0, bos_id=1, eos_id=2, pad_id=-1, control_symbols=list(XLNET_SPECIALS),
            character_coverage=character_coverage, input_sentence_size=max_sentences, shuffle_input_sentence=True,
            max_sentence_length=1 << 16, hard_vocab_limit=False, num_threads=os.cpu_count() or 1, minloglevel=2)
    except RuntimeError as exc:
        if failed:
            raise failed[0] from None
        if seen[0] == 0:
            raise ValueError(f"no text found in {', '.join(str(p) for p in paths)}") from None
        raise ValueError(f"SentencePiece training failed: {exc}") from None
    if failed:
        raise failed[0]
    (out / "spiece.vocab").unlink(missing_ok=True)
    XLNetTokenizer(out / MODEL_FILE, do_lower_case=do_lower_case).save_pretrained(out)
    return out

"""Regenerate ``_unicode_data.py``: the characters the Rust fast path must not see.

Run ``python tools/gen_unicode_tables.py`` after upgrading Python
(``unicodedata``) or ``tokenizers``. It takes a minute or two: every assigned code
point is pushed through the Rust normaliser + pre-tokeniser and through
:class:`~.pretokenize.ReferencePreTokenizer` (the original's rules in Python) in
a few contexts and for every casing configuration, and each disagreement is
recorded. Characters that are suspect by construction (deleted controls, NFC
candidates, capital sigma) are added without measuring. The test
``tests/tokenization/test_unicode_sweep.py`` re-checks the result against the
reference tokenizer of ``transformers``.
"""

from __future__ import annotations

import argparse
import sys
import time
import unicodedata
from collections import Counter
from pathlib import Path

from tokenizers import pre_tokenizers

from bertforge.tokenization.backend import bert_normalizer
from bertforge.tokenization.pretokenize import ReferencePreTokenizer

__all__ = ["CONFIGS", "CONTEXTS", "deleted_by_bert", "nfc_candidates", "nfc_joining_starters", "measure", "main"]

# name: (lowercase, strip_accents, tokenize_chinese_chars)
CONFIGS = {
    "uncased": (True, None, True),
    "cased": (False, None, True),
    "lowercase, keep accents": (True, False, True),
    "cased, strip accents": (False, True, True),
    "uncased, no CJK split": (True, None, False),
}
CONTEXTS = ("a{}b", "{}", "A{}B")
GREEK_CAPITAL_SIGMA = 0x03A3
HANGUL_VOWELS = range(0x1161, 0x1176)
HANGUL_TRAILING = range(0x11A8, 0x11C3)


def deleted_by_bert(cp: int) -> bool:
    """The original deletes NUL, U+FFFD and all C* except tab, newline and CR."""
    if cp in (9, 10, 13):
        return False
    return cp == 0xFFFD or unicodedata.category(chr(cp))[0] == "C"


def nfc_joining_starters() -> set[int]:
    """Combining class 0 characters that NFC can still compose with the preceding character."""
    seconds = set(HANGUL_VOWELS) | set(HANGUL_TRAILING)
    for cp in range(0x110000):
        decomposition = unicodedata.decomposition(chr(cp))
        if decomposition and not decomposition.startswith("<"):
            parts = decomposition.split()
            if len(parts) == 2:
                seconds.add(int(parts[1], 16))
    return {cp for cp in seconds if unicodedata.combining(chr(cp)) == 0}


def nfc_candidates(joining: set[int]) -> set[int]:
    """Characters whose presence can make NFC change a text."""
    out = set(joining)
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        ch = chr(cp)
        if unicodedata.combining(ch) or unicodedata.normalize("NFC", ch) != ch:
            out.add(cp)
    return out


def measure(candidates: list[int], progress: bool = True) -> dict[int, str]:
    """Code points where Rust and the Python rules give different words, with an example."""
    pre = pre_tokenizers.BertPreTokenizer()
    found: dict[int, str] = {}
    for label, (lowercase, strip, chinese) in CONFIGS.items():
        norm = bert_normalizer(lowercase, strip, chinese)
        ref = ReferencePreTokenizer(
            lowercase=lowercase, strip_accents=strip, tokenize_chinese_chars=chinese, special_tokens=()
        )
        t0 = time.time()
        for cp in candidates:
            if cp in found:
                continue
            for ctx in CONTEXTS:
                text = ctx.format(chr(cp))
                rust = [w for w, _ in pre.pre_tokenize_str(norm.normalize_str(text))]
                python = [w.text for w in ref.words(text)]
                if rust != python:
                    found[cp] = f"{text!r} rust {rust} original {python} ({label})"
                    break
        if progress:
            print(
                f"{label}: {len(found)} disagreements so far ({time.time() - t0:.0f}s)",
                file=sys.stderr,
            )
    return found


def to_ranges(cps: set[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for cp in sorted(cps):
        if out and out[-1][1] == cp - 1:
            out[-1] = (out[-1][0], cp)
        else:
            out.append((cp, cp))
    return out


def format_ranges(ranges: list[tuple[int, int]], per_line: int = 8) -> str:
    items = [f"{lo:04X}" if lo == hi else f"{lo:04X}-{hi:04X}" for lo, hi in ranges]
    lines = [" ".join(items[i : i + per_line]) for i in range(0, len(items), per_line)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import tokenizers

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    target = Path(__file__).resolve().parents[1] / "src" / "bertforge" / "tokenization" / "_unicode_data.py"
    parser.add_argument("--output", type=Path, default=target)
    args = parser.parse_args(argv)

    deleted = {cp for cp in range(0x110000) if deleted_by_bert(cp)}
    joining = nfc_joining_starters()
    nfc = nfc_candidates(joining)
    measured_pool = [cp for cp in range(0x110000) if cp not in deleted]
    disagreements = measure(measured_pool)
    suspect = deleted | nfc | {GREEK_CAPITAL_SIGMA} | set(disagreements)

    by_category = Counter(unicodedata.category(chr(cp)) for cp in disagreements)
    summary = ", ".join(f"{cat} {n}" for cat, n in sorted(by_category.items()))
    only_measured = sorted(set(disagreements) - nfc - {GREEK_CAPITAL_SIGMA})

    def describe(lo: int, hi: int) -> str:
        ch = chr(lo)
        return f"#   {lo:04X}-{hi:04X} {unicodedata.category(ch)} {unicodedata.name(ch, '?')[:32]}: {disagreements[lo]}"

    examples = "\n".join(describe(lo, hi) for lo, hi in to_ranges(set(only_measured)))
    text = f'''# ruff: noqa: E501
"""Generated by ``python tools/gen_unicode_tables.py``; do not edit.

Python unicodedata {unicodedata.unidata_version}, tokenizers {tokenizers.__version__}.
Deleted controls (C*, U+FFFD): {len(deleted)} code points. NFC candidates: {len(nfc)}.
Measured Rust/Python disagreements outside those: {len(only_measured)}
(every measured disagreement, NFC ones included, by category: {summary}).
"""
# The measured disagreements outside deleted/NFC characters (range, first character, example):
{examples}

UNICODE_VERSION = "{unicodedata.unidata_version}"

SUSPECT_RANGES = """
{format_ranges(to_ranges(suspect))}
"""

NFC_JOINING_STARTER_RANGES = """
{format_ranges(to_ranges(joining))}
"""
'''
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output}: {len(to_ranges(suspect))} ranges, {len(suspect)} code points", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Which texts the Rust fast path tokenizes exactly like the original BERT, and which not.

A text goes to the exact Python pre-tokenizer (:mod:`.pretokenize`) when it
contains a character of the *suspect* set; everything else stays in Rust. The
set was measured, not guessed: ``tools/gen_unicode_tables.py`` pushes every code point through
the Rust normaliser + pre-tokeniser and through the original rules, in several
contexts and for every casing option, and ``tests/tokenization/
test_tok_unicode_sweep.py`` re-checks all 1,114,112 code points against the
reference tokenizer. With Python's ``unicodedata`` 14.0 and ``tokenizers`` 0.23
the set (972,268 code points in 846 ranges) is the union of:

* **Characters the original deletes** (all C* except tab/newline/CR, and
  U+FFFD): 969,576 code points. Rust's cleaning does not delete *unassigned*
  code points (829,834 of them, Cn in Python) nor format characters newer than
  its tables (U+0890, U+0891, U+08E2, U+110CD, ...); lone surrogates cannot be
  handed to Rust at all; and deleting a control character can glue a special
  token together: the original keeps ``"[MASK\u200b]"`` whole as [MASK] (after
  deletion the word equals a special token), Rust splits it into ``[ mask ]``.
* **NFC candidates** (2,102): the original NFC-normalises the text, Rust does
  not. This matters when accents are not stripped (cased models): combining
  marks, singletons such as U+2126 OHM SIGN and the CJK compatibility
  ideographs U+F900..., Hangul jamo and other starters that compose with the
  previous character.
* **U+03A3 GREEK CAPITAL SIGMA**: ``str.lower`` gives the final form ς at the
  end of a word, Rust always σ.
* **Measured disagreements** (589 more, listed in ``_unicode_data.py``):
  punctuation newer than Rust's tables (e.g. U+2E43-2E4F, U+2E52-2E5D, U+061D,
  Newa/Sogdian/... dandas: the original splits them off, Rust does not);
  non-spacing marks newer than its tables (415 Mn: stripped by the original
  when stripping accents, kept by Rust); characters whose category changed
  (U+166D CANADIAN SYLLABICS CHI SIGN Po->So, U+111C9 SHARADA SANDHI MARK
  Po->Mn, U+1734 HANUNOO SIGN PAMUDPOD Mn->Mc); U+11938, whose canonical
  decomposition Rust does not know (it matters for accent stripping); and U+2B820-2B91F,
  CJK ideographs that Rust does not space out (its CJK range starts at
  U+2B920 instead of U+2B820).

On ordinary text this costs one regex scan per batch: 136 of the 277,345 lines
of the Wikipedia slice (0.05%) contain a suspect character, mostly Indic and Thai
marks, capital sigma and zero-width joiners. Python's lowercasing,
whitespace and ASCII handling agree with Rust everywhere else.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
from collections.abc import Sequence

from ._unicode_data import NFC_JOINING_STARTER_RANGES, SUSPECT_RANGES

__all__ = ["NFC_JOINING_STARTERS", "SuspectScanner", "suspect_scanner", "ranges_to_class", "parse_ranges"]


def parse_ranges(spec: str) -> list[tuple[int, int]]:
    """Parse ``"0000-0008 000B 0300-036F"`` (hex, inclusive) into ``[(0, 8), (11, 11), ...]``."""
    out: list[tuple[int, int]] = []
    for item in spec.split():
        lo, _, hi = item.partition("-")
        out.append((int(lo, 16), int(hi or lo, 16)))
    return out


def ranges_to_class(ranges: list[tuple[int, int]]) -> str:
    """A regular-expression character class matching exactly the given code point ranges."""
    parts = []
    for lo, hi in ranges:
        a = re.escape(chr(lo))
        parts.append(a if lo == hi else f"{a}-{re.escape(chr(hi))}")
    return "[" + "".join(parts) + "]"


NFC_JOINING_STARTERS: frozenset[str] = frozenset(
    chr(cp) for lo, hi in parse_ranges(NFC_JOINING_STARTER_RANGES) for cp in range(lo, hi + 1)
)


class SuspectScanner:
    """Finds texts containing a suspect character, at C speed for ordinary text.

    Python's ``re`` tests a class of BMP characters with a lookup table, but a
    class with astral ranges becomes a linear scan over hundreds of ranges (100x
    slower). So the regex holds the suspect BMP characters plus *every* astral
    character, and an astral hit (emoji, rare scripts) is then checked exactly
    against the astral suspect ranges with a binary search.
    """

    def __init__(self, ranges: list[tuple[int, int]]) -> None:
        bmp = [(lo, min(hi, 0xFFFF)) for lo, hi in ranges if lo <= 0xFFFF]
        astral = [(max(lo, 0x10000), hi) for lo, hi in ranges if hi > 0xFFFF]
        self._quick = re.compile(ranges_to_class(bmp + [(0x10000, 0x10FFFF)]))
        self._astral_lo = [lo for lo, _ in astral]
        self._astral_hi = [hi for _, hi in astral]

    def is_suspect_char(self, ch: str) -> bool:
        """Whether the single character ``ch`` is in the suspect set."""
        return self._quick.fullmatch(ch) is not None and self._exact(ord(ch))

    def _exact(self, cp: int) -> bool:
        if cp <= 0xFFFF:
            return True
        i = bisect.bisect_right(self._astral_lo, cp) - 1
        return i >= 0 and cp <= self._astral_hi[i]

    def contains(self, text: str) -> bool:
        """Whether ``text`` has any suspect character."""
        search = self._quick.search
        m = search(text)
        while m is not None:
            if self._exact(ord(m.group())):
                return True
            m = search(text, m.end())
        return False

    def indices(self, texts: Sequence[str]) -> set[int]:
        """Indices of the texts that contain a suspect character (one scan over the joined batch)."""
        joined = "\n".join(texts)  # "\n" is not suspect
        search = self._quick.search
        m = search(joined)
        if m is None:
            return set()
        ends = list(itertools.accumulate(len(t) + 1 for t in texts))  # item i spans [ends[i-1], ends[i])
        found: set[int] = set()
        while m is not None:
            i = bisect.bisect_right(ends, m.start())
            if self._exact(ord(m.group())):
                found.add(i)
                m = search(joined, ends[i]) if i + 1 < len(texts) else None
            else:
                m = search(joined, m.end())
        return found


@functools.cache
def suspect_scanner() -> SuspectScanner:
    """The shared scanner for the generated suspect set."""
    return SuspectScanner(parse_ranges(SUSPECT_RANGES))

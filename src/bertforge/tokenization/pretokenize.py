"""BERT's basic tokenization in pure Python, keeping track of character offsets.

The Rust pipeline of ``tokenizers`` reproduces BERT's original rules only where
its Unicode tables agree with Python's ``unicodedata`` and where no rule depends
on context. The original (Python) tokenizer also NFC-normalises the text,
lowercases whole words with ``str.lower`` (Greek final sigma depends on the
neighbours) and, after control characters are deleted, keeps a word that
became exactly a special token in one piece. None of that is in the Rust
pipeline, so texts that could hit any of it (see :mod:`.charset`) are split
into words here instead, with the same rules and the same ``unicodedata``, and
only WordPiece runs in Rust.

Every word carries, for each of its characters, the span of the original text
it came from, so offsets into the original string survive deletions,
NFC/NFD changes and lowercasing that changes lengths.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable
from typing import NamedTuple

from .charset import NFC_JOINING_STARTERS

__all__ = ["Word", "ReferencePreTokenizer", "is_cjk", "is_punctuation"]

_NOT_PRINTABLE_ASCII = re.compile(r"[^\x20-\x7e]")
_NON_SPACE_RUN = re.compile(r"\S+")  # for str patterns, \s is exactly str.isspace()
_SPACE = re.compile(r"\s")

_category = unicodedata.category
_combining = unicodedata.combining
_normalize = unicodedata.normalize
_is_normalized = unicodedata.is_normalized


class Word(NamedTuple):
    """A word after basic tokenization; ``starts[i]``/``ends[i]`` bound the source of ``text[i]``."""

    text: str
    starts: list[int]
    ends: list[int]

    def span(self, begin: int, end: int) -> tuple[int, int]:
        """Source span of the characters ``text[begin:end]`` (``end > begin``)."""
        return self.starts[begin], self.ends[end - 1]


def is_punctuation(ch: str) -> bool:
    """BERT's punctuation: every ASCII symbol (``$``, ``^``, ... too) and Unicode P*."""
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return _category(ch)[0] == "P"


def is_cjk(cp: int) -> bool:
    """Code points BERT surrounds with spaces: the CJK ideograph blocks it lists."""
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2B820 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


def _is_removed(ch: str) -> bool:
    """Deleted before anything else: NUL, U+FFFD and all C* except tab/newline/CR."""
    if ch in "\t\n\r":
        return False
    return ch == "\ufffd" or _category(ch)[0] == "C"


def _is_space(ch: str) -> bool:
    """Turned into a plain space by the cleaning step (only Zs and the four ASCII ones)."""
    return ch in " \t\n\r" or _category(ch) == "Zs"


def _starts_nfc_segment(ch: str) -> bool:
    """True if NFC can never combine ``ch`` (or the start of its decomposition) with what precedes it."""
    if _combining(ch) or ch in NFC_JOINING_STARTERS:
        return False
    first = _normalize("NFD", ch)[0]
    return not (_combining(first) or first in NFC_JOINING_STARTERS)


# A piece of text under transformation: its characters and their source spans.
_Piece = tuple[str, list[int], list[int]]


def _coarse(text: str, starts: list[int], ends: list[int], new_text: str) -> _Piece:
    """Map every character of ``new_text`` to the whole span of ``text``.

    Used only when a Unicode transformation cannot be aligned character by
    character; ids stay exact, offsets become the enclosing span.
    """
    lo, hi = min(starts), max(ends)
    return new_text, [lo] * len(new_text), [hi] * len(new_text)


def _nfc(text: str, starts: list[int], ends: list[int]) -> _Piece:
    """NFC-normalise ``text``, aligning each output character to the segment it came from."""
    if _is_normalized("NFC", text):
        return text, starts, ends
    target = _normalize("NFC", text)
    out: list[str] = []
    new_starts: list[int] = []
    new_ends: list[int] = []
    seg_begin = 0
    n = len(text)
    for i in range(1, n + 1):
        if i < n and not _starts_nfc_segment(text[i]):
            continue
        segment = text[seg_begin:i]
        composed = _normalize("NFC", segment)
        if composed == segment:
            out.append(segment)
            new_starts.extend(starts[seg_begin:i])
            new_ends.extend(ends[seg_begin:i])
        else:
            lo, hi = min(starts[seg_begin:i]), max(ends[seg_begin:i])
            out.append(composed)
            new_starts.extend([lo] * len(composed))
            new_ends.extend([hi] * len(composed))
        seg_begin = i
    result = "".join(out)
    if result != target:  # a composition crossed a segment boundary we thought safe
        return _coarse(text, starts, ends, target)
    return result, new_starts, new_ends


def _lower(text: str, starts: list[int], ends: list[int]) -> _Piece:
    """``str.lower`` of a whole word (so final sigma is decided as Python does)."""
    lowered = text.lower()
    if len(lowered) == len(text):  # lowercasing never shortens, so this is one-to-one
        return lowered, starts, ends
    new_starts: list[int] = []
    new_ends: list[int] = []
    for ch, s, e in zip(text, starts, ends):
        k = len(ch.lower())
        new_starts.extend([s] * k)
        new_ends.extend([e] * k)
    if len(new_starts) != len(lowered):
        return _coarse(text, starts, ends, lowered)
    return lowered, new_starts, new_ends


def _strip_accents(text: str, starts: list[int], ends: list[int]) -> _Piece:
    """NFD, then drop every non-spacing mark (Mn), as the original does."""
    decomposed = _normalize("NFD", text)
    if decomposed == text:
        chars, new_starts, new_ends = text, starts, ends
    else:
        items: list[tuple[str, int, int]] = []
        for ch, s, e in zip(text, starts, ends):
            items.extend((d, s, e) for d in _normalize("NFD", ch))
        _canonical_order(items)
        chars = "".join(item[0] for item in items)
        if chars != decomposed:
            chars, new_starts, new_ends = _coarse(text, starts, ends, decomposed)
        else:
            new_starts = [item[1] for item in items]
            new_ends = [item[2] for item in items]
    keep = [i for i, ch in enumerate(chars) if _category(ch) != "Mn"]
    if len(keep) == len(chars):
        return chars, new_starts, new_ends
    return (
        "".join(chars[i] for i in keep),
        [new_starts[i] for i in keep],
        [new_ends[i] for i in keep],
    )


def _canonical_order(items: list[tuple[str, int, int]]) -> None:
    """Stable-sort each run of combining marks by combining class (Unicode canonical ordering)."""
    i, n = 0, len(items)
    while i < n:
        if not _combining(items[i][0]):
            i += 1
            continue
        j = i
        while j < n and _combining(items[j][0]):
            j += 1
        if j - i > 1:
            items[i:j] = sorted(items[i:j], key=lambda item: _combining(item[0]))
        i = j


def _split_where(piece: _Piece, is_boundary: Callable[[str], bool], keep_boundary: bool) -> list[_Piece]:
    """Split a piece at characters matching ``is_boundary``; keep them as 1-char pieces or drop them."""
    text, starts, ends = piece
    out: list[_Piece] = []
    begin = 0
    for i, ch in enumerate(text):
        if is_boundary(ch):
            if i > begin:
                out.append((text[begin:i], starts[begin:i], ends[begin:i]))
            if keep_boundary:
                out.append((ch, starts[i : i + 1], ends[i : i + 1]))
            begin = i + 1
    if begin < len(text):
        out.append((text[begin:], starts[begin:], ends[begin:]))
    return out


def _isspace(ch: str) -> bool:
    return ch.isspace()


class ReferencePreTokenizer:
    """Splits text into BERT words exactly as the original Python tokenizer, with offsets.

    Steps, per stretch of text between special tokens: delete control
    characters, turn whitespace into spaces, space out CJK ideographs, NFC,
    split on whitespace; then per word (unless the word is a special token):
    lowercase, strip accents, split off punctuation.
    """

    def __init__(
        self,
        *,
        lowercase: bool,
        strip_accents: bool | None,
        tokenize_chinese_chars: bool,
        special_tokens: Iterable[str],
    ) -> None:
        self.lowercase = lowercase
        self.strip_accents = lowercase if strip_accents is None else strip_accents
        self.tokenize_chinese_chars = tokenize_chinese_chars
        self.special_tokens = frozenset(t for t in special_tokens if t)
        # Longest first, so at one position the longest special token wins, like the
        # leftmost-longest matching of both the reference and the Rust engine.
        alternatives = sorted(self.special_tokens, key=lambda t: (-len(t), t))
        self._special_re = re.compile("|".join(map(re.escape, alternatives))) if alternatives else None

    def words(self, text: str) -> list[Word]:
        """The words of ``text`` (special tokens are kept whole) with spans into ``text``."""
        out: list[Word] = []
        pos = 0
        if self._special_re is not None:
            for match in self._special_re.finditer(text):
                self._chunk_words(text, pos, match.start(), out)
                start, end = match.span()
                out.append(Word(match.group(), list(range(start, end)), list(range(start + 1, end + 1))))
                pos = end
        self._chunk_words(text, pos, len(text), out)
        return out

    def _chunk_words(self, text: str, begin: int, end: int, out: list[Word]) -> None:
        chunk = text[begin:end]
        parts: list[str] = []
        starts: list[int] = []
        chinese = self.tokenize_chinese_chars
        pos = 0
        # Printable ASCII needs no cleaning: copy it in runs and look only at the rest.
        for match in _NOT_PRINTABLE_ASCII.finditer(chunk):
            i = match.start()
            if i > pos:
                parts.append(chunk[pos:i])
                starts.extend(range(begin + pos, begin + i))
            pos = i + 1
            ch = match.group()
            if _is_removed(ch):
                continue
            if _is_space(ch):
                ch = " "
            elif chinese and is_cjk(ord(ch)):
                # The padding spaces map to the ideograph; whitespace never reaches a word.
                parts.append(f" {ch} ")
                starts.extend((begin + i,) * 3)
                continue
            parts.append(ch)
            starts.append(begin + i)
        if pos < len(chunk):
            parts.append(chunk[pos:])
            starts.extend(range(begin + pos, end))
        if not starts:
            return
        cleaned, starts, ends = _nfc("".join(parts), starts, [s + 1 for s in starts])
        for match in _NON_SPACE_RUN.finditer(cleaned):  # \S+ splits exactly like str.split()
            a, b = match.span()
            token: _Piece = (match.group(), starts[a:b], ends[a:b])
            if token[0] in self.special_tokens:
                out.append(Word(*token))
                continue
            if self.lowercase:
                token = _lower(*token)
            if self.strip_accents and not token[0].isascii():
                token = _strip_accents(*token)
            if token[0].isalnum():  # no punctuation inside: the common case
                subs = [token]
            else:
                subs = _split_where(token, is_punctuation, keep_boundary=True)
            for sub in subs:
                # The original joins and re-splits on whitespace at the end; case
                # mapping and NFD never create whitespace, but stay faithful.
                if _SPACE.search(sub[0]) is None:
                    out.append(Word(*sub))
                else:
                    out.extend(Word(*w) for w in _split_where(sub, _isspace, keep_boundary=False))

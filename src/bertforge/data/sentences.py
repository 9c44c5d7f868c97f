"""A small rule-based sentence splitter for paragraph-per-line corpora.

BERT's segment pairs are built from *sentences*, but Wikipedia dumps give one paragraph per line. A learned
splitter (Punkt, spaCy) would be a heavy dependency for a step that only has to be good enough to place
A/B boundaries at plausible points, so we use rules: a period, "?" or "!" (optionally followed by closing
quotes or brackets) ends a sentence when whitespace and a non-lowercase character follow, unless the word
before it is an abbreviation, an initial, or an acronym that rarely ends a sentence.
"""
from __future__ import annotations

import re

# Never end a sentence: titles and the like are always followed by a name.
_ALWAYS_ABBREV = frozenset("""
    mr mrs ms messrs dr prof st mt ft gen col lt sgt capt cmdr adm maj brig gov sen rep rev hon pres fr
    e.g i.e cf vs v viz approx ca c est ed eds trans
""".split())
# Abbreviations that stand before a number ("No. 5", "Jan. 12", "pp. 3-4"); elsewhere they are words.
_NUMBER_ABBREV = frozenset("""
    no nos vol vols p pp fig figs art sec ch op nr
    jan feb mar apr jun jul aug sep sept oct nov dec
""".split())
# May end a sentence ("... Apple Inc. The company"), or not ("Inc. shares"): we split only when the next word
# is one that typically starts a sentence. Single capital letters (initials, "World War I.") and dotted
# acronyms ("U.S.", "a.m.", "Ph.D.") follow the same rule.
_MAYBE_ABBREV = frozenset("etc inc ltd co corp jr sr bros llc plc dept univ assn al".split())
_SENTENCE_STARTERS = frozenset("""
    A An The This That These Those It Its He She His Her They Their Them We Our I In On At By For From With
    After Before During Since When While Although Though However But And Or So Then There Here As If Some
    Many Most All Both Each Other Another One Two Three Following Despite According Also Today Later
""".split())

_BOUNDARY = re.compile(
    r"""(?P<term>[.!?\u2026]+)          # . ! ? ... or an ellipsis character, possibly repeated
        ["'\u201d\u2019\u00bb)\]]*       # closing quotes / brackets still belong to this sentence
        \s+
        (?=["'\u201c\u2018\u00ab(\[]*    # the next sentence may open with a quote or bracket
        (?P<next>\S))""",
    re.X,
)
_ACRONYM = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")  # "U.S" / "a.m" / "Ph.D" (the last period is the terminator)
_OPENING = "\"'\u201c\u2018\u00ab(["


def _is_boundary(text: str, m: re.Match) -> bool:
    nxt = m.group("next")
    if nxt.islower():
        return False                    # "e.g. the", "Yahoo! is", '"Why?" he asked'
    term = m.group("term")
    if term != ".":
        return True                     # "?", "!", "...": followed by a capital, a digit or a symbol
    start = text.rfind(" ", 0, m.start()) + 1
    word = text[start:m.start()].lstrip(_OPENING)
    if not word:
        return True
    lower = word.lower()
    if lower in _ALWAYS_ABBREV:
        return False
    if lower in _NUMBER_ABBREV and nxt.isdigit():
        return False
    if lower in _MAYBE_ABBREV or (len(word) == 1 and word.isupper()) or _ACRONYM.fullmatch(word):
        next_word = text[m.end():m.end() + 40].lstrip(_OPENING).split(" ", 1)[0]
        return next_word.rstrip(",;:") in _SENTENCE_STARTERS
    return True


def split_sentences(paragraph: str) -> list[str]:
    """Split one paragraph into sentences (stripped, non-empty, in order; joined with spaces they give back
    the paragraph up to whitespace)."""
    sentences: list[str] = []
    start = 0
    for m in _BOUNDARY.finditer(paragraph):
        if _is_boundary(paragraph, m):
            piece = paragraph[start:m.end()].strip()
            if piece:
                sentences.append(piece)
            start = m.end()
    tail = paragraph[start:].strip()
    if tail:
        sentences.append(tail)
    return sentences

"""The rule-based sentence splitter: hand cases for each rule, then properties on real Wikipedia paragraphs."""
from __future__ import annotations

import re

import pytest

from bertforge.data.sentences import split_sentences

CASES = [
    ("Dr. Smith arrived. He sat down.", ["Dr. Smith arrived.", "He sat down."]),
    ("Mr. and Mrs. Jones met Prof. Lee at St. Paul's.", ["Mr. and Mrs. Jones met Prof. Lee at St. Paul's."]),
    ("The U.S. Army was founded in 1775. It is old.", ["The U.S. Army was founded in 1775.", "It is old."]),
    ("He moved to the U.S. The move was hard.", ["He moved to the U.S.", "The move was hard."]),
    ("Born in Washington, D.C. He grew up there.", ["Born in Washington, D.C.", "He grew up there."]),
    ("Fruit, e.g. apples, i.e. food. So it goes.", ["Fruit, e.g. apples, i.e. food.", "So it goes."]),
    ("J. R. R. Tolkien wrote it. George W. Bush read it.", ["J. R. R. Tolkien wrote it.", "George W. Bush read it."]),
    ("It ended after World War I. The peace held.", ["It ended after World War I.", "The peace held."]),
    ("It cost 3.5 million. That was 0.2% of it.", ["It cost 3.5 million.", "That was 0.2% of it."]),
    ("He paused... Then he left.", ["He paused...", "Then he left."]),
    ("He paused\u2026 Then he left.", ["He paused\u2026", "Then he left."]),
    ('He said "Go home." Then he left.', ['He said "Go home."', "Then he left."]),
    ("(See below.) The list follows.", ["(See below.)", "The list follows."]),
    ("It is big [citation needed.] Next one.", ["It is big [citation needed.]", "Next one."]),
    ('"Why?" he asked. "Because!" She left.', ['"Why?" he asked.', '"Because!"', "She left."]),
    ("Yahoo! is a company. Really? Yes.", ["Yahoo! is a company.", "Really?", "Yes."]),
    ("See No. 5, Fig. 3 and pp. 12-14. Then stop.", ["See No. 5, Fig. 3 and pp. 12-14.", "Then stop."]),
    ("He said no. Then he left.", ["He said no.", "Then he left."]),
    ("Born c. 1900 in St. Louis, he died Jan. 5, 1950.", ["Born c. 1900 in St. Louis, he died Jan. 5, 1950."]),
    ("Apple Inc. The company grew. Apple Inc. shares rose.", ["Apple Inc.", "The company grew.", "Apple Inc. shares rose."]),
    ("Smith et al. showed it. Jones et al. The end.", ["Smith et al. showed it.", "Jones et al.", "The end."]),
    ("At 5 p.m. he left. At 6 p.m. The news came.", ["At 5 p.m. he left.", "At 6 p.m.", "The news came."]),
    ("Won 2-1 vs. Leeds. The crowd cheered.", ["Won 2-1 vs. Leeds.", "The crowd cheered."]),
    ("Released in 2015. 2016 was quieter.", ["Released in 2015.", "2016 was quieter."]),
    ("No terminal punctuation here", ["No terminal punctuation here"]),
    ("  Padded.   Spaces.  ", ["Padded.", "Spaces."]),
    ("", []),
]


@pytest.mark.parametrize("text, expected", CASES, ids=[c[0][:30] for c in CASES])
def test_hand_cases(text, expected):
    assert split_sentences(text) == expected


def _paragraphs(articles):
    return [line for article in articles for line in article[1:]]


def test_real_paragraphs_lose_nothing(wiki_articles):
    """Joining the pieces gives back the paragraph (up to whitespace); pieces are non-empty and stripped."""
    for paragraph in _paragraphs(wiki_articles):
        pieces = split_sentences(paragraph)
        assert all(p and p == p.strip() for p in pieces)
        assert " ".join(pieces).split() == paragraph.split()


def test_real_paragraphs_split_plausibly(wiki_articles):
    paragraphs = _paragraphs(wiki_articles)
    pieces = [p for paragraph in paragraphs for p in split_sentences(paragraph)]
    multi = sum(len(split_sentences(p)) > 1 for p in paragraphs) / len(paragraphs)
    assert 0.25 < multi < 0.9, multi  # real paragraphs mostly hold several sentences (headings hold one)
    # Every piece but a paragraph's last one ends like a sentence.
    for paragraph in paragraphs:
        for piece in split_sentences(paragraph)[:-1]:
            assert re.search(r"[.!?\u2026][\"'\u201d\u2019)\]]*$", piece), piece
    # Never cut after a title abbreviation or an initial followed by a name.
    title_end = re.compile(r"\b(Dr|Mr|Mrs|Ms|Prof|St|Mt|Gen|Col|Lt|Rev|Sgt|Capt|Gov|Sen)\.$")
    assert not [p for p in pieces if title_end.search(p)]
    # A cut is never followed by a lowercase start (that would be a cut inside a sentence).
    assert not [p for paragraph in paragraphs for p in split_sentences(paragraph)[1:] if p[0].islower()]
    # Typical sentence length in words: real sentences, not fragments or whole paragraphs.
    words = sorted(len(p.split()) for p in pieces)
    assert 12 <= words[len(words) // 2] <= 30

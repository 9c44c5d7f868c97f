"""Every command in README.md and docs/*.md does what the page says.

Fast: every `bertforge <verb> --flag` the docs name (in any block or inline code) is a flag the parser knows,
with a value it takes; every script, flag of a script, data file and link exists; every test marker is well
formed; no page tells the project's history. Slow: every shell and Python block runs, in order, in a scratch
checkout (tests/docs/doc_runner.py), with the reduced budget its marker declares (tests/docs/markdown_blocks.py
describes the markers).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from docs.doc_runner import Scratch, failure
from docs.markdown_blocks import (PYTHON_LANGS, REPO_ROOT, SHELL_LANGS, broken_link, check_command, check_script,
                                  commands_in, documents, known_flags, missing_path, named_paths, read_document,
                                  scripts_in, shown, torchrun_problems)
from needs import missing

SHARED = REPO_ROOT.parent / "shared"
DOCS = {shown(path): read_document(path) for path in documents()}

# Lab-notebook phrases: the docs say what the software does now, not how it came to be.
HISTORY = re.compile(
    r"\b(?:session \d+|this turn|issues? #?\d+|we tried|what we tried|tried and dropped|used to (?:be|take|give|run|"
    r"default|say)|previously|no longer|now defaults?|defaults? now|target (?:is )?met|goal is met|: met\b|"
    r"next runs?|runs? to make|the one to make next|former(?:ly)?|old demo|the demo now|at the time|"
    r"this project asks|the [\w-]+ issue asks|asks for \d|the \w+ bar\b|\bnow (?:defaults|freezes|uses|takes|runs|reads)|"
    r"before the fix|after the fix|was fixed|not yet|predates|(?:the )?issue asks|from now on|as of today|"
    r"(?:was|were|has been|have been) (?:renamed|replaced by|changed to)|\bthen\b[^.]{0,60}\bnow\b|"
    # a lab notebook's voice: races and rounds counted, readings and suspects, what was (not) run, stretch goals
    r"(?:first|second|third|fourth|this) (?:race|round)|the (?:first|second|third) race's|"
    r"our (?:reading|first|suspect|guess|hunch|finding|view|take)|the honest reading|"
    r"we (?:found|checked|saw|noticed|learned|discovered|measured|ran|picked|chose)|"
    r"still not (?:run|measured|tried|done)|not (?:tried|raced)|(?:was|were) not (?:measured|run|tried|isolated|"
    r"raced|separated)|stretch(?: goal| target)?|earlier (?:races?|rounds?|versions?|attempts?|measurements?|"
    r"sessions?)|(?:measured|said|shown|reported|found) earlier|this session|"
    r"now (?:beats|wins|leads|reaches|scores|matches|outperforms|stands)|(?:twice|once|again) now|this time|"
    r"turned out|, later(?=,)|the current one)\b",
    re.IGNORECASE)


def _each(kind: str):
    """(where, text, shell?) of every block and inline span of the docs that may name commands."""
    for name, doc in DOCS.items():
        for block in doc.blocks:
            if block.lang in PYTHON_LANGS:
                continue
            text = block.shell_text() if block.lang in SHELL_LANGS else block.text
            yield block.where, text, block.lang in SHELL_LANGS or block.lang in ("", "text")
        if kind == "all":
            for line, span in doc.inline:
                yield f"{name}:{line}", span, False


def test_markers_are_well_formed():
    problems = [p for doc in DOCS.values() for p in doc.problems]
    assert not problems, "\n".join(problems)


def test_every_bertforge_flag_in_the_docs_is_one_the_parser_knows():
    problems = [f"{where}: {p}" for where, text, shell in _each("all")
                for verb, words in commands_in(text, shell) for p in check_command(verb, words)]
    problems += [f"{where}: {p}" for where, text, _ in _each("all") for p in torchrun_problems(text)]
    assert not problems, "\n".join(problems)


def test_every_flag_named_alone_belongs_to_a_verb_or_a_script():
    """A `--flag` in inline code without its command still names a flag that exists somewhere."""
    known = known_flags()
    problems = [f"{name}:{line}: {flag} is a flag of no bertforge verb and no script in benchmarks/, experiments/ or tools/"
                for name, doc in DOCS.items() for line, span in doc.inline
                for flag in re.findall(r"(?<![\w-])--[a-z][\w-]*", span) if flag not in known]
    assert not problems, "\n".join(problems)


def test_every_script_and_its_flags_exist():
    problems = [f"{where}: {p}" for where, text, shell in _each("all")
                for path, words in scripts_in(text, shell) for p in check_script(path, words)]
    assert not problems, "\n".join(problems)


def test_every_file_the_docs_name_exists():
    if not SHARED.is_dir():
        missing("../shared (the data the docs' commands read) is not present next to this checkout")
    problems = [f"{where}: {path} does not exist" for where, text, _ in _each("all")
                for path in named_paths(text) if missing_path(path)]
    problems += [f"{name}:{line}: {why}" for name, doc in DOCS.items()
                 for line, target in doc.links if (why := broken_link(doc.path, target))]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("phrase", [
    "fixed in issue 29", "see issue #12", "the pre-training issue asks for 1.8x", "the issue asks for it",
    "--keep best now defaults to best", "it used to take an hour", "we tried a larger batch", "Target met.",
    "previously the run stopped", "it no longer prints", "the next runs to make", "the flag was renamed",
    "(the BERT recipe then, `--recipe fast` now)",
    # the phrases a reader of issue 49 marked, and those cut from RESULTS.md when it became a product page
    "the first race", "The second race below shows that this result was fragile", "in this race",
    "this race's `modern`", "the first race's open question", "A first round with fewer fine-tuning updates",
    "Our reading: at four layers", "our first suspect is the rotary positions", "so the honest reading is",
    "**Still not run (CPU budget):**", "below the 6.0 stretch by 0.83 nats", "we found that the plateau is real",
    "We checked that the plateau is not a bertforge bug", "an earlier race", "as measured earlier",
    "in this session", "fast now beats transformers", "The same script and corpus, later, with",
    "the timing gave `modern` 784 this time", "Twice now, in both layouts", "the current one warms up first",
    "which option does it was not isolated here", "The layout and the rate were not separated",
    "That variant was not measured.", "not tried: a lower discriminator weight", "**Not raced:** bf16",
    "it turned out to be the schedule"])
def test_history_phrases_are_caught(phrase: str):
    assert HISTORY.search(phrase), f"the history test misses {phrase!r}"


@pytest.mark.parametrize("phrase", [
    "dev sets are never used to pick an epoch", "run it now with --max-steps", "the model is then scored",
    "a previous checkpoint's vocabulary",
    "an earlier run of the same suite there is continued", "a row waits for a later batch",
    "no later layer needs the others", "the recipe race compares contenders at equal step budgets",
    "each round's ratio", "the first run downloads the model", "a block that is not run is still read",
    "the timing runs 30 steps", "one seed: the number is not measured again",
    "a schedule stretched to the step budget", "the earlier layers' outputs", "this timing gives 784 steps"])
def test_history_test_passes_present_tense_prose(phrase: str):
    assert not HISTORY.search(phrase), f"the history test flags present-tense prose {phrase!r}"


def test_no_page_tells_the_projects_history():
    hits = [f"{name}:{number}: {match.group(0)!r} in: {line.strip()[:120]}"
            for name, doc in DOCS.items()
            for number, line in enumerate(doc.path.read_text(encoding="utf-8").splitlines(), 1)
            for match in [HISTORY.search(line)] if match]
    assert not hits, "say what the software does now:\n" + "\n".join(hits)


RUNNABLE = [name for name, doc in DOCS.items() if any(block.runnable for block in doc.blocks)]


@pytest.mark.slow
@pytest.mark.parametrize("name", RUNNABLE)
def test_document_runs(name: str, tmp_path: Path):
    """The document's shell and Python blocks, in order, in one scratch checkout."""
    if not SHARED.is_dir():
        missing("../shared (the data the docs' commands read) is not present next to this checkout")
    scratch = Scratch(tmp_path, SHARED)
    for block in DOCS[name].blocks:
        if not block.runnable:
            continue
        why = failure(block, scratch.run(block))
        assert why is None, why


def test_no_command_elides_its_flags():
    """`bertforge pretrain ... --output x` cannot be pasted: every command in a block is written out in full."""
    problems = [f"{where}: `bertforge {verb}` elides flags with '...'" for name, doc in DOCS.items()
                for block in doc.blocks if block.lang in SHELL_LANGS
                for where in [block.where] for verb, words in commands_in(block.shell_text(), True)
                if "..." in words or "…" in words]
    assert not problems, "\n".join(problems)

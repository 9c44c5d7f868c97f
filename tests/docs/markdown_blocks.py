"""README.md and docs/*.md as the docs tests read them: fenced blocks with their hidden test markers, and the
`bertforge <verb> --flag` commands, scripts, files and links they name.

A marker is an HTML comment, invisible on a rendered page, right before a fenced block (blank lines between are
fine). It holds directives separated by `;`:

    <!-- test: replace "--time-budget 20m" "--max-steps 3"; replace "--epochs 3" "--epochs 0.05"; timeout 600 -->
    <!-- test: skip (needs a GPU) -->
    <!-- test: fails "no such file" -->
    <!-- test: expect "resuming from" -->

- `replace "OLD" "NEW"`: the test runs the block with every OLD replaced by NEW (OLD must occur in the block);
  `{port}` in NEW becomes a free TCP port of this machine, the same one for the whole document.
- `timeout SECONDS`: how long the block may run (default: `DEFAULT_TIMEOUT`).
- `fails "TEXT"`: the block must exit non-zero and print TEXT (a documented error message).
- `expect "TEXT"`: the block must print TEXT (repeatable).
- `skip (why)`: the block is not run, only read: its `bertforge` flags, scripts and files are checked.

A page whose every block reproduces a measurement (hours of CPU, data a reader builds first) says so once, anywhere
in the page; its blocks without a marker of their own are then read, not run:

    <!-- test-document: skip (each block reproduces a measurement of this page: hours of CPU) -->

A block the reader does not need but the test does (a folder a reference page calls DIR, say) is a comment of its
own, run in its place among the document's blocks:

    <!-- test-setup
    bertforge pretrain --data shards --model tiny --objective mlm --max-steps 2 --output DIR
    -->
"""
from __future__ import annotations

import argparse
import re
import shlex
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SHELL_LANGS = frozenset({"bash", "sh", "shell", "console"})
PYTHON_LANGS = frozenset({"python", "py"})
DEFAULT_TIMEOUT = 900.0  # a loaded CI machine: a block that hangs still fails, a slow one passes


def documents() -> list[Path]:
    """The user docs: README.md and every docs/*.md."""
    return [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]


def shown(path: Path) -> str:
    """A path as messages show it: relative to the repository."""
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


@dataclass
class Directives:
    skip: str | None = None
    replace: list[tuple[str, str]] = field(default_factory=list)
    timeout: float = DEFAULT_TIMEOUT
    fails: str | None = None
    expect: list[str] = field(default_factory=list)


@dataclass
class Block:
    doc: Path
    line: int  # the opening fence's line (1-based); for a test-setup comment, the comment's
    lang: str
    text: str
    directives: Directives = field(default_factory=Directives)
    hidden: bool = False  # a test-setup comment: run by the test, not shown to the reader

    @property
    def where(self) -> str:
        return f"{shown(self.doc)}:{self.line}"

    @property
    def runnable(self) -> bool:
        return self.lang in SHELL_LANGS | PYTHON_LANGS and self.directives.skip is None

    def shell_text(self) -> str:
        """The commands of a shell block: a console block's `$ ` lines (and their continuations) only."""
        if self.lang != "console":
            return self.text
        out, continued = [], False
        for line in self.text.splitlines():
            if line.startswith("$ ") or continued:
                out.append(line[2:] if line.startswith("$ ") and not continued else line)
                continued = line.rstrip().endswith("\\")
        return "\n".join(out)


@dataclass
class Document:
    path: Path
    blocks: list[Block]
    problems: list[str]  # malformed markers, stale replacements
    inline: list[tuple[int, str]]  # (line, text) of every inline code span outside fenced blocks
    links: list[tuple[int, str]]  # (line, target) of every Markdown link


_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)")
_INLINE = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
_LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")


def read_document(path: Path) -> Document:
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    problems: list[str] = []
    prose: list[tuple[int, str]] = []  # lines outside fences and comments, for inline code and links
    pending: tuple[int, Directives] | None = None
    marked: set[int] = set()  # ids of the blocks a marker of their own governs
    document_skip: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("<!--"):
            end = i
            while "-->" not in lines[end] and end + 1 < len(lines):
                end += 1
            body = "\n".join(lines[i:end + 1]).lstrip()[4:]
            body = body[: body.rfind("-->")] if "-->" in body else body
            where = f"{shown(path)}:{i + 1}"
            stripped = body.strip()
            if stripped.startswith("test-setup"):
                header, _, code = body.partition("\n")
                blocks.append(Block(path, i + 1, "bash", code.rstrip() + "\n", hidden=True,
                                    directives=parse_directives(header.strip()[len("test-setup"):].lstrip(": "),
                                                                where, problems)))
            elif stripped.startswith("test-document:"):
                document_skip = parse_directives(stripped[len("test-document:"):], where, problems).skip
                if document_skip is None:
                    problems.append(f"{where}: a page-wide marker holds only `skip (why)`")
            elif stripped.startswith("test:"):
                if pending is not None:
                    problems.append(f"{where}: a second test marker before the block of the one at line {pending[0]}")
                pending = (i + 1, parse_directives(stripped[len("test:"):], where, problems))
            i = end + 1
            continue
        fence = _FENCE.match(line)
        if fence:
            indent, mark, lang = len(fence.group("indent")), fence.group("fence"), fence.group("lang").lower()
            body_lines, j = [], i + 1
            while j < len(lines) and not (lines[j].strip().startswith(mark)
                                          and lines[j].strip().strip(mark[0]) == ""):
                body_lines.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j].lstrip())
                j += 1
            directives = pending[1] if pending else Directives()
            block = Block(path, i + 1, lang, "\n".join(body_lines) + "\n", directives)
            _check_replacements(block, problems)
            if pending and lang not in SHELL_LANGS | PYTHON_LANGS:
                problems.append(f"{block.where}: a test marker on a ```{lang or 'plain'} block, which is never run")
            blocks.append(block)
            if pending:
                marked.add(id(block))
            pending = None
            i = j + 1
            continue
        if pending is not None and line.strip():
            problems.append(f"{shown(path)}:{pending[0]}: a test marker not followed by a fenced block")
            pending = None
        prose.append((i + 1, line))
        i += 1
    if pending is not None:
        problems.append(f"{shown(path)}:{pending[0]}: a test marker at the end of the document")
    if document_skip is not None:
        for block in blocks:
            if id(block) not in marked and not block.hidden:
                block.directives.skip = document_skip
    return Document(path, blocks, problems, _inline_spans(prose), _links(prose))


def _inline_spans(prose: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Inline code spans, which may wrap onto the next line of their paragraph (not across a blank line)."""
    spans: list[tuple[int, str]] = []
    paragraph: list[tuple[int, str]] = []
    for number, line in [*prose, (0, "")]:
        if line.strip():
            paragraph.append((number, line))
            continue
        if paragraph:
            text = "\n".join(line for _, line in paragraph)
            starts = [0]
            for _, line in paragraph:
                starts.append(starts[-1] + len(line) + 1)
            for match in _INLINE.finditer(text):
                row = max(k for k, start in enumerate(starts[:-1]) if start <= match.start())
                spans.append((paragraph[row][0], " ".join(match.group(2).split())))
        paragraph = []
    return spans


def _links(prose: list[tuple[int, str]]) -> list[tuple[int, str]]:
    return [(number, m.group(1)) for number, line in prose for m in _LINK.finditer(line)]


def parse_directives(text: str, where: str, problems: list[str]) -> Directives:
    directives = Directives()
    text = text.strip()
    if text.startswith("skip"):
        reason = text[len("skip"):].strip().strip("():").strip()
        if not reason:
            problems.append(f"{where}: `skip` needs a reason: <!-- test: skip (why) -->")
        directives.skip = reason or "?"
        return directives
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=";")
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError as err:
        problems.append(f"{where}: cannot read the test marker ({err})")
        return directives
    items: list[list[str]] = [[]]
    for token in tokens:
        if token == ";":
            items.append([])
        else:
            items[-1].append(token)
    for item in filter(None, items):
        name, args = item[0], item[1:]
        if name == "replace" and len(args) == 2 and args[0]:
            directives.replace.append((args[0], args[1]))
        elif name == "timeout" and len(args) == 1 and re.fullmatch(r"\d+(\.\d+)?", args[0]):
            directives.timeout = float(args[0])
        elif name == "fails" and len(args) == 1 and args[0]:
            directives.fails = args[0]
        elif name == "expect" and len(args) == 1 and args[0]:
            directives.expect.append(args[0])
        else:
            problems.append(f"{where}: unknown test directive {' '.join(item)!r} (replace \"OLD\" \"NEW\", "
                            "timeout SECONDS, fails \"TEXT\", expect \"TEXT\", skip (why))")
    return directives


def _check_replacements(block: Block, problems: list[str]) -> None:
    for old, _ in block.directives.replace:
        if old not in block.text:
            problems.append(f"{block.where}: the test marker replaces {old!r}, which the block does not contain")


def runnable_text(block: Block, port: int | None = None) -> str:
    """The block as the test runs it: its replacements made."""
    text = block.shell_text() if block.lang in SHELL_LANGS else block.text
    for old, new in block.directives.replace:
        text = text.replace(old, new.replace("{port}", str(port)) if port is not None else new)
    return text


# ---- the commands a text names ------------------------------------------------------------------------------------
_BERTFORGE = re.compile(r"(?<![\w./\[-])bertforge\s+(?P<verb>[a-z][a-z0-9-]*)(?![\w:-])")
# a message the docs quote (`bertforge pretrain: error: ...`), not a command
_MESSAGE = re.compile(r"^\s*bertforge(?: [a-z][\w-]*)+: (?:error|internal error)\b")
_SCRIPT = re.compile(r"(?<![\w./-])(?:python3?|bash)\s+(?P<path>(?:benchmarks|experiments|demo|tools)/[\w./-]+)")
_SHELL_STOP = frozenset({"|", "||", "&", "&&", ";", ";;", "(", ")", ">", ">>", "<", "<<", "2>", "&>"})
_PLACEHOLDER = re.compile(r"[A-Z]{2,}|[$<>{}*]|\.\.\.|…")
_FILE_NAME = re.compile(r"\.[A-Za-z]\w*$")


def _shell_tokens(text: str) -> list[str]:
    """Shell words up to the end of the command (a pipe, `;`, `&`, a redirection or a comment)."""
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words = []
        for word in lexer:
            if word in _SHELL_STOP or set(word) <= set("|&;<>()"):
                break
            words.append(word)
        return words
    except ValueError:  # an unbalanced quote: read the plain words
        return text.split()


def _prose_tokens(text: str) -> list[str]:
    """Words of an inline code span: `[--eval FILE]` and `a|b` are prose, not shell."""
    return [word.strip("[](),`'\"") for word in text.split() if word.strip("[](),`'\"")]


def commands_in(text: str, shell: bool) -> list[tuple[str, list[str]]]:
    """(verb, words after it) for every `bertforge <verb>` in `text`; `shell` reads it as shell lines."""
    if shell:
        text = re.sub(r"\\\n", " ", text)
    found = []
    for line in text.splitlines() if shell else [text]:
        if _MESSAGE.match(line):
            continue
        for match in _BERTFORGE.finditer(line):
            rest = line[match.end():]
            if shell:
                if "#" in line[: match.start()] and _in_comment(line, match.start()):
                    continue
                words = _shell_tokens(rest)
            else:
                words = _prose_tokens(rest)
            found.append((match.group("verb"), words))
    return found


def _in_comment(line: str, position: int) -> bool:
    """Whether `position` of a shell line lies after an unquoted `#`."""
    quote = None
    for k, char in enumerate(line[:position]):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (k == 0 or line[k - 1].isspace()):
            return True
    return False


def scripts_in(text: str, shell: bool) -> list[tuple[str, list[str]]]:
    """(repository path, words after it) for every `python benchmarks/...py` or `bash experiments/...sh`."""
    if shell:
        text = re.sub(r"\\\n", " ", text)
    found = []
    for line in text.splitlines() if shell else [text]:
        for match in _SCRIPT.finditer(line):
            rest = line[match.end():]
            found.append((match.group("path"), _shell_tokens(rest) if shell else _prose_tokens(rest)))
    return found


@lru_cache(maxsize=1)
def _verb_parsers() -> dict[str, argparse.ArgumentParser]:
    from bertforge.cli import build_parser
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(subparsers.choices)


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def check_command(verb: str, words: list[str]) -> list[str]:
    """What is wrong with `bertforge <verb> <words>` as the parser reads it: an unknown verb or flag, a value
    outside a flag's choices, a literal value its type refuses. Placeholders (DIR, $VAR, <x>, ...) are not
    values."""
    parsers = _verb_parsers()
    if verb not in parsers:
        return [f"`bertforge {verb}`: no such verb (bertforge --help lists them)"]
    parser, name = parsers[verb], f"bertforge {verb}"
    problems = []
    for k, word in enumerate(words):
        if word == "--":
            break
        if not word.startswith("--") or len(word) == 2:
            sub = _subcommands(parser)
            if sub and word in sub:
                parser, name = sub[word], f"{name} {word}"
            continue
        flag, eq, value = word.partition("=")
        action = parser._option_string_actions.get(flag)
        if action is None:
            problems.append(f"`{name} {flag}`: no such flag ({name} --help lists them)")
            continue
        if not eq:
            if action.nargs == 0 or k + 1 >= len(words) or words[k + 1].startswith("--"):
                continue
            value = words[k + 1]
        problems += [f"`{name} {flag} {v}`: {why}" for v, why in _bad_values(action, value)]
    return problems


def _bad_values(action: argparse.Action, value: str) -> list[tuple[str, str]]:
    if _PLACEHOLDER.search(value) or "/" in value or _FILE_NAME.search(value):
        return []  # a placeholder or a file the reader makes: the run part checks those
    bad = []
    for alternative in value.split("|") if "|" in value else [value]:
        if action.choices is not None:
            if alternative not in action.choices:
                bad.append((alternative, f"not one of {', '.join(map(str, action.choices))}"))
            continue
        convert = action.type
        if convert is None or any(part in getattr(convert, "__name__", "") for part in ("path", "file", "dir", "input")):
            continue
        try:
            convert(alternative)
        except (argparse.ArgumentTypeError, ValueError, TypeError) as err:
            bad.append((alternative, str(err) or "refused"))
    return bad


@lru_cache(maxsize=None)
def script_flags(path: str) -> frozenset[str] | None:
    """Every `--flag` a repository script declares (its own source and the sibling modules it imports), or None
    when the script does not exist."""
    file = REPO_ROOT / path
    if not file.is_file():
        return None
    source = file.read_text(encoding="utf-8")
    for module in re.findall(r"^\s*(?:from|import)\s+(\w+)", source, flags=re.M):
        sibling = file.with_name(module + ".py")
        if sibling.is_file() and sibling != file:
            source += sibling.read_text(encoding="utf-8")
    return frozenset(re.findall(r"[\"'](--[a-z0-9][a-z0-9-]*)[\"'=]", source))


@lru_cache(maxsize=1)
def torchrun_flags() -> frozenset[str]:
    """The flags of PyTorch's `torchrun`, from its own parser."""
    from torch.distributed.run import get_args_parser
    return frozenset(get_args_parser()._option_string_actions)


_TORCHRUN = re.compile(r"(?<![\w./-])torchrun\s+(?P<rest>.*?)(?:\s-m\s|$)", re.M)


def torchrun_problems(text: str) -> list[str]:
    """`torchrun --flag`s (before its `-m bertforge ...`) that torchrun does not know."""
    text = re.sub(r"\\\n", " ", text)
    return [f"`torchrun {word}`: no such torchrun flag" for match in _TORCHRUN.finditer(text)
            for word in match.group("rest").split()
            if word.startswith("--") and word.partition("=")[0] not in torchrun_flags()]


def known_flags() -> set[str]:
    """Every flag of every verb, of `torchrun`, and of every script in benchmarks/, experiments/ and tools/."""
    flags: set[str] = set(torchrun_flags())
    for parser in _verb_parsers().values():
        flags |= set(parser._option_string_actions)
        for sub in _subcommands(parser).values():
            flags |= set(sub._option_string_actions)
    for folder in ("benchmarks", "experiments", "tools"):
        for script in sorted((REPO_ROOT / folder).glob("*.py")):
            flags |= script_flags(f"{folder}/{script.name}") or set()
    return flags


def check_script(path: str, words: list[str]) -> list[str]:
    flags = script_flags(path)
    if flags is None:
        return [f"{path}: no such file in the repository"]
    problems = []
    if path.endswith(".sh"):
        source = (REPO_ROOT / path).read_text(encoding="utf-8")  # its steps are words the script names
        return [f"`bash {path} {w}`: the script names no step {w!r}" for w in words
                if not w.startswith("-") and not _PLACEHOLDER.search(w)
                and not re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", source)]
    for word in words:
        flag = word.partition("=")[0]
        if flag.startswith("--") and len(flag) > 2 and flag not in flags:
            problems.append(f"`python {path} {flag}`: the script has no such flag")
    return problems


# ---- files and links ----------------------------------------------------------------------------------------------
_SHARED_PATH = re.compile(r"(?<![\w.-])\.\./shared/[\w./@+-]*[\w/]")
_REPO_PATH = re.compile(r"(?<![\w./$-])(?:benchmarks|experiments|demo|tools|src|tests|docs)/[\w./-]*\w")


def named_paths(text: str) -> list[str]:
    """`../shared/...` and repository paths a text names (not outputs: those are folders it creates)."""
    paths = [m.group(0) for m in _SHARED_PATH.finditer(text)]
    paths += [m.group(0) for m in _REPO_PATH.finditer(text)]
    return [p for p in paths if not _PLACEHOLDER.search(p)]


def missing_path(path: str) -> bool:
    return not (REPO_ROOT / path).exists()


def heading_anchors(path: Path) -> set[str]:
    """The anchors GitHub gives a document's headings."""
    anchors, in_fence = set(), False
    for line in path.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchor = re.sub(r"[^\w\- ]", "", title).replace(" ", "-")
            seen = sum(1 for a in anchors if a == anchor or re.fullmatch(re.escape(anchor) + r"-\d+", a))
            anchors.add(f"{anchor}-{seen}" if seen else anchor)  # GitHub numbers a repeated heading
    return anchors


def broken_link(doc: Path, target: str) -> str | None:
    """Why a relative Markdown link of `doc` leads nowhere, or None."""
    if re.match(r"[a-z]+:", target):
        return None
    file, _, anchor = target.partition("#")
    destination = (doc.parent / file) if file else doc
    if not destination.exists():
        return f"links to {file}, which does not exist"
    if anchor and destination.suffix == ".md" and anchor not in heading_anchors(destination):
        return f"links to #{anchor}, which is no heading of {shown(destination)}"
    return None

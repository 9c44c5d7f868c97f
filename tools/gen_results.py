"""Write the docs' published numbers from the results store (docs/results/*.json, bertforge.results_store).

Run ``python tools/gen_results.py`` after a script writes records; ``--check`` exits 1 and lists every page whose
tables or cited numbers are not what the store gives (tests/docs/test_results_store.py does the same). Two kinds
of generated text, both invisible markers on a rendered page:

    <!-- results: TABLE -->          a table: the region up to <!-- /results --> is rewritten from the
    | ... |                          "tables" entry TABLE of a store file (header + rows; a cell's {ID},
    <!-- /results -->                {ID|bare}, {ID|range}, {ID|full} become the record's value)

    serve reaches <!--r:ID|full-->0.73x (0.59-0.90x)<!--/r--> of the model alone      one cited number

The prose around them is written by hand.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from bertforge.results_store import Store, StoreError, read_store, render

__all__ = ["TABLE", "CITE", "UNIT_NUMBER", "pages", "render_table", "rewrite", "stale", "prose", "unmatched_numbers",
           "citations", "main"]

ROOT = Path(__file__).resolve().parents[1]
TABLE = re.compile(r"^<!-- results: (?P<name>[\w.-]+) -->\n(?P<body>.*?)^<!-- /results -->$", re.M | re.S)
CITE = re.compile(r"<!--r:(?P<spec>[^>]*?)-->(?P<text>.*?)<!--/r-->")
_CELL = re.compile(r"\{([a-z0-9][a-z0-9._/-]*(?:\|[a-z]+)?)\}")
_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
# A published number: value (or range) with a unit after it ("5.17x" attached: "32 x 128" is a shape), or a loss
# named before it.
_UNITS = r"%|s|ms|min|steps|MB/s|MB|GB|MiB|GiB"
UNIT_NUMBER = re.compile(rf"(?<![\w.,])(?:{_NUM}(?:\s?[-–]\s?{_NUM})?(?:[x×](?!\s?\d)|\s?(?:{_UNITS}))(?![\w%])"
                         rf"|(?<=\bloss )(?:of )?{_NUM}(?:\s?[-–]\s?{_NUM})?(?![\w]))")
_FENCE = re.compile(r"^\s*(```|~~~)")


def pages(root: Path = ROOT) -> list[Path]:
    """The pages the generator writes: README.md and every docs/*.md."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def _cell(store: Store, text: str) -> str:
    return _CELL.sub(lambda m: render(store, m.group(1)), str(text))


def render_table(store: Store, name: str) -> str:
    """The markdown table of the store's table spec `name`, one line a row, ending with a newline."""
    spec = store.tables.get(name)
    if spec is None:
        raise StoreError(f"no table {name!r} in the results store")
    header = [str(h) for h in spec["header"]]
    rows = [[_cell(store, cell) for cell in row] for row in spec["rows"]]
    for row in rows:
        if len(row) != len(header):
            raise StoreError(f"table {name!r}: a row has {len(row)} cells, the header {len(header)}: {row}")
    align = spec.get("align") or ["---"] * len(header)
    lines = [header, align, *rows]
    return "".join("| " + " | ".join(line) + " |\n" for line in lines)


def rewrite(text: str, store: Store) -> str:
    """`text` with every results region and cited number rendered from `store` (StoreError if one is unknown)."""
    text = TABLE.sub(lambda m: f"<!-- results: {m.group('name')} -->\n{render_table(store, m.group('name'))}"
                               "<!-- /results -->", text)
    return CITE.sub(lambda m: f"<!--r:{m.group('spec')}-->{render(store, m.group('spec'))}<!--/r-->", text)


def stale(root: Path = ROOT, store: Store | None = None) -> list[str]:
    """One line per page the store would change, naming its first changed line; unknown ids are named too."""
    store = store if store is not None else read_store(root / "docs" / "results")
    problems = []
    for path in pages(root):
        old = path.read_text(encoding="utf-8")
        try:
            new = rewrite(old, store)
        except StoreError as err:
            problems.append(f"{path.relative_to(root)}: {err}")
            continue
        problems += [f"{path.relative_to(root)}:{number}: a line starts with a citation, which the doc tests read as "
                     "a comment: move it after a word" for number, line in enumerate(old.splitlines(), 1)
                     if line.lstrip().startswith("<!--r:")]
        if new != old:
            line = next(i for i, (a, b) in enumerate(zip(old.splitlines() + [""], new.splitlines() + [""]), 1)
                        if a != b)
            problems.append(f"{path.relative_to(root)}:{line}: not what the results store gives "
                            "(python tools/gen_results.py rewrites it)")
    return problems


def prose(text: str) -> list[tuple[int, str]]:
    """(line number, text) of the hand-written prose: no fences, comments, inline code, links' targets,
    generated tables or cited numbers (the generator owns those)."""
    text = TABLE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    text = CITE.sub("", text)
    text = re.sub(r"<!--.*?-->", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    out, fence = [], None
    for number, line in enumerate(text.splitlines(), 1):
        mark = _FENCE.match(line)
        if mark and (fence is None or mark.group(1) == fence):
            fence = mark.group(1) if fence is None else None
            continue
        if fence is None:
            out.append((number, re.sub(r"\]\([^)]*\)", "]", re.sub(r"`[^`]*`", "", line))))
    return out


def _key(text: str) -> str:
    return re.sub(r"\s+", "", text).replace("×", "x").replace("–", "-").removeprefix("of")


def unmatched_numbers(text: str, store: Store, constants: frozenset[str] = frozenset()) -> list[tuple[int, str]]:
    """(line, number) of every number with a unit in `text`'s prose that no record renders and no constant is."""
    known = {_key(c) for c in constants}
    for rid, record in store.records.items():
        styles = ["", "bare"] + (["range", "full"] if record.spread is not None else [])
        known.update(_key(render(store, f"{rid}|{style}" if style else rid)) for style in styles)
    return [(number, match.group(0)) for number, line in prose(text) for match in UNIT_NUMBER.finditer(line)
            if _key(match.group(0)) not in known]


def citations(text: str) -> list[tuple[str, str]]:
    """(spec, shown text) of every number the page cites with `<!--r:SPEC-->`: one spec, one rendering."""
    return [(m.group("spec").strip(), m.group("text")) for m in CITE.finditer(text)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a page is not what the store gives")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose pages and store to use")
    args = parser.parse_args(argv)
    try:
        store = read_store(args.root / "docs" / "results")
        if args.check:
            problems = stale(args.root, store)
            print("\n".join(problems) or "every page is current")
            return 1 if problems else 0
        for path in pages(args.root):
            old = path.read_text(encoding="utf-8")
            new = rewrite(old, store)
            if new != old:
                path.write_text(new, encoding="utf-8")
                print(f"wrote {path.relative_to(args.root)}")
    except StoreError as err:
        print(f"gen_results: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

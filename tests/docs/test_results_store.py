"""Every number the docs publish comes from the results store (docs/results/*.json).

The pages' generated tables and cited numbers are what tools/gen_results.py renders from the records; every
other number with a unit in a page's prose is one some record renders, or one of a few constants; no record is
shown with two values. Planted pages and stores check that each rule can fail.
"""
from __future__ import annotations

import importlib.util
import json
from collections import defaultdict
from functools import lru_cache
from pathlib import Path

import pytest

from bertforge.results_store import Record, Store, StoreError, read_store, render, this_machine, write_records

REPO_ROOT = Path(__file__).resolve().parents[2]

# Numbers with a unit that are settings or facts of the method, not measurements.
CONSTANTS = frozenset({
    "10 %",    # the share of a training file `finetune` holds out (--eval-fraction 0.1)
    "15 %",    # BERT's masking rate (--recipe bert)
    "30 %",    # the fast recipe's masking rate
    "6 %",     # the fast recipe's warm-up share
    "95 %",    # the coverage of the bootstrap intervals the pages give
    "32 MiB", "24 GiB",  # the development machine's L3 cache and memory
    # input sizes the pages' commands are given (`head -c`, `--megabytes`), not measurements
    "2 MB", "4 MB", "10 MB", "20 MB", "50 MB", "500 MB", "2 GB",
})

# Pages whose prose numbers are not yet cited from the store: each is named here until it is converted.
NOT_YET_CONVERTED: frozenset[str] = frozenset()
# Pages generated from the code, not from measurements: their numbers are defaults and preset sizes, which
# tests/tools/test_gen_reference.py and tests/tools/test_gen_cli_doc.py keep equal to the code.
FROM_CODE = frozenset({"docs/CLI.md", "docs/REFERENCE.md"})


@lru_cache(maxsize=1)
def _generator():
    spec = importlib.util.spec_from_file_location("gen_results", REPO_ROOT / "tools" / "gen_results.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _record(rid: str, value: float, unit: str = "x", **extra) -> Record:
    fields = dict(what="a planted measurement", command="python benchmarks/x.py", cpu="test CPU", threads=1,
                  date="2026-12-01", seeds=1, data="none")
    return Record(id=rid, value=value, unit=unit, **{**fields, **extra})


def _checkout(tmp_path: Path, pages: dict[str, str], records: list[Record], tables: dict | None = None) -> Path:
    (tmp_path / "docs" / "results").mkdir(parents=True)
    for name, text in pages.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "README.md").touch()
    write_records("g", records, tmp_path / "docs" / "results", tables=tables)
    return tmp_path


def _two_values(root: Path) -> list[str]:
    shown: dict[str, set[str]] = defaultdict(set)
    for path in _generator().pages(root):
        for spec, text in _generator().citations(path.read_text(encoding="utf-8")):
            shown[spec].add(text)
    return [f"{spec} is shown as {sorted(texts)}" for spec, texts in shown.items() if len(texts) > 1]


# ---- the real docs ----------------------------------------------------------------------------------------------

def test_pages_are_current():
    problems = _generator().stale(REPO_ROOT)
    assert not problems, "\n".join(problems)


def test_every_number_with_a_unit_in_the_docs_comes_from_a_record():
    store = read_store(REPO_ROOT / "docs" / "results")
    problems = []
    for path in _generator().pages(REPO_ROOT):
        name = str(path.relative_to(REPO_ROOT))
        if name in NOT_YET_CONVERTED | FROM_CODE:
            continue
        problems += [f"{name}:{line}: {number!r} matches no record in docs/results and no constant"
                     for line, number in _generator().unmatched_numbers(path.read_text(encoding="utf-8"), store,
                                                                        CONSTANTS)]
    assert not problems, "cite it (<!--r:ID-->...<!--/r-->) or add its record:\n" + "\n".join(problems)


def test_no_record_is_shown_with_two_values():
    problems = _two_values(REPO_ROOT)
    assert not problems, "\n".join(problems)


def test_not_yet_converted_pages_exist():
    """The exemption list names real pages, so a renamed page cannot drop out of the check unnoticed."""
    names = {str(p.relative_to(REPO_ROOT)) for p in _generator().pages(REPO_ROOT)}
    assert NOT_YET_CONVERTED | FROM_CODE <= names


def test_every_store_file_reads():
    store = read_store(REPO_ROOT / "docs" / "results")
    assert store.records, "the results store is empty"
    for rid, record in store.records.items():
        assert render(store, rid)


# ---- planted pages: each rule fails when it should ------------------------------------------------------------

def test_a_number_no_record_gives_is_reported(tmp_path: Path):
    root = _checkout(tmp_path, {}, [_record("g/serve", 0.73, spread=(0.59, 0.9))])
    store = read_store(root / "docs" / "results")
    unmatched = _generator().unmatched_numbers
    assert unmatched("serve reaches 0.73x of the model alone (0.59-0.90x over 3 rounds).", store) == []
    assert unmatched("serve reaches 96 % of the model alone", store) == [(1, "96 %")]
    assert unmatched("a\n\nserve reaches 0.74x", store) == [(3, "0.74x")]
    assert unmatched("serve reaches 96 % of it", store, frozenset({"96 %"})) == []
    assert unmatched("`--max-steps 3 steps` and ```\n```\n", store) == []


def test_a_stale_cited_number_is_reported_and_rewritten(tmp_path: Path):
    page = "serve reaches <!--r:g/serve|full-->0.96x<!--/r--> of the model alone\n"
    root = _checkout(tmp_path, {"README.md": page}, [_record("g/serve", 0.73, spread=(0.59, 0.9))])
    (root / "README.md").write_text(page, encoding="utf-8")
    assert [p.split(":")[0] for p in _generator().stale(root)] == ["README.md"]
    assert _generator().main(["--root", str(root)]) == 0
    assert "<!--r:g/serve|full-->0.73x (0.59-0.90x)<!--/r-->" in (root / "README.md").read_text(encoding="utf-8")
    assert _generator().stale(root) == []
    assert _generator().main(["--root", str(root), "--check"]) == 0


def test_a_generated_table_is_rendered_from_its_spec(tmp_path: Path):
    tables = {"t": {"header": ["clients", "ratio"], "rows": [["32", "{g/serve|bare}"], ["1", "{g/one}"]]}}
    page = "before\n<!-- results: t -->\n| old |\n<!-- /results -->\nafter\n"
    root = _checkout(tmp_path, {}, [_record("g/serve", 0.73), _record("g/one", 93.65, "%", digits=1)], tables)
    (root / "README.md").write_text(page, encoding="utf-8")
    assert _generator().main(["--root", str(root), "--check"]) == 1
    _generator().main(["--root", str(root)])
    assert (root / "README.md").read_text(encoding="utf-8") == (
        "before\n<!-- results: t -->\n| clients | ratio |\n| --- | --- |\n| 32 | 0.73 |\n| 1 | 93.7 % |\n"
        "<!-- /results -->\nafter\n")


def test_two_pages_giving_one_record_two_values_are_reported(tmp_path: Path):
    (tmp_path / "docs").mkdir()
    root = _checkout(tmp_path, {"docs/A.md": "int8 is <!--r:g/int8-->5.17x<!--/r--> faster\n",
                                "docs/B.md": "int8 is <!--r:g/int8-->1.52x<!--/r--> faster\n"},
                     [_record("g/int8", 1.52)])
    assert _two_values(root) == ["g/int8 is shown as ['1.52x', '5.17x']"]
    assert [p.split(":")[0] for p in _generator().stale(root)] == ["docs/A.md"]


def test_an_unknown_record_is_named(tmp_path: Path):
    root = _checkout(tmp_path, {}, [_record("g/a", 1.0)])
    (root / "README.md").write_text("<!--r:g/b-->1x<!--/r-->\n", encoding="utf-8")
    assert _generator().stale(root) == ["README.md: no record 'g/b' in the results store"]


# ---- the store itself ------------------------------------------------------------------------------------------

def test_write_records_merges_by_id(tmp_path: Path):
    write_records("g", [_record("g/a", 1.0), _record("g/b", 2.0)], tmp_path)
    write_records("g", [_record("g/b", 3.0, seeds=3, spread=(2.5, 3.5))], tmp_path)
    store = read_store(tmp_path)
    assert store.records == {"g/a": _record("g/a", 1.0), "g/b": _record("g/b", 3.0, seeds=3, spread=(2.5, 3.5))}


def test_render_follows_the_unit():
    store = Store(records={r.id: r for r in [_record("g/a", 93.65, "%", digits=1), _record("g/b", 4521, "steps", digits=0),
                                              _record("g/c", 5.1749, "loss"),
                                              _record("g/d", 0.73, spread=(0.59, 0.9))]})
    assert [render(store, s) for s in ("g/a", "g/b", "g/c", "g/d|range", "g/d|full", "g/b|bare")] == [
        "93.7 %", "4,521 steps", "5.17", "0.59-0.90x", "0.73x (0.59-0.90x)", "4,521"]
    with pytest.raises(StoreError, match="no spread"):
        render(store, "g/a|range")


@pytest.mark.parametrize("change, named", [
    ({"date": "1 Dec"}, "date must be YYYY-MM-DD"), ({"seeds": 0}, "seeds must be"), ({"value": "fast"}, "value"),
    ({"id": "Nogroup"}, "id 'Nogroup'"), ({"command": ""}, "command is empty"), ({"extra": 1}, "unknown field extra")])
def test_a_malformed_record_names_its_file_and_field(tmp_path: Path, change: dict, named: str):
    raw = {**_record("g/a", 1.0).to_json(), **change}
    (tmp_path / "g.json").write_text(json.dumps({"group": "g", "records": [raw]}), encoding="utf-8")
    with pytest.raises(StoreError, match=named) as err:
        read_store(tmp_path)
    assert "g.json" in str(err.value)


def test_one_id_in_two_files_is_an_error(tmp_path: Path):
    write_records("g", [_record("g/a", 1.0)], tmp_path)
    (tmp_path / "h.json").write_text(json.dumps({"group": "g", "records": [_record("g/a", 2.0).to_json()]}),
                                     encoding="utf-8")
    with pytest.raises(StoreError, match="also in"):
        read_store(tmp_path)


def test_raw_data_files_are_not_records_and_are_never_overwritten(tmp_path: Path):
    raw = json.dumps({"rows": [1, 2]})
    (tmp_path / "raw.json").write_text(raw, encoding="utf-8")
    assert read_store(tmp_path).records == {}
    with pytest.raises(StoreError, match="raw-data file"):
        write_records("raw", [_record("raw/a", 1.0)], tmp_path)
    assert (tmp_path / "raw.json").read_text(encoding="utf-8") == raw


def test_this_machine_names_a_cpu_and_threads(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    cpu, threads = this_machine()
    assert cpu and threads == 3


def test_a_line_starting_with_a_citation_is_reported(tmp_path: Path):
    """The doc tests read a line that starts with `<!--` as a comment: its prose would go unchecked."""
    root = _checkout(tmp_path, {}, [_record("g/a", 1.0)])
    (root / "README.md").write_text("speed\n  <!--r:g/a-->1.00x<!--/r--> of it\n", encoding="utf-8")
    assert _generator().stale(root) == [
        "README.md:2: a line starts with a citation, which the doc tests read as a comment: move it after a word"]


def test_a_script_records_its_own_measurement(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr("sys.argv", ["benchmarks/bench_x.py", "--rounds", "3"])
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    record = Record.measured("g/ratio", 0.73, "x", "served / model alone", "single sentences", seeds=3,
                             spread=(0.59, 0.9))
    write_records("g", [record], tmp_path)
    stored = read_store(tmp_path).records["g/ratio"]
    assert stored == record
    assert (stored.command, stored.threads, stored.cpu) == ("python benchmarks/bench_x.py --rounds 3", 1,
                                                             this_machine()[0])


def test_a_wrong_number_planted_in_the_real_readme_fails():
    """The real README with the real store: a number changed by hand, in prose or in a citation, is caught."""
    store = read_store(REPO_ROOT / "docs" / "results")
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    cited = "<!--r:glue-at-budget/steps-ratio-->3.4x<!--/r-->"
    assert cited in readme and _generator().unmatched_numbers(readme, store, CONSTANTS) == []
    planted = readme.replace(cited, "3.5x", 1)
    assert [number for _, number in _generator().unmatched_numbers(planted, store, CONSTANTS)] == ["3.5x"]
    stale = readme.replace(cited, "<!--r:glue-at-budget/steps-ratio-->3.5x<!--/r-->", 1)
    assert _generator().rewrite(stale, store) == readme


@pytest.mark.parametrize("page", ["docs/RESULTS.md", "docs/BENCHMARKS.md"])
def test_results_pages_stay_product_pages_of_at_most_600_lines(page: str) -> None:
    """A page of claims, a section each, not a notebook that grows with every experiment: what a superseded
    measurement said lives in git, not in the page."""
    lines = (REPO_ROOT / page).read_text(encoding="utf-8").count("\n")
    assert lines <= 600, f"{page} has {lines} lines: keep one section per current claim (at most 600 lines)"

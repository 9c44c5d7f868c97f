"""bertforge's packages import only down the floors of `tools/import_layers.py` and form no circle."""
from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _layers():
    spec = importlib.util.spec_from_file_location("import_layers", REPO / "tools" / "import_layers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_package_imports_only_downward_and_has_no_circle():
    assert _layers().faults(REPO / "src") == []


def test_architecture_draws_the_floors_of_the_checker():
    """docs/ARCHITECTURE.md's layer diagram is the checker's table (regenerate: tools/import_layers.py --diagram)."""
    page = (REPO / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    drawn = page.split("<!-- begin generated: layers -->\n```text\n", 1)[1].split("\n```\n<!-- end generated", 1)[0]
    assert drawn == _layers().diagram(REPO / "src")


def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "bertforge" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_an_upward_import_and_circles_are_found(tmp_path):
    """The checker itself: a planted upward import (even inside a function, even relative), a package circle
    and a module circle inside one package are each reported; an unknown package is named."""
    layers = _layers()
    src = _package(tmp_path / "bad", {
        "__init__.py": "",
        "model/__init__.py": "",
        "model/bert.py": "def f():\n    from ..tasks import finetune\n",
        "tasks/__init__.py": "",
        "tasks/finetune.py": "from bertforge.tasks.predictor import X\nfrom bertforge.model import bert\n",
        "tasks/predictor.py": "from bertforge.tasks.finetune import Y\n",
    })
    found = layers.faults(src)
    assert found == [
        "upward import model -> tasks: bertforge.model.bert imports bertforge.tasks.finetune",
        "package circle: model <-> tasks",
        "module circle: bertforge.tasks.finetune <-> bertforge.tasks.predictor",
    ]
    good = _package(tmp_path / "good", {"__init__.py": "", "model/__init__.py": "", "model/bert.py": "",
                                        "tasks/__init__.py": "", "tasks/finetune.py": "from bertforge.model import bert\n"})
    assert layers.faults(good) == []
    assert layers.faults(_package(tmp_path / "new", {"__init__.py": "", "newfloor/__init__.py": ""})) == [
        "package 'newfloor' is on no floor of LAYERS"]

"""Each file of a folder format is named in the code of its owner module only: every other module calls the
owner's reader, writer or constant (docs/ARCHITECTURE.md, "Folder formats")."""
from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "bertforge"

# file name -> the modules that may spell it. `outputs.py` names what a folder holds in a refusal message (it sits
# below every owner); a Pooling module's own `config.json` sits in the sentence-transformers folder.
OWNERS = {
    "config.json": {"config.py", "outputs.py", "tasks/embedding/st_folder.py"},
    "model.safetensors": {"checkpoint.py"},
    "task.json": {"tasks/predictor.py", "outputs.py"},
    "modules.json": {"tasks/embedding/st_folder.py"},
    "1_Pooling": {"tasks/embedding/st_folder.py"},
    "2_Normalize": {"tasks/embedding/st_folder.py"},
    "sentence_bert_config.json": {"tasks/embedding/st_folder.py"},
    "config_sentence_transformers.json": {"tasks/embedding/st_folder.py"},
    "run_config.json": {"outputs.py"},
    "metrics.jsonl": {"training/metrics_log.py"},
    "curves.png": {"training/metrics_log.py"},
    "training_summary.json": {"training/run_output.py", "training/summary.py"},  # its name, its type
    "metrics.json": {"training/run_output.py", "outputs.py"},
    "training_state.json": {"training/checkpointing.py"},
    "lr_find.json": {"tasks/lr_find.py"},
    "glue.json": {"evaluation/glue_result.py"},
    "classification_report.json": {"tasks/metrics/report.py"},
    "tokenizer_config.json": {"tokenization/base.py"},
    "special_tokens_map.json": {"tokenization/base.py"},
}


def named_files(path: Path) -> set[str]:
    """The format file names a module spells as string constants in its code (docstrings left out)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and node.value in OWNERS
            and id(node) not in docstrings}


def strays(src: Path) -> list[str]:
    return sorted(f"{path.relative_to(src).as_posix()} names {name}" for path in src.rglob("*.py")
                  for name in named_files(path) if path.relative_to(src).as_posix() not in OWNERS[name])


def test_each_folder_file_is_named_by_its_owner_only():
    assert strays(SRC) == []


def test_the_scripts_read_folder_files_through_their_owners():
    """`benchmarks/` and `experiments/` own no folder format: they call the library's readers and constants."""
    repo = SRC.parents[1]
    assert sorted(f"{path.relative_to(repo).as_posix()} names {name}" for folder in ("benchmarks", "experiments")
                  for path in (repo / folder).rglob("*.py") for name in named_files(path)) == []


def test_a_stray_reading_is_found(tmp_path):
    """The check itself: a module that reads modules.json by name is reported; a docstring that mentions it and
    the owner that reads it are not."""
    (tmp_path / "serving").mkdir()
    (tmp_path / "serving" / "served_model.py").write_text(
        '"""Reads modules.json."""\nimport json\n\n\ndef kind(folder):\n'
        '    return json.loads((folder / "modules.json").read_text())\n', encoding="utf-8")
    (tmp_path / "tasks" / "embedding").mkdir(parents=True)
    (tmp_path / "tasks" / "embedding" / "st_folder.py").write_text('MODULES_FILE = "modules.json"\n', encoding="utf-8")
    assert strays(tmp_path) == ["serving/served_model.py names modules.json"]

"""The library's errors name settings (`settings.SettingError`), which the command line shows as its verb's flags;
an error message in the library spells a `--flag` only where no setting stands behind it (tests/commands/
test_errors.py checks the rendering)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "bertforge"
FLAG = re.compile(r"--[a-z][a-z0-9-]*")

# module -> the flags its errors may spell, and why
SPELLED = {
    # HTTP answers: the client cannot pass a flag; they name the field it sent and the server's limit by the
    # `bertforge serve` flag that sets it, which is what the client asks its operator to raise
    "serving/body.py": {"--payload-limit", "--body-timeout"},
    "serving/middleware.py": {"--payload-limit"},
    "serving/requests.py": {"--max-input-chars", "--max-client-batch-size"},
    "serving/handlers.py": {"--auto-truncate"},
    # a command line to run next (another verb's flags)
    "generation/loading.py": {"--init-from", "--objective"},
    "data/prepare.py": {"--data"},  # a prepared corpus given back to prepare: `bertforge pretrain --data` reads it
    "serving/onnx_backend.py": {"--format"},
    # OSError subclasses (FileNotFoundError), which a SettingError (a ValueError) cannot be
    "serving/served_model.py": {"--model"},
    "serving/int8_price.py": {"--calibrate-on"},
    "tasks/task_data.py": {"--data", "--no-regression", "--task"},  # --no-regression: the negative of a setting
    # a data file's error says what the file should hold, with the flag that reads another column
    "tasks/readers/generic.py": {"--label-column"},
    "tasks/readers/glue.py": {"--task"},
}
ERRORS = ("Error", "Exception", "Exit", "Costly")


def spelled_flags(src: Path) -> dict[str, set[str]]:
    """module -> the --flags spelled in the strings of its raise statements and error constructors."""
    found: dict[str, set[str]] = {}
    for path in sorted(src.rglob("*.py")):
        module = path.relative_to(src).as_posix()
        if module.startswith("commands/") or module in ("cli.py", "__main__.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name = getattr(node.func, "id", getattr(node.func, "attr", "")) if isinstance(node, ast.Call) else ""
            if isinstance(node, ast.Raise) or name.endswith(ERRORS):
                for part in ast.walk(node):
                    if isinstance(part, ast.Constant) and isinstance(part.value, str):
                        found.setdefault(module, set()).update(FLAG.findall(part.value))
    return {module: flags for module, flags in found.items() if flags}


def test_library_errors_spell_flags_only_where_no_setting_stands_behind_them():
    extra = {module: sorted(flags - SPELLED.get(module, set())) for module, flags in spelled_flags(SRC).items()}
    assert {module: flags for module, flags in extra.items() if flags} == {}


def test_a_spelled_flag_is_found(tmp_path):
    (tmp_path / "outputs.py").write_text('def claim(path):\n    raise ValueError(f"{path}: use --overwrite")\n',
                                         encoding="utf-8")
    (tmp_path / "settings.py").write_text('class E(ValueError):\n    pass\n\n\nE("{overwrite} is off")\n',
                                          encoding="utf-8")
    assert spelled_flags(tmp_path) == {"outputs.py": {"--overwrite"}}

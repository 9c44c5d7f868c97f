"""No function in src/ is longer than 80 lines (the house style: small named functions)."""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LIMIT = 80


def long_functions(root: Path, limit: int = LIMIT) -> list[str]:
    """`path:line name (N lines)` for every function or method under `root` longer than `limit` lines, from its
    `def` line to its last line (nested functions count on their own and within the function around them)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > limit:
                    found.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_function_in_src_is_over_80_lines():
    assert long_functions(REPO / "src") == []


def test_a_long_function_or_method_is_found(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(LIMIT - 1))
    (tmp_path / "ok.py").write_text("def fits():\n" + body, encoding="utf-8")  # exactly LIMIT lines
    (tmp_path / "long.py").write_text("class C:\n    async def too_long(self):\n" + body.replace("    ", "        ")
                                      + "        return 1\n", encoding="utf-8")
    assert long_functions(tmp_path) == [f"long.py:2 too_long ({LIMIT + 1} lines)"]

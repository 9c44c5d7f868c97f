"""Check that bertforge's packages import only downward and form no circle.

Reads every module under src/bertforge with `ast` (imports inside functions count too), folds the module
imports into edges between packages (`bertforge.tasks.finetune` belongs to `tasks`, a top-level module such as
`bertforge/device.py` is its own package) and reports two kinds of fault: an edge that runs up the layer order
below, and a circle between packages or between the modules of one package. Exit status 1 if any is found.

    python tools/import_layers.py            # the faults, one a line
    python tools/import_layers.py --edges    # every package edge, with the imports behind it
    python tools/import_layers.py --diagram  # the floors as docs/ARCHITECTURE.md draws them
"""
from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = "bertforge"

# The floors, top to bottom: a package may import its own floor's modules only if they form no circle, and the
# floors below it freely. Written once; a new package is added to the floor it belongs to.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("__main__", "cli", "commands"),
    ("bertforge",),  # the package's own __init__: the public API, re-exporting from every floor below
    ("evaluation", "serving", "generation", "ablation", "measuring"),
    ("tasks", "distillation"),
    ("pretraining", "seq2seq"),
    ("training",),
    ("data",),
    ("model",),
    ("tokenization",),
    ("checkpoint", "config"),
    ("atomic", "outputs", "settings", "device", "textio", "folder_files", "allocator", "version",
     "lifeline", "results_store"),
)


def module_name(path: Path, src: Path) -> str:
    """`src/bertforge/tasks/finetune.py` -> `bertforge.tasks.finetune` (a package's `__init__` is the package)."""
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path, module: str, known: set[str]) -> set[str]:
    """The bertforge modules `module` imports, wherever in the file the import statement sits."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:  # `from bertforge import folder_files` imports a module, not a name
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return {name for name in found if name == ROOT or name.startswith(ROOT + ".")}


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ROOT


def module_graph(src: Path) -> dict[str, set[str]]:
    files = {module_name(path, src): path for path in sorted((src / ROOT).rglob("*.py"))}
    known = set(files)
    return {module: {name for name in imported_modules(path, module, known) if name != module}
            for module, path in files.items()}


def package_edges(graph: dict[str, set[str]]) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """(importer package, imported package) -> the module imports behind that edge."""
    edges: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    for module, imports in graph.items():
        for name in sorted(imports):
            if package_of(module) != package_of(name):
                edges[package_of(module), package_of(name)].append((module, name))
    return dict(edges)


def floor_of(package: str) -> int:
    for index, floor in enumerate(LAYERS):
        if package in floor:
            return index
    raise KeyError(package)


def circles(nodes: set[str], edges: set[tuple[str, str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan), each sorted."""
    successors: dict[str, list[str]] = defaultdict(list)
    for a, b in sorted(edges):
        successors[a].append(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in successors[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(nodes):
        if node not in index:
            visit(node)
    return sorted(found)


def faults(src: Path) -> list[str]:
    """One line per fault: a package missing from LAYERS, an upward edge, a circle of packages or of modules."""
    graph = module_graph(src)
    edges = package_edges(graph)
    packages = {package_of(module) for module in graph}
    found = [f"package {name!r} is on no floor of LAYERS" for name in sorted(packages)
             if not any(name in floor for floor in LAYERS)]
    if found:
        return found
    for (low, high), imports in sorted(edges.items()):
        if floor_of(high) < floor_of(low):
            found.append(f"upward import {low} -> {high}: " + ", ".join(f"{a} imports {b}" for a, b in imports))
    for component in circles(packages, set(edges)):
        found.append("package circle: " + " <-> ".join(component))
    module_edges = {(a, b) for a, names in graph.items() for b in names if package_of(a) == package_of(b)}
    for component in circles(set(graph), module_edges):
        found.append("module circle: " + " <-> ".join(component))
    return found


def diagram(src: Path) -> str:
    """The floors that hold packages, top to bottom, as docs/ARCHITECTURE.md shows them (a test keeps it equal)."""
    packages = {package_of(module) for module in module_graph(src)}
    floors = [" · ".join(name for name in floor if name in packages) for floor in LAYERS]
    floors = [floor for floor in floors if floor]
    return "\n      ▼\n".join(f"  {floor}" for floor in floors)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", type=Path, default=Path(__file__).resolve().parents[1] / "src",
                        help="the folder that holds the bertforge package")
    parser.add_argument("--edges", action="store_true", help="print every package edge and the imports behind it")
    parser.add_argument("--diagram", action="store_true", help="print the floors as docs/ARCHITECTURE.md draws them")
    args = parser.parse_args(argv)
    if args.diagram:
        print(diagram(args.src))
        return 0
    if args.edges:
        for (low, high), imports in sorted(package_edges(module_graph(args.src)).items()):
            print(f"{low} -> {high}: " + ", ".join(f"{a} imports {b}" for a, b in imports))
    found = faults(args.src)
    for line in found:
        print(line)
    print(f"{len(found)} fault(s)", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

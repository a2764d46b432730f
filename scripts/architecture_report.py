"""Architecture figures of ``src/agent_core`` (issue 15): import cycles, room sizes, largest file, ``Any`` use.

    python scripts/architecture_report.py [--strict] [--type-checking]

- **Import cycles** are counted between files over the imports that run: module-level imports and
  imports inside functions alike; those under ``if TYPE_CHECKING:`` only with ``--type-checking``
  (they never execute, but they are a dependency all the same). A cycle is a strongly connected
  component of more than one file.
- A **room** is a top-level subpackage (``agent_core/<room>/``) or top-level module; its share is its
  lines over all lines of the package.
- ``Any`` counts the name ``Any`` used in annotations and expressions of ``loop/`` and ``runtime/``.

``--strict`` exits 1 when any file-level cycle exists; ``tests/unit/test_import_cycles.py`` runs the same
check (with TYPE_CHECKING imports) in the test suite.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "agent_core"


def module_name(path: Path, src: Path = ROOT) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(
    tree: ast.Module, module: str, is_package: bool, known: set[str], type_checking: bool
) -> set[str]:
    """Modules of the package that ``tree`` imports (TYPE_CHECKING blocks only with ``type_checking``)."""
    found: set[str] = set()
    base = module if is_package else module.rpartition(".")[0]

    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test) and not type_checking:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PACKAGE and (target := resolve(alias.name)):
                    found.add(target)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base
                for _ in range(node.level - 1):
                    anchor = anchor.rpartition(".")[0]
                source = f"{anchor}.{node.module}" if node.module else anchor
            else:
                source = node.module or ""
            if source.split(".")[0] == PACKAGE:
                for alias in node.names:
                    target = resolve(f"{source}.{alias.name}") or resolve(source)
                    if target:
                        found.add(target)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    found.discard(module)
    return found


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; components of size > 1 only."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    result: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    item = stack.pop()
                    on_stack.discard(item)
                    component.append(item)
                    if item == node:
                        break
                if len(component) > 1:
                    result.append(sorted(component))
    return result


def _count_any(tree: ast.Module) -> int:
    return sum(1 for node in ast.walk(tree) if isinstance(node, ast.Name) and node.id == "Any")


def report(type_checking: bool = False, src: Path = ROOT) -> dict[str, object]:
    """The figures of ``<src>/agent_core`` (``src`` defaults to this repository's ``src/``)."""
    files = sorted((src / PACKAGE).rglob("*.py"))
    trees = {path: ast.parse(path.read_text(encoding="utf-8")) for path in files}
    names = {path: module_name(path, src) for path in files}
    known = set(names.values())
    graph = {
        names[path]: _imports(tree, names[path], path.name == "__init__.py", known, type_checking)
        for path, tree in trees.items()
    }
    lines = {path: len(path.read_text(encoding="utf-8").splitlines()) for path in files}
    rooms: dict[str, int] = defaultdict(int)
    for path, count in lines.items():
        rel = path.relative_to(src / PACKAGE).parts
        rooms[rel[0].removesuffix(".py") if len(rel) > 1 or rel[0] != "__init__.py" else "__init__"] += count
    total = sum(lines.values())
    largest_room = max(rooms.items(), key=lambda item: item[1])
    largest_file = max(lines.items(), key=lambda item: item[1])
    any_count = {
        room: sum(
            _count_any(tree)
            for path, tree in trees.items()
            if path.relative_to(src / PACKAGE).parts[0].lstrip("_") == room and len(path.parts) > 1
        )
        for room in ("loop", "runtime")
    }
    cycles = strongly_connected(graph)
    return {
        "files": len(files),
        "lines": total,
        "cycles": cycles,
        "files_in_cycles": sum(len(c) for c in cycles),
        "largest_room": (largest_room[0], largest_room[1], round(100 * largest_room[1] / total, 1)),
        "largest_file": (str(largest_file[0].relative_to(src)), largest_file[1]),
        "any": any_count,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strict", action="store_true", help="exit 1 when a file-level import cycle exists")
    parser.add_argument(
        "--type-checking", action="store_true", help="also count imports under `if TYPE_CHECKING:`"
    )
    args = parser.parse_args(argv)
    figures = report(args.type_checking)
    cycles = figures["cycles"]
    assert isinstance(cycles, list)
    print(f"files: {figures['files']}, lines: {figures['lines']}")
    print(f"file-level import cycles: {len(cycles)} ({figures['files_in_cycles']} files)")
    for cycle in cycles:
        print("  cycle: " + " <-> ".join(cycle))
    room, room_lines, share = figures["largest_room"]  # type: ignore[misc]
    print(f"largest room: {room} ({room_lines} lines, {share}% of the package)")
    path, file_lines = figures["largest_file"]  # type: ignore[misc]
    print(f"largest file: {path} ({file_lines} lines)")
    print(f"Any in loop/ and runtime/: {figures['any']}")
    return 1 if args.strict and cycles else 0


if __name__ == "__main__":
    sys.exit(main())

"""Architecture figures of ``src/agent_core`` (issue 15): import cycles, room sizes, largest file, ``Any`` use.

    python scripts/architecture_report.py [--strict] [--type-checking]

- **Import cycles** are counted between files over the imports that run: module-level imports and
  imports inside functions alike; those under ``if TYPE_CHECKING:`` only with ``--type-checking``
  (they never execute, but they are a dependency all the same). A cycle is a strongly connected
  component of more than one file.
- A **room** is a top-level subpackage (``agent_core/<room>/``) or top-level module; its share is its
  lines over all lines of the package.
- ``Any`` counts the name ``Any`` used in annotations and expressions of ``loop/`` and ``runtime/``.
- **Runtime internals outside ``_api/``** (issue 35): accesses of a private attribute of ``AgentRuntime`` or
  ``RunHandle`` (``runtime._manager``, ``._config``, ``._open()`` ...) on anything but ``self``, outside
  ``_api/``; the surfaces (``server/``, ``cli/``, ``adapters/``, ``engine/``) reading any private attribute
  of another object (a detector's ``._last`` ...); ``server/``, ``cli/`` and ``adapters/`` (the editor and
  MCP-client protocol servers) importing a private module of another room (they are clients of the public
  API; ``engine/`` is a runtime backend, counted apart).

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


SURFACES = ("server", "cli", "adapters", "engine")
CLIENTS = ("server", "cli", "adapters")
"""The surfaces that use only the public API (``engine/`` executes the loop's steps: a runtime backend)."""


def _runtime_private_names(src: Path) -> set[str]:
    """Private attributes and methods of ``AgentRuntime`` and ``RunHandle`` (from ``_api/``'s source)."""
    names: set[str] = set()
    for module in ("runtime.py", "handles.py"):
        path = src / PACKAGE / "_api" / module
        if not path.is_file():
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _private(node.name):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and _is_self(node.value) and _private(node.attr):
                names.add(node.attr)
    return names


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _is_self(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in ("self", "cls")
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


PUBLIC_UNDERSCORED = frozenset({"os._exit", "sys._getframe"})
"""Documented stdlib functions whose names start with ``_``."""


def _private_accesses(tree: ast.Module) -> list[tuple[int, str, str]]:
    """``(line, attribute, expression)`` of every private attribute read on something other than self."""
    return [
        (node.lineno, node.attr, ast.unparse(node))
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and _private(node.attr)
        and not _is_self(node.value)
        and ast.unparse(node) not in PUBLIC_UNDERSCORED
    ]


def _private_imports(tree: ast.Module, room: str) -> list[tuple[int, str]]:
    """Modules of another room with a private segment (``agent_core._x``, ``agent_core.y._z``)."""
    found = []
    for node in ast.walk(tree):
        modules = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [node.module]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        for module in modules:
            parts = module.split(".")
            if parts[0] != PACKAGE or (len(parts) > 1 and parts[1] == room):
                continue
            if any(_private(part) for part in parts[1:]):
                found.append((node.lineno, module))
    return found


def boundary(trees: dict[Path, ast.Module], src: Path) -> dict[str, list[str]]:
    """Where the surfaces and rooms reach past the public API (see the module docstring)."""
    runtime_names = _runtime_private_names(src)
    out: dict[str, list[str]] = {
        "runtime_private": [],
        "surface_private": [],
        "client_imports": [],
        "engine_imports": [],
    }
    for path, tree in trees.items():
        rel = path.relative_to(src / PACKAGE)
        room = rel.parts[0].removesuffix(".py")
        if room == "_api":
            continue
        for line, attr, expr in _private_accesses(tree):
            if attr in runtime_names:
                out["runtime_private"].append(f"{rel}:{line} {expr}")
            if room in SURFACES:
                out["surface_private"].append(f"{rel}:{line} {expr}")
        if room in SURFACES:
            key = "client_imports" if room in CLIENTS else "engine_imports"
            out[key].extend(f"{rel}:{line} {module}" for line, module in _private_imports(tree, room))
    return out


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
    reach = boundary(trees, src)
    return {
        "files": len(files),
        "lines": total,
        "cycles": cycles,
        "files_in_cycles": sum(len(c) for c in cycles),
        "largest_room": (largest_room[0], largest_room[1], round(100 * largest_room[1] / total, 1)),
        "largest_file": (str(largest_file[0].relative_to(src)), largest_file[1]),
        "any": any_count,
        **reach,
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
    for key, label in (
        ("runtime_private", "AgentRuntime/RunHandle private attributes read outside _api/"),
        ("surface_private", "private attributes of other objects read in server/, cli/, adapters/, engine/"),
        ("client_imports", "private modules of other rooms imported by server/, cli/ and adapters/"),
        ("engine_imports", "private modules of other rooms imported by engine/ (a runtime backend)"),
    ):
        sites = figures[key]
        assert isinstance(sites, list)
        print(f"{label}: {len(sites)}")
        for site in sites if key != "engine_imports" else ():
            print(f"  {site}")
    return 1 if args.strict and cycles else 0


if __name__ == "__main__":
    sys.exit(main())

"""Architecture figures of ``src/agent_core`` (issue 15): import cycles, room sizes, largest file, ``Any`` use.

    python scripts/architecture_report.py [--strict] [--type-checking] [--verbose] [--src DIR]

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
- **Host state** (issue 35, a library leaves its host alone): *process-wide patches* are sites that change
  state the whole process shares: ``sys.modules`` entries, the cyclic collector (``gc.freeze``/``disable``/
  ``set_threshold``...), attributes of other packages' modules, ``os.environ``, the interpreter's hooks and
  limits, and signal handlers and logging/warnings configuration outside the modules that own their
  process (:data:`PROCESS_OWNERS`). *Private accesses of dependencies* are ``_name`` attributes reached
  from another package's module (``httpx._main``, ``os.environ._data``), ``from pkg._private import``,
  pydantic's ``__pydantic_*__`` internals, ``getattr``/``hasattr``/``setattr`` of a ``_name`` on an object
  other than ``self``/``cls``, and the attributes of :data:`KNOWN_PRIVATES` on an object other than
  ``self``/``cls`` (httpx's pool, aiosqlite's connection).
- **Record kinds**: the ways a record class is declared (stdlib ``dataclass``, pydantic models, and the
  package's own lazy dataclass decorators); each kind with its number of classes.
- **Unowned tasks**: ``asyncio.create_task``/``asyncio.ensure_future`` calls and ``create_task`` on an
  event loop, outside :data:`TASK_OWNER_MODULE` (the task owners every other module spawns through).

``--strict`` exits 1 when any file-level cycle exists; ``tests/unit/test_import_cycles.py`` runs the same
check (with TYPE_CHECKING imports) in the test suite.
"""

from __future__ import annotations

import argparse
import ast
import functools
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "agent_core"


def module_name(path: Path, src: Path = ROOT) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@dataclass(frozen=True, slots=True, eq=False)
class SourceFile:
    """One ``*.py`` of the package, read, parsed and walked once per process (every check shares it)."""

    path: Path
    rel: str
    """The path relative to ``src`` (``agent_core/cli/_run.py``)."""
    text: str
    tree: ast.Module
    nodes: tuple[ast.AST, ...]
    """Every node of ``tree``, in ``ast.walk`` order."""


@functools.cache
def _parsed(path: Path, rel: str, mtime_ns: int, size: int) -> SourceFile:
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    return SourceFile(path, rel, text, tree, tuple(ast.walk(tree)))


def source_files(src: Path = ROOT) -> tuple[SourceFile, ...]:
    """Every ``*.py`` under ``<src>/agent_core``, sorted by path; a file is parsed again only when its
    modification time or size changed, so the checks of one test process share one parse of the tree."""
    found = []
    for path in sorted((src / PACKAGE).rglob("*.py")):
        stat = path.stat()
        found.append(_parsed(path, path.relative_to(src).as_posix(), stat.st_mtime_ns, stat.st_size))
    return tuple(found)


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
    for source in source_files(src):
        if source.rel not in (f"{PACKAGE}/_api/runtime.py", f"{PACKAGE}/_api/handles.py"):
            continue
        for node in source.nodes:
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


def _private_accesses(nodes: tuple[ast.AST, ...]) -> list[tuple[int, str, str]]:
    """``(line, attribute, expression)`` of every private attribute read on something other than self."""
    found = []
    for node in nodes:
        if isinstance(node, ast.Attribute) and _private(node.attr) and not _is_self(node.value):
            expression = ast.unparse(node)
            if expression not in PUBLIC_UNDERSCORED:
                found.append((node.lineno, node.attr, expression))
    return found


def _private_imports(nodes: tuple[ast.AST, ...], room: str) -> list[tuple[int, str]]:
    """Modules of another room with a private segment (``agent_core._x``, ``agent_core.y._z``)."""
    found = []
    for node in nodes:
        modules = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [node.module]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        for module in modules:
            parts = module.split(".")
            if parts[0] != PACKAGE or (len(parts) > 1 and parts[1] == room) or module in SHARED_UTILITIES:
                continue
            if any(_private(part) for part in parts[1:]):
                found.append((node.lineno, module))
    return found


SHARED_UTILITIES = frozenset({f"{PACKAGE}._concurrency"})
"""Private modules every room may import, surfaces included: they hold no runtime state and reach nothing
of the runtime (``_concurrency``: the task owners every module spawns its tasks through, so that no task
of a surface is left without an owner either)."""


def boundary(src: Path = ROOT) -> dict[str, list[str]]:
    """Where the surfaces and rooms reach past the public API (see the module docstring)."""
    runtime_names = _runtime_private_names(src)
    out: dict[str, list[str]] = {
        "runtime_private": [],
        "surface_private": [],
        "client_imports": [],
        "engine_imports": [],
    }
    for source in source_files(src):
        rel = source.path.relative_to(src / PACKAGE)
        room = rel.parts[0].removesuffix(".py")
        if room == "_api":
            continue
        for line, attr, expr in _private_accesses(source.nodes):
            if attr in runtime_names:
                out["runtime_private"].append(f"{rel}:{line} {expr}")
            if room in SURFACES:
                out["surface_private"].append(f"{rel}:{line} {expr}")
        if room in SURFACES:
            key = "client_imports" if room in CLIENTS else "engine_imports"
            out[key].extend(f"{rel}:{line} {module}" for line, module in _private_imports(source.nodes, room))
    return out


def _count_any(nodes: tuple[ast.AST, ...]) -> int:
    return sum(1 for node in nodes if isinstance(node, ast.Name) and node.id == "Any")


# -- host state, record kinds, unowned tasks (issue 35) ------------------------------------------------

PROCESS_OWNERS = ("agent_core/cli/", "agent_core/tools/_reaper_main.py")
"""Modules that own their process (the CLI's commands; the launcher run as a script): they may install
signal handlers and configure logging and warnings. ``sys.modules`` and the collector are nobody's."""
TASK_OWNER_MODULE = "agent_core/_concurrency.py"
"""The one module that calls ``asyncio.create_task``: its owners await or cancel every task they create."""
KNOWN_PRIVATES = frozenset(
    {"_conn", "_execute", "_tx", "_pool", "_transport", "_mounts", "_network_backend", "_data", "_main"}
)
"""Private attributes of dependency objects the code once used (on anything but ``self``/``cls``)."""
OTHER_ROOMS = (f"{PACKAGE}/_events/",)
"""Rooms whose record declarations belong to other work of issue 35 (the typed event payloads, which move
to ``agent_core.types.events`` as slotted stdlib dataclasses)."""
PUBLIC_UNDERSCORED = frozenset({"os._exit", "sys._getframe"})
"""Documented functions whose names start with an underscore."""
PYDANTIC_INTERNALS = ("__pydantic_",)
_GC_CHANGERS = frozenset({"freeze", "unfreeze", "disable", "enable", "set_threshold", "set_debug"})
_MUTATORS = frozenset({"setdefault", "pop", "update", "clear", "popitem", "__setitem__", "__delitem__"})
_INTERPRETER = {
    "sys": frozenset(
        {
            "setrecursionlimit",
            "setswitchinterval",
            "set_int_max_str_digits",
            "settrace",
            "setprofile",
            "set_asyncgen_hooks",
            "setdlopenflags",
        }
    ),
    "asyncio": frozenset({"set_event_loop_policy"}),
    "os": frozenset({"putenv", "unsetenv"}),
    "threading": frozenset({"settrace", "setprofile"}),
}
_OWNER_ONLY = {
    "signal": frozenset({"signal", "siginterrupt", "set_wakeup_fd"}),
    "logging": frozenset({"basicConfig", "disable", "setLoggerClass", "captureWarnings"}),
    "warnings": frozenset({"filterwarnings", "simplefilter", "resetwarnings"}),
}


def _dotted(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _foreign_modules(nodes: tuple[ast.AST, ...]) -> dict[str, str]:
    """Local names bound to modules (or names) of other packages and of the standard library."""
    bound: dict[str, str] = {}
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != PACKAGE:
                    bound[alias.asname or alias.name.split(".")[0]] = (
                        alias.name if alias.asname else alias.name.split(".")[0]
                    )
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and node.module
            and node.module.split(".")[0] != PACKAGE
        ):
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return bound


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _own(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id in ("self", "cls")


def host_state(src: Path = ROOT) -> dict[str, list[str]]:
    """``{"patches": [...], "privates": [...]}``: one ``path:line: what`` per site (module docstring)."""
    patches: list[str] = []
    privates: list[str] = []
    for module_file in source_files(src):
        rel = module_file.rel
        foreign = _foreign_modules(module_file.nodes)
        owner = rel.startswith(PROCESS_OWNERS)
        module_handles: set[str] = set()  # names assigned from sys.modules / importlib.import_module
        for node in module_file.nodes:
            if isinstance(node, ast.Assign) and isinstance(node.value, (ast.Call, ast.Subscript)):
                source = node.value.func if isinstance(node.value, ast.Call) else node.value.value
                if _dotted(source) in ("sys.modules.get", "sys.modules", "importlib.import_module"):
                    module_handles.update(t.id for t in node.targets if isinstance(t, ast.Name))

        def where(node: ast.AST, what: str, rel: str = rel) -> str:
            return f"{rel}:{getattr(node, 'lineno', 0)}: {what}"

        for node in module_file.nodes:
            # writes: sys.modules[...] / os.environ[...] / attributes of foreign modules
            targets: list[ast.AST] = []
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = list(node.targets) if isinstance(node, ast.Assign) else [node.target]
            elif isinstance(node, ast.Delete):
                targets = list(node.targets)
            for target in targets:
                if isinstance(target, ast.Subscript) and _dotted(target.value) in (
                    "sys.modules",
                    "os.environ",
                ):
                    patches.append(where(node, f"{_dotted(target.value)}[...] written"))
                elif isinstance(target, ast.Attribute):
                    root = _dotted(target)
                    head = root.split(".")[0] if root else None
                    if head in module_handles or (head in foreign and head not in ("self", "cls")):
                        patches.append(where(node, f"{root} assigned (another package's module)"))
                    if _is_private(target.attr) and not _own(target.value) and target.attr in KNOWN_PRIVATES:
                        privates.append(where(node, f".{target.attr} written"))
            if isinstance(node, ast.Call):
                name = _dotted(node.func)
                if (
                    isinstance(node.func, ast.Attribute)
                    and node.func.attr == "add_signal_handler"
                    and not owner
                ):
                    patches.append(where(node, "add_signal_handler()"))
                if name:
                    head, _, last = name.rpartition(".")
                    if (
                        (head in ("sys.modules", "os.environ") and last in _MUTATORS)
                        or (head == "gc" and last in _GC_CHANGERS)
                        or (head in _INTERPRETER and last in _INTERPRETER[head])
                        or (head in _OWNER_ONLY and last in _OWNER_ONLY[head] and not owner)
                    ):
                        patches.append(where(node, f"{name}()"))
                    elif name in ("setattr", "object.__setattr__", "type.__setattr__") and node.args:
                        first = _dotted(node.args[0])
                        if first and first.split(".")[0] in module_handles | {
                            k for k, v in foreign.items() if "." not in v
                        }:
                            patches.append(where(node, f"{name}({first}, ...) (another package's module)"))
                if (
                    name in ("getattr", "hasattr", "setattr", "delattr", "object.__setattr__")
                    and len(node.args) > 1
                ):
                    attr = node.args[1]
                    if (
                        isinstance(attr, ast.Constant)
                        and isinstance(attr.value, str)
                        and _is_private(attr.value)
                        and not _own(node.args[0])
                    ):
                        privates.append(where(node, f"{name}(..., {attr.value!r})"))
            elif isinstance(node, ast.Attribute) and _is_private(node.attr):
                root = _dotted(node)
                head = root.split(".")[0] if root else None
                if head in foreign and root not in PUBLIC_UNDERSCORED:
                    privates.append(where(node, root or node.attr))
                elif node.attr in KNOWN_PRIVATES and not _own(node.value) and isinstance(node.ctx, ast.Load):
                    privates.append(where(node, f".{node.attr}"))
            elif isinstance(node, ast.Import):
                privates.extend(
                    where(node, f"import {a.name}")
                    for a in node.names
                    if a.name.split(".")[0] != PACKAGE and any(_is_private(p) for p in a.name.split("."))
                )
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module.split(".")[0] != PACKAGE:
                    if any(_is_private(part) for part in node.module.split(".")):
                        privates.append(where(node, f"from {node.module} import ..."))
                    privates.extend(
                        where(node, f"from {node.module} import {a.name}")
                        for a in node.names
                        if _is_private(a.name)
                    )
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and node.value.startswith(PYDANTIC_INTERNALS)
                and node.value.endswith("__")
            ):
                privates.append(where(node, repr(node.value)))
            if isinstance(node, ast.Attribute) and node.attr.startswith(PYDANTIC_INTERNALS):
                privates.append(where(node, f".{node.attr}"))
    return {"patches": sorted(set(patches)), "privates": sorted(set(privates))}


def record_kinds(src: Path = ROOT, exclude: tuple[str, ...] = ()) -> dict[str, int]:
    """Record classes by how they are declared: ``stdlib dataclass``, ``pydantic model`` and one kind per
    decorator of the package's own (e.g. ``agent_core._events._frozen.frozen_dataclass``);
    ``exclude``: path prefixes (relative to ``src``) left out. A stdlib dataclass without ``slots=True``
    counts as ``stdlib dataclass without slots``."""
    kinds: dict[str, int] = defaultdict(int)
    bases: dict[str, list[str]] = {}
    for module_file in source_files(src):
        path = module_file.path
        if module_file.rel.startswith(exclude) and exclude:
            continue
        origin: dict[str, str] = {}
        module = module_name(path, src)
        for node in module_file.nodes:
            if isinstance(node, ast.ImportFrom):
                source = node.module or ""
                if node.level:
                    anchor = module if path.name == "__init__.py" else module.rpartition(".")[0]
                    for _ in range(node.level - 1):
                        anchor = anchor.rpartition(".")[0]
                    source = f"{anchor}.{source}" if source else anchor
                for alias in node.names:
                    origin[alias.asname or alias.name] = f"{source}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    origin[alias.asname or alias.name] = alias.name
        for node in module_file.nodes:
            if not isinstance(node, ast.ClassDef):
                continue
            bases[node.name] = [_dotted(b) or "" for b in node.bases]
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                dotted = _dotted(target) or ""
                head, _, rest = dotted.partition(".")
                resolved = origin.get(head, head) + (f".{rest}" if rest else "")
                if resolved in ("dataclasses.dataclass",):
                    slots = isinstance(decorator, ast.Call) and any(
                        k.arg == "slots" and isinstance(k.value, ast.Constant) and k.value.value is True
                        for k in decorator.keywords
                    )
                    kinds["stdlib dataclass" if slots else "stdlib dataclass without slots"] += 1
                elif resolved.startswith(PACKAGE + ".") and resolved.endswith("dataclass"):
                    kinds[resolved] += 1
                elif resolved == "pydantic.dataclasses.dataclass":
                    kinds["pydantic dataclass"] += 1
    pydantic_roots = {"BaseModel", "RootModel", "BaseSettings", "pydantic.BaseModel"}
    memo: dict[str, bool] = {}

    def is_model(name: str, seen: frozenset[str] = frozenset()) -> bool:
        short = name.rpartition(".")[2]
        if name in pydantic_roots or short in pydantic_roots:
            return True
        if short in memo:
            return memo[short]
        if short in seen or short not in bases:
            return False
        memo[short] = any(is_model(b, seen | {short}) for b in bases[short])
        return memo[short]

    models = sum(1 for name in bases if name not in pydantic_roots and is_model(name))
    if models:
        kinds["pydantic model"] = models
    return dict(sorted(kinds.items()))


def unowned_tasks(src: Path = ROOT) -> list[str]:
    """``asyncio.create_task``/``asyncio.ensure_future`` calls and ``create_task`` on an event loop
    (``loop``, ``get_running_loop()``, ``get_event_loop()``) outside :data:`TASK_OWNER_MODULE`."""
    found: list[str] = []
    for source in source_files(src):
        rel = source.rel
        if rel == TASK_OWNER_MODULE:
            continue
        for node in source.nodes:
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            receiver, attr = node.func.value, node.func.attr
            name = _dotted(node.func) or ""
            loop_call = isinstance(receiver, ast.Call) and (_dotted(receiver.func) or "").endswith(
                ("get_running_loop", "get_event_loop")
            )
            loop_name = isinstance(receiver, (ast.Name, ast.Attribute)) and (_dotted(receiver) or "").split(
                "."
            )[-1] in ("loop", "_loop", "event_loop")
            if name in ("asyncio.create_task", "asyncio.ensure_future") or (
                attr == "create_task" and (loop_call or loop_name)
            ):
                found.append(f"{rel}:{node.lineno}: {name or attr}")
    return found


def report(type_checking: bool = False, src: Path = ROOT) -> dict[str, object]:
    """The figures of ``<src>/agent_core`` (``src`` defaults to this repository's ``src/``)."""
    sources = source_files(src)
    files = [source.path for source in sources]
    names = {source.path: module_name(source.path, src) for source in sources}
    known = set(names.values())
    graph = {
        names[s.path]: _imports(s.tree, names[s.path], s.path.name == "__init__.py", known, type_checking)
        for s in sources
    }
    lines = {source.path: len(source.text.splitlines()) for source in sources}
    rooms: dict[str, int] = defaultdict(int)
    for path, count in lines.items():
        rel = path.relative_to(src / PACKAGE).parts
        rooms[rel[0].removesuffix(".py") if len(rel) > 1 or rel[0] != "__init__.py" else "__init__"] += count
    total = sum(lines.values())
    largest_room = max(rooms.items(), key=lambda item: item[1])
    largest_file = max(lines.items(), key=lambda item: item[1])
    any_count = {
        room: sum(
            _count_any(source.nodes)
            for source in sources
            if source.path.relative_to(src / PACKAGE).parts[0].lstrip("_") == room
            and len(source.path.parts) > 1
        )
        for room in ("loop", "runtime")
    }
    cycles = strongly_connected(graph)
    reach = boundary(src)
    return {
        "files": len(files),
        "lines": total,
        "cycles": cycles,
        "files_in_cycles": sum(len(c) for c in cycles),
        "largest_room": (largest_room[0], largest_room[1], round(100 * largest_room[1] / total, 1)),
        "largest_file": (str(largest_file[0].relative_to(src)), largest_file[1]),
        "any": any_count,
        **reach,
        "host_state": host_state(src),
        "record_kinds": record_kinds(src),
        "unowned_tasks": unowned_tasks(src),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strict", action="store_true", help="exit 1 when a file-level import cycle exists")
    parser.add_argument(
        "--type-checking", action="store_true", help="also count imports under `if TYPE_CHECKING:`"
    )
    parser.add_argument("--verbose", action="store_true", help="list the host-state and unowned-task sites")
    parser.add_argument(
        "--src", type=Path, default=ROOT, help="the src/ directory to measure (default: this one)"
    )
    args = parser.parse_args(argv)
    figures = report(args.type_checking, args.src)
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
    host = figures["host_state"]
    assert isinstance(host, dict)
    print(f"process-wide patches: {len(host['patches'])}")
    print(f"private-attribute accesses of dependencies: {len(host['privates'])}")
    for label, kinds in (
        ("record kinds", figures["record_kinds"]),
        ("  outside _events/", record_kinds(args.src, OTHER_ROOMS)),
    ):
        assert isinstance(kinds, dict)
        print(f"{label}: {len(kinds)} ({', '.join(f'{k}: {n}' for k, n in kinds.items())})")
    tasks = figures["unowned_tasks"]
    assert isinstance(tasks, list)
    print(f"create_task/ensure_future without an owner: {len(tasks)}")
    if args.verbose:
        for line in [*host["patches"], *host["privates"], *tasks]:
            print("  " + line)
    return 1 if args.strict and cycles else 0


if __name__ == "__main__":
    sys.exit(main())

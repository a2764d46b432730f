"""Marks the implementation modules of ``agent_core`` private, httpx style (issue 15 item 8).

    python scripts/privatize_modules.py [--dry-run]

Renames (``git mv``) every implementation room and module to a ``_``-prefixed name and rewrites the dotted
(``agent_core.loop.driver``) and path (``agent_core/loop/``) spellings in ``src/``, ``tests/``,
``benchmarks/``, ``scripts/``, ``README.md`` and ``pyproject.toml``. Idempotent: run it again after
rebasing a branch that still uses the old names (files it finds under an old directory are moved into the
new one, old spellings are rewritten, nothing else changes). Then run ``ruff check --fix`` (import order).

What stays public is listed in ``tests/unit/test_public_api.py`` (``PUBLIC_MODULES``).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "src" / "agent_core"

INTERNAL_ROOMS = (
    "agents",
    "api",
    "artifacts",
    "compact",
    "context",
    "events",
    "hooks",
    "loop",
    "mcp",
    "memory",
    "orchestrator",
    "runtime",
    "skills",
    "storage",
    "tasks",
)
"""Packages that are implementation as a whole: ``agent_core/<room>/`` → ``agent_core/_<room>/``.

``agent_core/assets/`` is not among them: it is a data directory at a fixed public path (its loader is
``agent_core/_asset_loader.py``; issue 31 item 19)."""
INTERNAL_TOP_MODULES = ("frontmatter", "ids", "jsontext", "memo", "redaction")
INTERNAL_MODULES: dict[str, tuple[str, ...]] = {
    "tools": (
        "builtin",
        "command",
        "declarative",
        "effective",
        "instruction_files",
        "lazy",
        "normalize",
        "outcome",
        "paths",
        "pipeline",
        "scheduler",
        "schema",
    ),
    "providers": ("anthropic", "ollama", "openai_compatible", "prefix", "streaming", "tool_mapping"),
    "permissions": ("deferred", "gate", "policy", "rules"),
    "config": ("json_file", "profiles"),
    "engine.temporal": ("activities", "client", "contexts", "payloads", "permissions", "workflow"),
}
"""Implementation modules of public rooms (the room's other modules and its ``__init__`` stay API)."""

TEXT_ROOTS = ("src", "tests", "benchmarks", "scripts")
TEXT_FILES = ("README.md", "pyproject.toml")
SUFFIXES = {".py", ".pyi", ".md", ".toml", ".sh", ".txt", ".cfg", ".ini", ".json", ".js", ".html"}


def renames() -> list[tuple[str, str]]:
    """``(old dotted path, new dotted path)`` relative to ``agent_core``."""
    pairs = [(room, f"_{room}") for room in INTERNAL_ROOMS]
    pairs += [(module, f"_{module}") for module in INTERNAL_TOP_MODULES]
    pairs += [(f"{room}.{m}", f"{room}._{m}") for room, modules in INTERNAL_MODULES.items() for m in modules]
    return pairs


def _git(*args: str) -> None:
    subprocess.run(["git", *args], cwd=REPO, check=True)


def _source(dotted: str) -> tuple[Path, Path]:
    """The directory and the module file a dotted name may be."""
    base = PKG.joinpath(*dotted.split("."))
    return base, base.with_suffix(".py")


def move(old: str, new: str, dry_run: bool) -> list[str]:
    done: list[str] = []
    old_dir, old_file = _source(old)
    new_dir, new_file = _source(new)
    if old_file.is_file():
        if new_file.exists():
            raise SystemExit(f"both {old_file} and {new_file} exist")
        done.append(f"{old_file.relative_to(REPO)} -> {new_file.relative_to(REPO)}")
        if not dry_run:
            _git("mv", str(old_file), str(new_file))
    if old_dir.is_dir():
        tracked = subprocess.run(
            ["git", "ls-files", str(old_dir)], cwd=REPO, check=True, capture_output=True, text=True
        ).stdout.split()
        if not new_dir.exists() and not dry_run:
            _git("mv", str(old_dir), str(new_dir))
            done.append(f"{old_dir.relative_to(REPO)}/ -> {new_dir.relative_to(REPO)}/")
        else:  # a rebased branch added files under the old directory
            for rel in tracked:
                source = REPO / rel
                target = new_dir / source.relative_to(old_dir)
                done.append(f"{rel} -> {target.relative_to(REPO)}")
                if not dry_run:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    _git("mv", str(source), str(target))
            if not dry_run:
                for leftover in sorted(old_dir.rglob("__pycache__"), reverse=True):
                    for f in leftover.iterdir():
                        f.unlink()
                    leftover.rmdir()
                if old_dir.exists() and not any(old_dir.rglob("*")):
                    old_dir.rmdir()
    return done


def rewriter() -> tuple[re.Pattern[str], dict[str, str]]:
    """One pattern for every old spelling, dotted (``agent_core.a.b``) and path (``agent_core/a/b``)."""
    table: dict[str, str] = {}
    for old, new in renames():
        table[f"agent_core.{old}"] = f"agent_core.{new}"
        table["agent_core/" + old.replace(".", "/")] = "agent_core/" + new.replace(".", "/")
    alternatives = sorted(table, key=len, reverse=True)
    pattern = re.compile("(" + "|".join(re.escape(a) for a in alternatives) + r")(?![A-Za-z0-9_])")
    return pattern, table


def _from_imports(text: str) -> str:
    """``from agent_core.<room> import <module>[, ...]`` of a renamed module → ``import _<module> as <module>``."""
    modules: dict[str, set[str]] = {}
    for old, _ in renames():
        if "." in old:
            room, _, module = old.rpartition(".")
            modules.setdefault(f"agent_core.{room}", set()).add(module)

    def fix(match: re.Match[str]) -> str:
        names = [n.strip() for n in match.group(2).split(",")]
        out = []
        for name in names:
            bare = name.split(" as ")[0].strip()
            if bare in modules[match.group(1)]:
                alias = name.split(" as ")[1].strip() if " as " in name else bare
                out.append(f"_{bare} as {alias}")
            else:
                out.append(name)
        return f"from {match.group(1)} import {', '.join(out)}"

    rooms = "|".join(re.escape(r) for r in modules)
    return re.sub(rf"^from ({rooms}) import ([A-Za-z0-9_, ]+)$", fix, text, flags=re.M)


_ROOMS = "|".join(INTERNAL_ROOMS)
_PATH_PARTS = re.compile(rf'(/ "agent_core" / ")({_ROOMS})"')
"""``... / "agent_core" / "assets"`` path joins."""
_RESOURCE_PATHS = re.compile(rf'(\.joinpath\(")({_ROOMS})/')
"""``resources.files("agent_core").joinpath("assets/...")``."""


def rewrite(dry_run: bool) -> list[str]:
    pattern, table = rewriter()
    files = [REPO / name for name in TEXT_FILES if (REPO / name).is_file()]
    for root in TEXT_ROOTS:
        files += [p for p in (REPO / root).rglob("*") if p.is_file() and p.suffix in SUFFIXES]
    changed: list[str] = []
    this = Path(__file__).resolve()
    for path in files:
        if path.resolve() == this or "__pycache__" in path.parts:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        new = _from_imports(pattern.sub(lambda m: table[m.group(1)], text))
        new = _PATH_PARTS.sub(r'\1_\2"', new)
        new = _RESOURCE_PATHS.sub(r"\1_\2/", new)
        if new != text:
            changed.append(str(path.relative_to(REPO)))
            if not dry_run:
                path.write_text(new, encoding="utf-8")
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    moved: list[str] = []
    for old, new in renames():
        moved += move(old, new, args.dry_run)
    changed = rewrite(args.dry_run)
    print(f"moved: {len(moved)}, rewritten files: {len(changed)}")
    for line in moved:
        print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())

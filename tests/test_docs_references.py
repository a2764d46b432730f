"""The project documents itself: what the code, the tests and the docs refer to is in the repository.

* A markdown file named in a comment or docstring (``src/``, ``tests/``, ``benchmarks/``, ``scripts/``) or
  in a markdown page (``README.md``, ``docs/``, the other ``*.md`` files of those folders) exists: relative
  to the repository root or to the naming file's folder. Names of files the product itself reads or
  writes (``CLAUDE.md``, ``AGENTS.md``, ``MEMORY.md``, a test's fixture file that appears as a string in
  the same module, a packaged prompt or template) are not references and pass.
  The product's packaged prompts and templates (``src/agent_core/assets/``) are its content, not
  references, and are not read for names.
* No section-sign references (a section sign before a number): the design is cited as ``docs/<page>.md#<anchor>``.
* Every ``docs/<page>.md#<anchor>``, and every ``[text](<page>.md#<anchor>)`` / ``[text](#anchor)`` link of a
  markdown page, names a heading of that page (GitHub's anchors: lower case, punctuation dropped, spaces
  as hyphens, ``-1``, ``-2`` … for repeated headings).
"""

from __future__ import annotations

import io
import os
import re
import tokenize
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCOPES = ("src", "tests", "benchmarks", "scripts")
SUFFIXES = {".py", ".md", ".toml", ".txt", ".sh", ".yml", ".yaml", ".cfg", ".ini"}
ASSETS = ROOT / "src" / "agent_core" / "assets"
PRODUCT_FILES = {"CLAUDE.md", "AGENTS.md", "MEMORY.md", "page.md"}  # page.md: a fetched page as an artifact
SKIP_DIRS = {"__pycache__", ".venv", "node_modules", ".pytest_cache", ".mypy_cache", ".ruff_cache"}

MD_NAME = re.compile(r"(?<![\w./<>*${}~@:-])((?:[\w.-]+/)*[\w.-]*\w\.md)(?![\w/])(?:#([\w-]+))?")
MD_LINK = re.compile(r"\]\(([^)\s]*)\)")
SECTION_SIGN = re.compile(r"§\s*\d")
FENCE = re.compile(r"^\s*(```|~~~)")


def walk(base: Path) -> Iterator[Path]:
    """The files under ``base``, without caches, virtual environments and hidden folders."""
    for folder, dirs, names in os.walk(base):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        yield from (Path(folder) / name for name in sorted(names))


@cache
def scanned_files() -> list[Path]:
    paths = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for scope in SCOPES:
        paths += [path for path in walk(ROOT / scope) if path.suffix in SUFFIXES]
    return paths


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def python_prose(text: str) -> tuple[str, set[str]]:
    """A module's comments and docstrings (strings standing as statements), and its other string literals."""
    prose: list[str] = []
    literals: set[str] = set()
    statement_start = True
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            prose.append(tok.string)
        elif tok.type == tokenize.STRING:
            (prose.append(tok.string) if statement_start else literals.add(tok.string))
        if tok.type not in (tokenize.COMMENT, tokenize.NL):
            statement_start = tok.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
    return "\n".join(prose), literals


def without_fences(text: str) -> str:
    """Markdown text with its fenced code blocks blanked (line numbers kept)."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            out.append("")
        else:
            out.append("" if fenced else line)
    return "\n".join(out)


def slug(heading: str) -> str:
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in without_fences(path.read_text(encoding="utf-8")).splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = slug(m.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return frozenset(found)


@cache
def tracked_suffixes() -> frozenset[str]:
    """Every markdown file of the repository by each tail of its path (``x/y/z`` is also ``y/z``, ``z``)."""
    suffixes: set[str] = set()
    for path in walk(ROOT):
        if path.suffix != ".md":
            continue
        parts = path.relative_to(ROOT).parts
        suffixes.update("/".join(parts[i:]) for i in range(len(parts)))
    return frozenset(suffixes)


def target(name: str, where: Path) -> Path | None:
    for base in (ROOT, where.parent):
        candidate = (base / name).resolve()
        if candidate.is_file():
            return candidate
    return None


@cache
def references(path: Path) -> list[tuple[str, str | None, bool]]:
    """(markdown file name, anchor, is a link) for every markdown file ``path`` names (a link to an anchor of
    the same page has an empty name)."""
    return list(_references(path))


def _references(path: Path) -> Iterator[tuple[str, str | None, bool]]:
    text = path.read_text(encoding="utf-8")
    if ".md" not in text or ASSETS in path.parents:
        return
    literals: set[str] = set()
    if path.suffix == ".py":
        text, literals = python_prose(text)
    elif path.suffix == ".md":
        text = without_fences(text)
        for link in MD_LINK.finditer(re.sub(r"`[^`\n]*`", "", text)):  # not in code spans
            dest = link.group(1)
            if re.match(r"^[a-z]+:", dest):
                continue
            name, _, anchor = dest.partition("#")
            yield name, anchor or None, True
    for m in MD_NAME.finditer(text):
        name = m.group(1)
        if name.split("/")[-1] in PRODUCT_FILES or any(
            name.split("/")[-1] in literal for literal in literals
        ):
            continue
        yield name, m.group(2), False


def test_no_section_sign_references() -> None:
    offenders = [
        f"{rel(path)}:{n}: {line.strip()[:100]}"
        for path in scanned_files()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if SECTION_SIGN.search(line)
    ]
    assert not offenders, "cite docs/<page>.md#<anchor> instead:\n" + "\n".join(offenders)


def test_named_markdown_files_are_in_the_repository() -> None:
    missing = []
    for path in scanned_files():
        for name, _, is_link in references(path):
            if not name:
                continue
            if target(name, path) is not None:
                continue
            if not is_link and "/" in name and not name.startswith("docs/") and name in tracked_suffixes():
                continue  # a packaged prompt or template named by its path inside the package
            missing.append(f"{rel(path)}: {name}")
    assert not missing, "references to markdown files the repository does not have:\n" + "\n".join(
        sorted(set(missing))
    )


def test_anchors_name_headings() -> None:
    broken = []
    for path in scanned_files():
        for name, anchor, _ in references(path):
            if anchor is None:
                continue
            page = path if not name else target(name, path)
            if page is None or page.suffix != ".md":
                continue  # a missing file is the previous test's finding
            if anchor not in anchors(page):
                broken.append(f"{rel(path)}: {name}#{anchor}")
    assert not broken, "anchors that name no heading:\n" + "\n".join(sorted(set(broken)))

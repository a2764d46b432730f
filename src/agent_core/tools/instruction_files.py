"""Which files are instruction files (contract.md §4.8/§5, context.md §7.1/§7.4), and their frontmatter.

:func:`match_instruction_file` is the single predicate shared by ``code.read_file`` and the instruction
catalog: a *resolved* path is an instruction file when it matches a catalog scan source

* ``${SOONG_AGENT_HOME}/CLAUDE.md``, ``${SOONG_AGENT_HOME}/AGENTS.md``, ``${SOONG_AGENT_HOME}/rules/**/*.md``
* ``<project>/**/CLAUDE.md``, ``<project>/**/AGENTS.md``

with no skipped directory name (:data:`~agent_core.tools.paths.SKIP_DIRS`) between the root and the file,
never below ``<project>/.soong-agent/`` and, for project matches, never below ``${SOONG_AGENT_HOME}`` when
the home lies inside ``<project>``. Names match exactly (case-sensitive). Catalog truncation and the
``CLAUDE.md``-over-``AGENTS.md`` display rule do not affect the predicate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import yaml

from agent_core.tools.paths import SKIP_DIRS, is_within

INSTRUCTION_NAMES: tuple[str, ...] = ("CLAUDE.md", "AGENTS.md")
PROJECT_PRIVATE_DIR = ".soong-agent"


@dataclass(frozen=True)
class InstructionFileRef:
    """An instruction file: resolved ``path``, ``scope`` and ``relative_path`` (POSIX, to its root)."""

    path: Path
    scope: Literal["user", "project"]
    relative_path: str


def _no_skipped_dirs(parts: tuple[str, ...]) -> bool:
    return not any(part in SKIP_DIRS for part in parts[:-1])


def match_instruction_file(path: Path, *, project_dir: Path, home_dir: Path) -> InstructionFileRef | None:
    """Returns the instruction-file reference for a resolved ``path`` or ``None`` (all inputs resolved)."""
    if is_within(path, home_dir) and path != home_dir:
        rel = path.relative_to(home_dir)
        parts = rel.parts
        if len(parts) == 1 and parts[0] in INSTRUCTION_NAMES:
            return InstructionFileRef(path, "user", rel.as_posix())
        if len(parts) >= 2 and parts[0] == "rules" and path.suffix == ".md" and _no_skipped_dirs(parts):
            return InstructionFileRef(path, "user", rel.as_posix())
        if is_within(home_dir, project_dir):
            return None  # the home inside <project> is never part of the project walk
    if not is_within(path, project_dir) or path == project_dir:
        return None
    rel = path.relative_to(project_dir)
    parts = rel.parts
    if parts[-1] not in INSTRUCTION_NAMES or parts[0] == PROJECT_PRIVATE_DIR:
        return None
    if not _no_skipped_dirs(parts):
        return None
    return InstructionFileRef(path, "project", PurePosixPath(*parts).as_posix())


@dataclass(frozen=True)
class Frontmatter:
    """A leading YAML frontmatter block: parsed ``data`` (``{}`` if absent/invalid), ``error`` flag, ``body``."""

    data: dict[str, Any] = field(default_factory=dict)
    body: str = ""
    error: bool = False
    present: bool = False


def _jsonable(value: Any) -> Any:
    """YAML scalars that JSON lacks (dates, sets, bytes) become strings/lists."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, date | datetime):
        return value.isoformat()
    return str(value)


def split_frontmatter(text: str) -> Frontmatter:
    """Parses a ``---`` … ``---`` block at the very start of ``text`` with the YAML safe loader."""
    lines = text.split("\n")
    if not lines or lines[0].rstrip("\r") != "---":
        return Frontmatter(body=text)
    for index in range(1, len(lines)):
        if lines[index].rstrip("\r") in ("---", "..."):
            raw = "\n".join(lines[1:index])
            body = "\n".join(lines[index + 1 :])
            try:
                data = yaml.safe_load(raw) if raw.strip() else {}
            except yaml.YAMLError:
                return Frontmatter(body=body, error=True, present=True)
            if data is None:
                data = {}
            if not isinstance(data, dict):
                return Frontmatter(body=body, error=True, present=True)
            return Frontmatter(data=_jsonable(data), body=body, present=True)
    return Frontmatter(body=text, error=True, present=False)

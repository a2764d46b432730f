"""Which files are instruction files (docs/context.md#loading, docs/context.md#the-catalog,
docs/context.md#instruction-files).

:func:`match_instruction_file` is the single predicate shared by ``code.read_file`` and the instruction
catalog: a *resolved* path is an instruction file when it matches a catalog scan source

* ``${SOONG_AGENT_HOME}/CLAUDE.md``, ``${SOONG_AGENT_HOME}/AGENTS.md``, ``${SOONG_AGENT_HOME}/rules/**/*.md``
* ``<project>/**/CLAUDE.md``, ``<project>/**/AGENTS.md``

with no skipped directory name (:data:`~agent_core.tools._paths.SKIP_DIRS`) between the root and the file,
never below ``<project>/.soong-agent/`` and, for project matches, never below ``${SOONG_AGENT_HOME}`` when
the home lies inside ``<project>``. Names match exactly (case-sensitive). Catalog truncation and the
``CLAUDE.md``-over-``AGENTS.md`` display rule do not affect the predicate.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from agent_core.tools._paths import SKIP_DIRS, is_within

INSTRUCTION_NAMES: tuple[str, ...] = ("CLAUDE.md", "AGENTS.md")
PROJECT_PRIVATE_DIR = ".soong-agent"


@dataclass(frozen=True, slots=True)
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

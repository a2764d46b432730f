"""The skill catalog: ``${SOONG_AGENT_HOME}/skills/*.md`` name + description (docs/context.md#skills).

Contracts:

- Only regular ``*.md`` files directly in the skills directory are read (non-recursive; no project skills).
- Frontmatter ``name`` and ``description`` (non-empty strings, ``name`` on one line) are required; a file
  without them, or with unparsable frontmatter, is left out with a warning log and listed in
  :attr:`SkillCatalog.invalid`. Duplicate names: the lexicographically first file name wins, the others are
  logged and listed in :attr:`SkillCatalog.duplicates`.
- The catalog is cached in memory; :meth:`SkillCatalog.refresh` (called at every run start) rebuilds it only
  when a skill file was added, removed or changed mtime/size. First use builds it lazily.
- :meth:`SkillCatalog.block` renders names and descriptions only, never bodies.
"""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_core._frontmatter import split_frontmatter
from agent_core._jsontext import compact_json
from agent_core.types.model import SystemBlock

logger = logging.getLogger("agent_core._skills")

SKILLS_DIR = "skills"
SKILL_CATALOG_BLOCK_ID = "skill_catalog"
SKILL_CATALOG_PRIORITY = 120
SKILL_CATALOG_MARKER = "\n[... skill catalog truncated to fit the context budget ...]\n</skill_catalog>"

_Fingerprint = dict[str, tuple[int, int]]


@dataclass(frozen=True, kw_only=True, slots=True)
class SkillEntry:
    name: str
    description: str
    path: Path
    """Resolved path of the skill file."""
    mtime_ns: int
    size_bytes: int
    metadata: dict[str, Any] = field(default_factory=dict)
    """Frontmatter fields other than ``name``/``description`` (kept, not relied upon)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SkillIssue:
    path: Path
    reason: str


class SkillCatalog:
    """In-memory catalog of the user's skills, refreshed by file mtime."""

    def __init__(self, home: Path) -> None:
        self._dir = Path(home) / SKILLS_DIR
        self._fingerprint: _Fingerprint | None = None
        self._entries: dict[str, SkillEntry] = {}
        self._invalid: list[SkillIssue] = []
        self._duplicates: list[SkillIssue] = []

    @property
    def skills_dir(self) -> Path:
        return self._dir

    @property
    def invalid(self) -> list[SkillIssue]:
        """Files left out for missing/invalid required frontmatter (as of the last build)."""
        self._ensure()
        return list(self._invalid)

    @property
    def duplicates(self) -> list[SkillIssue]:
        """Files ignored because an earlier file (by name) declares the same skill name."""
        self._ensure()
        return list(self._duplicates)

    def refresh(self) -> bool:
        """Rebuilds the catalog if any skill file was added, removed or changed; returns whether it did."""
        fingerprint = self._scan_fingerprint()
        if fingerprint == self._fingerprint:
            return False
        self._build(fingerprint)
        return True

    def entries(self) -> list[SkillEntry]:
        """Valid skills sorted by name."""
        self._ensure()
        return [self._entries[name] for name in sorted(self._entries)]

    def get(self, name: str) -> SkillEntry | None:
        """The skill named exactly ``name`` (case-sensitive), if catalogued."""
        self._ensure()
        return self._entries.get(name)

    def block(self) -> SystemBlock | None:
        """The dynamic ``skill_catalog`` block, or ``None`` when no valid skill exists."""
        entries = self.entries()
        if not entries:
            return None
        lines = ["<skill_catalog>"]
        for entry in entries:
            lines.append(_json_line({"name": entry.name, "description": entry.description}))
        lines.append("</skill_catalog>")
        return SystemBlock(
            block_id=SKILL_CATALOG_BLOCK_ID,
            source=SKILL_CATALOG_BLOCK_ID,
            content="\n".join(lines),
            priority=SKILL_CATALOG_PRIORITY,
            dynamic=True,
            metadata={
                "skill_names": [e.name for e in entries],
                "truncation_marker": SKILL_CATALOG_MARKER,
            },
        )

    # ------------------------------------------------------------------------------------------- internals

    def _ensure(self) -> None:
        if self._fingerprint is None:
            self.refresh()

    def _scan_fingerprint(self) -> _Fingerprint:
        out: _Fingerprint = {}
        try:
            names = os.listdir(self._dir)
        except OSError:
            return out
        for name in names:
            if not name.endswith(".md") or name == ".md":
                continue
            try:
                st = os.stat(self._dir / name)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                out[name] = (st.st_mtime_ns, st.st_size)
        return out

    def _build(self, fingerprint: _Fingerprint) -> None:
        entries: dict[str, SkillEntry] = {}
        invalid: list[SkillIssue] = []
        duplicates: list[SkillIssue] = []
        for filename in sorted(fingerprint):
            path = (self._dir / filename).resolve()
            mtime_ns, size = fingerprint[filename]
            parsed = _parse_skill_file(path)
            if isinstance(parsed, str):
                logger.warning("skill file %s left out of the catalog: %s", path, parsed)
                invalid.append(SkillIssue(path=path, reason=parsed))
                continue
            name, description, extra = parsed
            if name in entries:
                reason = f"duplicate skill name {name!r}; {entries[name].path.name} wins"
                logger.warning("skill file %s ignored: %s", path, reason)
                duplicates.append(SkillIssue(path=path, reason=reason))
                continue
            entries[name] = SkillEntry(
                name=name,
                description=description,
                path=path,
                mtime_ns=mtime_ns,
                size_bytes=size,
                metadata=extra,
            )
        self._entries, self._invalid, self._duplicates = entries, invalid, duplicates
        self._fingerprint = fingerprint


def _parse_skill_file(path: Path) -> tuple[str, str, dict[str, Any]] | str:
    """``(name, description, other frontmatter)`` or the reason the file is invalid."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return f"unreadable: {exc}"
    return validate_skill_frontmatter(text)


def validate_skill_frontmatter(text: str) -> tuple[str, str, dict[str, Any]] | str:
    """Validates the required ``name``/``description`` frontmatter of a skill file's text."""
    front = split_frontmatter(text)
    if front.error:
        return "unparsable YAML frontmatter"
    if not front.present:
        return "missing frontmatter (name and description are required)"
    name = front.data.get("name")
    description = front.data.get("description")
    if not isinstance(name, str) or not name.strip() or "\n" in name:
        return "frontmatter 'name' must be a non-empty single-line string"
    if not isinstance(description, str) or not description.strip():
        return "frontmatter 'description' must be a non-empty string"
    extra = {k: v for k, v in front.data.items() if k not in ("name", "description")}
    return name.strip(), " ".join(description.split()), extra


def _json_line(value: dict[str, Any]) -> str:
    return compact_json(value).replace("</", "<\\/")

"""Leading YAML frontmatter of a Markdown file (instruction files, skills, agent definitions, memory files).

A bottom-layer module: :func:`split_frontmatter` parses with the YAML safe loader and never raises; a bad
block is reported through :attr:`Frontmatter.error`. PyYAML is imported only when a text has a frontmatter
block (cold start: a run whose files have none never loads it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any


@dataclass(frozen=True, slots=True)
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
            import yaml

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

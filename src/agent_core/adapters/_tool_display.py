"""How a tool call is shown outside the runtime (an editor's tool card, an MCP progress line): pure.

:func:`describe_call` gives a call's one-line title, its ACP tool kind and the file locations it touches,
from the tool name and its arguments (``None`` while they are not known yet); paths are shown as given and located relative to
the project. Unknown tools keep their name and the runtime's argument summary.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

ToolKindName = Literal["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other"]

_KINDS: dict[str, ToolKindName] = {
    "code.read_file": "read",
    "code.list_dir": "read",
    "code.search": "search",
    "code.write_file": "edit",
    "code.edit_file": "edit",
    "code.run_command": "execute",
    "internal.recall_memory": "search",
    "internal.load_skill": "read",
}
_VERBS = {
    "code.read_file": "Read",
    "code.list_dir": "List",
    "code.write_file": "Write",
    "code.edit_file": "Edit",
}
TITLE_LIMIT = 160


@dataclass(frozen=True, slots=True)
class CallLocation:
    path: str
    line: int | None = None


@dataclass(frozen=True, slots=True)
class CallDisplay:
    title: str
    kind: ToolKindName
    locations: list[CallLocation] = field(default_factory=list)


def _cut(text: str, limit: int = TITLE_LIMIT) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def parse_arguments(raw: str) -> dict[str, Any] | None:
    """The JSON object of a streamed tool call's arguments, ``None`` when it is not one (yet)."""
    if not raw.strip():
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _located(project: Path, raw: object, line: object = None) -> list[CallLocation]:
    if not isinstance(raw, str) or not raw:
        return []
    path = Path(raw).expanduser()
    where = path if path.is_absolute() else project / path
    return [CallLocation(str(where), line if isinstance(line, int) and line >= 1 else None)]


def describe_call(
    tool_name: str, arguments: dict[str, Any] | None, project: Path, summary: str = ""
) -> CallDisplay:
    """Title, kind and locations of one call (``summary``: the runtime's argument summary, if known)."""
    args = arguments or {}
    kind: ToolKindName = _KINDS.get(tool_name, "think" if tool_name.startswith("agent.") else "other")
    path = args.get("path")
    if tool_name in _VERBS:
        if arguments is None:  # not streamed yet
            noun = "directory" if tool_name == "code.list_dir" else "file"
            return CallDisplay(f"{_VERBS[tool_name]} {noun}", kind, [])
        shown = path if isinstance(path, str) and path else "."
        line = args.get("start_line") if tool_name == "code.read_file" else None
        return CallDisplay(_cut(f"{_VERBS[tool_name]} {shown}"), kind, _located(project, shown, line))
    if tool_name == "code.search":
        query = args.get("query")
        where = f" in {path}" if isinstance(path, str) and path else ""
        title = (
            f"Search {json.dumps(query, ensure_ascii=False)}{where}" if isinstance(query, str) else "Search"
        )
        return CallDisplay(_cut(title), kind, _located(project, path))
    if tool_name == "code.run_command":
        argv = args.get("argv")
        if isinstance(argv, list) and all(isinstance(a, str) for a in argv):
            return CallDisplay(_cut(f"Run {shlex.join(argv)}"), kind, [])
        return CallDisplay("Run command", kind, [])
    detail = summary or (json.dumps(args, ensure_ascii=False, sort_keys=True) if args else "")
    return CallDisplay(_cut(f"{tool_name} {detail}".strip()), kind, _located(project, path))

"""``internal.load_skill``: loads a catalogued skill body into the context as a ``skill_context`` node.

Contracts (docs/context.md#skills, docs/tools.md#built-in-tools):

- readonly, tags ``internal`` + ``readonly``, ``metadata.concurrency = "parallel"``; never asks.
- Input ``{name: str}`` (exact, case-sensitive; no other keys). Unknown name → ``skill_not_found``; a read
  or frontmatter failure → ``skill_load_failed``; in both cases no node is written.
- The body (text after the frontmatter) is re-read from disk on every call. If the visible active path
  (nodes not covered by the last valid compaction) already holds a ``skill_context`` node for the skill
  whose ``skill_hash`` and ``skill_mtime_ns`` equal the current ones → ``already_loaded = true`` and no
  node; otherwise one ``skill_context`` node (role ``user``) is buffered through the tool context.
- Result JSON ``{skill_name, skill_path, already_loaded, description}``; the body travels only in the node.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agent_core._context.conversation import latest_valid_compaction
from agent_core._frontmatter import split_frontmatter
from agent_core._skills.catalog import SkillCatalog, SkillEntry
from agent_core._skills.tool_definition import LOAD_SKILL_TOOL, load_skill_definition
from agent_core.errors import ErrorCode, InvalidArgumentError, SkillError, ToolNotAvailableError
from agent_core.tools.context import ContextNodeDraft, ToolContext
from agent_core.types.content import TextBlock
from agent_core.types.enums import MessageRole, NodeType
from agent_core.types.model import ToolCall
from agent_core.types.runtime import Node
from agent_core.types.tools import ToolDefinition


@dataclass(frozen=True, kw_only=True, slots=True)
class LoadedSkill:
    body: str
    hash: str
    """SHA-256 hex digest of the UTF-8 body."""
    mtime_ns: int


def read_skill_body(entry: SkillEntry) -> LoadedSkill:
    """Reads the current body of ``entry`` from disk; raises ``skill_load_failed`` on any failure."""
    try:
        st = os.stat(entry.path)
        text = entry.path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SkillError(
            ErrorCode.skill_load_failed,
            f"skill '{entry.name}' could not be read: {type(exc).__name__}",
            details={"skill_name": entry.name, "skill_path": str(entry.path)},
            cause=exc,
        ) from exc
    front = split_frontmatter(text)
    if front.error:
        raise SkillError(
            ErrorCode.skill_load_failed,
            f"skill '{entry.name}' has unparsable frontmatter",
            details={"skill_name": entry.name, "skill_path": str(entry.path)},
        )
    body = front.body
    digest = hashlib.sha256(body.encode("utf-8")).hexdigest()
    return LoadedSkill(body=body, hash=digest, mtime_ns=st.st_mtime_ns)


def visible_nodes(path: Sequence[Node]) -> Sequence[Node]:
    """``path`` without the nodes covered by its last valid compaction
    (docs/compaction.md#the-compaction-node, docs/compaction.md#the-conversation)."""
    index, _ = latest_valid_compaction(path)
    if index is None:
        return path
    first_kept = str(path[index].metadata.get("first_kept_node_id"))
    start = next(i for i, n in enumerate(path) if n.node_id == first_kept)
    return path[start:]


def latest_skill_node(path: Sequence[Node], skill_name: str) -> Node | None:
    """The most recent visible ``skill_context`` node for ``skill_name`` on ``path``."""
    for node in reversed(visible_nodes(path)):
        if node.node_type == NodeType.skill_context and node.metadata.get("skill_name") == skill_name:
            return node
    return None


class SkillToolAdapter:
    """:class:`~agent_core.tools.adapter.ToolAdapter` serving ``internal.load_skill``."""

    def __init__(self, catalog: SkillCatalog) -> None:
        self._catalog = catalog

    @property
    def catalog(self) -> SkillCatalog:
        return self._catalog

    def definitions(self) -> list[ToolDefinition]:
        return [load_skill_definition()]

    async def execute(self, call: ToolCall, ctx: ToolContext) -> dict[str, Any]:
        if call.name != LOAD_SKILL_TOOL:
            raise ToolNotAvailableError(
                ErrorCode.tool_not_available, f"tool '{call.name}' is not available in this run"
            )
        name = call.arguments.get("name")
        if not isinstance(name, str) or set(call.arguments) != {"name"}:
            raise InvalidArgumentError(
                ErrorCode.validation_error,
                "internal.load_skill takes exactly one string argument 'name'",
                details={"errors": [{"path": "name", "message": "required string"}]},
            )
        entry = self._catalog.get(name)
        if entry is None:
            raise SkillError(
                ErrorCode.skill_not_found, f"skill '{name}' not found", details={"skill_name": name}
            )
        loaded = await asyncio.to_thread(read_skill_body, entry)
        previous = latest_skill_node(ctx.sink.active_path(), entry.name)
        already = (
            previous is not None
            and previous.metadata.get("skill_hash") == loaded.hash
            and previous.metadata.get("skill_mtime_ns") == loaded.mtime_ns
        )
        if not already:
            ctx.add_context_node(
                ContextNodeDraft(
                    node_type=NodeType.skill_context,
                    role=MessageRole.user,
                    content=[TextBlock(text=loaded.body)],
                    metadata={
                        "skill_name": entry.name,
                        "skill_path": str(entry.path),
                        "skill_hash": loaded.hash,
                        "skill_mtime_ns": loaded.mtime_ns,
                        "loaded_by_tool_call_id": ctx.tool_call_id,
                    },
                )
            )
        return {
            "skill_name": entry.name,
            "skill_path": str(entry.path),
            "already_loaded": already,
            "description": entry.description,
        }

    async def close(self) -> None:
        return None

"""An agent's active path kept in memory (root → tip), so turns never re-read SQLite.

The cursor is the incremental form of ``get_node_path(tip)``: nodes are appended as they are written and
the render cache keeps each node's provider-neutral message, so composing a request costs O(path) cheap
list work, not a reload, re-validation and re-render of the whole history.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from agent_core._context.cache_watch import CacheWatch
from agent_core._context.conversation import ComposeMemo, is_skipped_assistant
from agent_core._context.instructions import InstructionIndex
from agent_core._context.prefix import PrefixState
from agent_core._context.render import RenderCache
from agent_core.types.enums import NodeType
from agent_core.types.runtime import Node


class AgentCursor:
    __slots__ = ("agent_id", "cache", "cache_watch", "instructions", "lock", "memo", "path", "prefix")

    def __init__(self, agent_id: str, path: Sequence[Node] = ()) -> None:
        self.agent_id = agent_id
        self.path: list[Node] = list(path)
        self.cache = RenderCache()
        self.lock = asyncio.Lock()
        self.memo = ComposeMemo()
        self.instructions = InstructionIndex()
        """The loaded instruction files of :attr:`path`, kept across the agent's runs."""
        self.prefix = PrefixState()
        """The agent's prompt prefix (the stable-prefix rule of ``_context/prefix.py``), across its runs."""
        self.cache_watch = CacheWatch()
        """The agent's last model request, for ``prompt_cache_break`` events."""

    @property
    def tip(self) -> str | None:
        return self.path[-1].node_id if self.path else None

    @property
    def visible_tip(self) -> str | None:
        """The last node that may be an active node (not a partial/failed assistant node)."""
        for node in reversed(self.path):
            if is_skipped_assistant(node) is None:
                return node.node_id
        return None

    def append(self, node: Node) -> None:
        self.path.append(node)

    def reset(self, path: Sequence[Node]) -> None:
        self.path = list(path)

    def truncate_to(self, node_id: str | None) -> bool:
        """Cuts the path after ``node_id`` (``None`` empties it); False when the node is not on the path."""
        if node_id is None:
            self.path = []
            return True
        for index in range(len(self.path) - 1, -1, -1):
            if self.path[index].node_id == node_id:
                del self.path[index + 1 :]
                return True
        return False

    def instruction_hash(self, path: str) -> str | None:
        for node in reversed(self.path):
            if node.node_type == NodeType.instruction_context and node.metadata.get("path") == path:
                value = node.metadata.get("hash")
                return str(value) if value is not None else None
        return None

"""Write-side inputs of :meth:`StorageManager.append` and its result.

A :class:`NodeDraft` / :class:`EventDraft` is a node/event before the writer assigns its sequence
numbers. ``parent_id=FROM_TIP`` asks the writer to chain the node onto a :class:`Tip` at write time
(docs/storage.md#tree-active-path-and-branches: "each new node's parent_id is that agent's current tip,
assigned inside the writer"), so concurrent writers of one agent form a chain in commit order.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from agent_core._events.catalog import level_of
from agent_core._ids import new_id
from agent_core.types.content import ContentBlock
from agent_core.types.enums import EventLevel, EventType, MessageRole, NodeType
from agent_core.types.events import EventPayload
from agent_core.types.runtime import Node, RuntimeEvent


class Unset(enum.Enum):
    """Sentinel type: "leave this column unchanged"."""

    UNSET = "UNSET"


UNSET: Literal[Unset.UNSET] = Unset.UNSET


class TipMarker(enum.Enum):
    """Sentinel type for ``NodeDraft.parent_id``: "use the chain tip at write time"."""

    FROM_TIP = "FROM_TIP"


FROM_TIP: Literal[TipMarker.FROM_TIP] = TipMarker.FROM_TIP


@dataclass(kw_only=True, slots=True)
class Tip:
    """The current tip of one agent's node chain; advanced by the writer only after a commit."""

    node_id: str | None = None


@dataclass(kw_only=True, slots=True)
class NodeDraft:
    """A node to insert; ``node_seq`` is allocated by the writer. ``created_at=None`` means now."""

    agent_id: str
    role: MessageRole | str
    content: list[ContentBlock]
    node_type: NodeType | str = NodeType.message
    node_id: str = field(default_factory=lambda: new_id("node_"))
    parent_id: str | TipMarker | None = None
    run_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    token_count: int | None = None
    created_at: datetime | None = None


@dataclass(kw_only=True, slots=True)
class EventDraft:
    """An event to insert; ``seq`` (and ``run_seq`` when ``run_id`` is set) are allocated by the writer."""

    event_type: EventType | str
    event_id: str = field(default_factory=lambda: new_id("evt_"))
    agent_id: str | None = None
    run_id: str | None = None
    level: EventLevel | str = EventLevel.info
    node_id: str | None = None
    tool_call_id: str | None = None
    payload: dict[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None

    @classmethod
    def of(
        cls,
        event: EventPayload,
        *,
        agent_id: str | None,
        run_id: str | None,
        level: EventLevel | None = None,
        node_id: str | None = None,
        tool_call_id: str | None = None,
        created_at: datetime | None = None,
    ) -> EventDraft:
        """The draft of a typed event (``level``: the catalogue level unless given)."""
        return cls(
            event_type=event.event_type,
            agent_id=agent_id,
            run_id=run_id,
            level=level or level_of(event.event_type),
            node_id=node_id,
            tool_call_id=tool_call_id,
            payload=event.to_payload(),
            created_at=created_at,
        )


@dataclass(slots=True)
class AppendResult:
    """The persisted (redacted) nodes and events with ``node_seq`` / ``seq`` / ``run_seq`` filled."""

    nodes: list[Node] = field(default_factory=list)
    events: list[RuntimeEvent] = field(default_factory=list)

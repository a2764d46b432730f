"""Persists one run's nodes and events and delivers its live events (the loop's :class:`ToolRunSink`).

One write path: every write is one storage transaction, made under the run's lock and awaited, and its
events are delivered after it committed (:meth:`RunRecorder._write`). A node is written together with the
event(s) that record it. The parent of a new node is the agent's current tip, assigned under the lock, so
parallel tool results form a chain in completion order. For the session's root agent each user-visible
node also moves ``sessions.active_node_id`` in the same transaction. Transient event types
are delivered without a write; the live stream never carries an uncommitted persisted event, and events
are delivered in seq order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from agent_core._artifacts.manager import ArtifactManager
from agent_core._context.conversation import is_skipped_assistant
from agent_core._context.tokens import DEFAULT_COUNTER, TokenCounter
from agent_core._events.catalog import level_of
from agent_core._events.stream import EventChannel
from agent_core._ids import new_id
from agent_core._loop.cursor import AgentCursor
from agent_core._redaction import Redactor
from agent_core._storage.drafts import UNSET, AppendResult, EventDraft, NodeDraft, Unset
from agent_core._storage.inbox import InboxAck
from agent_core._storage.protocol import SessionStore
from agent_core.tools.context import ContextNodeDraft
from agent_core.types.base import utc_now
from agent_core.types.content import ArtifactRefBlock, ContentBlock, ToolResultBlock
from agent_core.types.enums import TRANSIENT_EVENTS, EventLevel, MessageRole, NodeType
from agent_core.types.events import EventPayload, ToolResultEvent
from agent_core.types.runtime import Node, RuntimeEvent
from agent_core.types.tools import ToolResult

INBOX_ENTRY_IDS = "inbox_entry_ids"
"""``ToolResult.metadata`` key: inbox entries the result carries to the model (a plan approval's answer),
acknowledged when the result's node commits."""

EventSpec = tuple[EventPayload, str | None]
"""``(event, tool_call_id)`` of an event written with a node."""


class RunRecorder:
    """The write side of one run: nodes, events, artifacts and buffered context nodes."""

    def __init__(
        self,
        *,
        storage: SessionStore,
        artifacts: ArtifactManager,
        channel: EventChannel,
        cursor: AgentCursor,
        session_id: str,
        agent_id: str,
        run_id: str | None,
        redactor: Redactor,
        root_agent: bool,
        counter: TokenCounter = DEFAULT_COUNTER,
        observers: Sequence[Callable[[RuntimeEvent], None]] = (),
        forward: Callable[[RuntimeEvent], Awaitable[None]] | None = None,
    ) -> None:
        self.storage = storage
        self.artifacts = artifacts
        self.channel = channel
        self.cursor = cursor
        self.session_id = session_id
        self.agent_id = agent_id
        self.run_id = run_id
        self.redactor = redactor
        self.root_agent = root_agent
        self.counter = counter
        self.observers = list(observers)
        self.forward = forward
        """Delivers a child run's events to its ancestors' streams (``events(include_children=True)``)."""
        self._lock = asyncio.Lock()
        self._pending_context: list[tuple[str, ContextNodeDraft]] = []
        self.written_node_ids: list[str] = []

    # ---- events -------------------------------------------------------------------------------
    def _draft(
        self,
        event: EventPayload,
        tool_call_id: str | None,
        level: EventLevel | None,
        node_id: str | None = None,
    ) -> EventDraft:
        return EventDraft.of(
            event,
            agent_id=self.agent_id,
            run_id=self.run_id,
            level=level,
            node_id=node_id,
            tool_call_id=tool_call_id,
            created_at=utc_now(),
        )

    async def _write(
        self,
        events: list[EventDraft],
        *,
        nodes: Sequence[NodeDraft] = (),
        run_update: dict[str, Any] | None = None,
        active_node_id: str | Unset | None = UNSET,
        inbox_ack: InboxAck | None = None,
        deliver: bool = True,
    ) -> AppendResult:
        """The write path: one storage transaction (the caller holds the lock); its events are delivered
        once it committed (unless ``deliver`` is false)."""
        result = await self.storage.append(
            self.session_id,
            nodes=nodes,
            events=events,
            active_node_id=active_node_id,
            run_update=(self.run_id, run_update) if run_update and self.run_id else None,
            inbox_ack=inbox_ack,
        )
        if deliver:
            await self._deliver(result.events)
        return result

    async def emit(
        self, event: EventPayload, *, tool_call_id: str | None = None, level: EventLevel | None = None
    ) -> None:
        await self.emit_event(event, tool_call_id=tool_call_id, level=level)

    async def emit_event(
        self,
        event: EventPayload,
        *,
        tool_call_id: str | None = None,
        level: EventLevel | None = None,
        run_update: dict[str, Any] | None = None,
    ) -> RuntimeEvent:
        event_type = event.event_type
        if event_type in TRANSIENT_EVENTS and run_update is None:
            live = RuntimeEvent.model_construct(
                event_id=new_id("evt_"),
                seq=None,
                run_seq=None,
                session_id=self.session_id,
                agent_id=self.agent_id,
                run_id=self.run_id,
                level=(level or level_of(event_type)).value,
                event_type=event_type,
                node_id=None,
                tool_call_id=tool_call_id,
                data=self.redactor.value(event.to_payload()),
                created_at=utc_now(),
            )
            await self._deliver([live])
            return live
        async with self._lock:
            result = await self._write([self._draft(event, tool_call_id, level)], run_update=run_update)
            return result.events[0]

    async def emit_events(
        self, events: Sequence[EventPayload], *, run_update: dict[str, Any] | None = None
    ) -> list[RuntimeEvent]:
        """Persists several consecutive events (and a run update) in one transaction, then delivers them."""
        async with self._lock:
            result = await self._write([self._draft(e, None, None) for e in events], run_update=run_update)
            return list(result.events)

    async def persist_event(self, event: EventPayload, *, tool_call_id: str | None = None) -> RuntimeEvent:
        """Persists an event without delivering it live (also a normally transient type: debug-mode
        aggregated text deltas, whose text the live stream already carried)."""
        async with self._lock:
            result = await self._write([self._draft(event, tool_call_id, None)], deliver=False)
            return result.events[0]

    async def _deliver(self, events: Sequence[RuntimeEvent]) -> None:
        for event in events:
            for observer in self.observers:
                observer(event)
            await self.channel.push(event)
            if self.forward is not None:
                await self.forward(event)

    # ---- nodes --------------------------------------------------------------------------------
    async def write_node(
        self,
        *,
        role: MessageRole | str,
        node_type: NodeType | str,
        content: list[ContentBlock],
        metadata: dict[str, Any] | None = None,
        events: Sequence[EventSpec] = (),
        run_update: dict[str, Any] | None = None,
        parent_id: str | object | None = UNSET,
        node_id: str | None = None,
        inbox_entry_ids: Sequence[str] = (),
    ) -> Node:
        """Writes one node (child of the tip unless ``parent_id`` is given) with its events atomically;
        ``inbox_entry_ids``: inbox entries of this agent the node carries, acknowledged in the same
        transaction (``InboxAckConflict`` when one was acknowledged meanwhile: nothing is written)."""
        metadata = dict(metadata or {})
        async with self._lock:
            node_id = node_id or new_id("node_")
            parent = self.cursor.tip if parent_id is UNSET else parent_id
            draft = NodeDraft(
                node_id=node_id,
                parent_id=parent,  # type: ignore[arg-type]
                agent_id=self.agent_id,
                run_id=self.run_id,
                role=str(role),
                node_type=str(node_type),
                content=content,
                metadata=metadata,
                token_count=self.counter.blocks(content),
                created_at=utc_now(),
            )
            visible = role != MessageRole.assistant or not (
                metadata.get("partial") or metadata.get("failed") or metadata.get("aborted")
            )
            drafts = [self._draft(e, call_id, None, node_id) for e, call_id in events]
            result = await self._write(
                drafts,
                nodes=[draft],
                active_node_id=node_id if (self.root_agent and visible) else UNSET,
                run_update=run_update,
                inbox_ack=InboxAck(self.agent_id, tuple(inbox_entry_ids), node_id)
                if inbox_entry_ids
                else None,
                deliver=False,
            )
            node = result.nodes[0]
            if parent_id is UNSET or parent == self.cursor.tip:
                self.cursor.append(node)
            self.written_node_ids.append(node.node_id)
            await self._deliver(result.events)
            return node

    async def commit_tool_result(self, result: ToolResult, *, event: ToolResultEvent) -> str:
        block = ToolResultBlock(
            tool_call_id=result.tool_call_id,
            is_error=result.is_error,
            content=result.content,
            error=result.error,
            metadata=result.metadata,
        )
        metadata: dict[str, Any] = {"tool_name": result.tool_name}
        for key in (
            "aborted",
            "partial",
            "abort_reason",
            "skipped",
            "child_agent_id",
            "child_run_id",
            "stream_id",
            "checkpoint_id",
        ):
            if key in result.metadata:
                metadata[key] = result.metadata[key]
        carried = result.metadata.get(INBOX_ENTRY_IDS)  # a result that hands over inbox entries
        node = await self.write_node(
            role=MessageRole.tool,
            node_type=NodeType.message,
            content=[block],
            metadata=metadata,
            events=[(event, result.tool_call_id)],
            inbox_entry_ids=[str(i) for i in carried] if isinstance(carried, list) else (),
        )
        return node.node_id

    # ---- artifacts ----------------------------------------------------------------------------
    async def create_artifact(
        self,
        data: bytes | str | Any,
        *,
        filename: str,
        mime_type: str | None = None,
        summary: str | None = None,
        kind: str = "tool_output",
        tool_call_id: str | None = None,
    ) -> ArtifactRefBlock:
        return await self.artifacts.create(
            data,
            filename=filename,
            mime_type=mime_type,
            summary=summary,
            kind=kind,
            session_id=self.session_id,
            agent_id=self.agent_id,
            run_id=self.run_id,
            tool_call_id=tool_call_id,
        )

    async def register_artifact(
        self,
        path: Path,
        *,
        filename: str | None = None,
        mime_type: str | None = None,
        summary: str | None = None,
        tool_call_id: str | None = None,
    ) -> ArtifactRefBlock:
        return await self.artifacts.register_file(
            path,
            filename=filename,
            mime_type=mime_type,
            summary=summary,
            session_id=self.session_id,
            agent_id=self.agent_id,
            run_id=self.run_id,
            tool_call_id=tool_call_id,
        )

    # ---- context nodes produced by tools ------------------------------------------------------
    def add_context_node(self, draft: ContextNodeDraft, *, tool_call_id: str) -> None:
        self._pending_context.append((tool_call_id, draft))

    async def flush_context_nodes(self, call_order: Sequence[str]) -> list[Node]:
        """Appends buffered context nodes after the turn's tool results, in model call order."""
        if not self._pending_context:
            return []
        order = {cid: i for i, cid in enumerate(call_order)}
        pending = sorted(
            enumerate(self._pending_context), key=lambda item: (order.get(item[1][0], len(order)), item[0])
        )
        self._pending_context = []
        written: list[Node] = []
        for _, (call_id, draft) in pending:
            metadata = {"loaded_by_tool_call_id": call_id, "synthetic": True, **draft.metadata}
            written.append(
                await self.write_node(
                    role=draft.role, node_type=draft.node_type, content=draft.content, metadata=metadata
                )
            )
        return written

    def discard_context_nodes(self) -> None:
        self._pending_context = []

    def loaded_instruction_hash(self, path: str) -> str | None:
        return self.cursor.instruction_hash(path)

    def active_path(self) -> Sequence[Node]:
        return self.cursor.path

    def visible_tip(self) -> str | None:
        for node in reversed(self.cursor.path):
            if is_skipped_assistant(node) is None:
                return node.node_id
        return None

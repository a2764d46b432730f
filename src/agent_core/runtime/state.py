"""Live run and session state held by one runtime (runtime.md §6, §7.6)."""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from agent_core.events.stream import EventChannel
from agent_core.loop.cursor import AgentCursor
from agent_core.types.content import ErrorPayload
from agent_core.types.enums import AgentRole, AgentType, EndReason, RunMode, RunStatus
from agent_core.types.runtime import ChildAgentResult, UserMessage


@dataclass(eq=False, kw_only=True)
class RunState:
    """One run's mutable state; ``RunHandle`` exposes a read-only view of it."""

    run_id: str
    session_id: str
    agent_id: str
    mode: RunMode
    role: AgentRole
    agent_type: AgentType
    status: RunStatus
    channel: EventChannel
    purpose: str | None = None
    message: UserMessage | None = None
    end_reason: EndReason | None = None
    error: ErrorPayload | None = None
    parent: RunState | None = None
    children: dict[str, RunState] = field(default_factory=dict)
    cancel_event: asyncio.Event = field(default_factory=asyncio.Event)
    cancel_reason: str | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[Any] | None = None
    was_queued: bool = False
    child_result: ChildAgentResult | None = None
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def terminal(self) -> bool:
        return self.status.terminal

    def finish(self, status: RunStatus, end_reason: EndReason | None, error: ErrorPayload | None) -> None:
        """Moves to a terminal status exactly once and closes the event channel."""
        if self.status.terminal:
            return
        self.status = status
        self.end_reason = end_reason
        self.error = error
        self.channel.close()
        self.done.set()


@dataclass(eq=False, kw_only=True)
class SessionState:
    """A session loaded into this runtime: its root cursor, active run and FIFO queue."""

    session_id: str
    mode: RunMode
    root_agent_id: str
    cwd: str
    cursor: AgentCursor
    active_node_id: str | None = None
    active: RunState | None = None
    queue: deque[RunState] = field(default_factory=deque)
    session_started: bool = False
    live_runs: dict[str, RunState] = field(default_factory=dict)
    """Every non-terminal run of the session in this runtime (root, children, compact forks)."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def busy(self) -> bool:
        return self.active is not None or bool(self.queue)

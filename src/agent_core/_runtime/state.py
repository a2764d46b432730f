"""Live run and session state held by one runtime (runtime.md §6, §7.6)."""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_core._concurrency import CancelEvent
from agent_core._events.stream import EventChannel
from agent_core._loop._limits import Budget
from agent_core._loop.cursor import AgentCursor
from agent_core._loop.outcome import LoopOutcome
from agent_core._loop.recorder import RunRecorder
from agent_core.config.model import ResolvedModelConfig
from agent_core.types.content import ErrorPayload
from agent_core.types.enums import AgentRole, AgentType, EndReason, RunMode, RunStatus
from agent_core.types.model import SystemBlock
from agent_core.types.runtime import ChildAgentResult, UserMessage

if TYPE_CHECKING:
    from agent_core._loop._output import OutputSchema


@dataclass(eq=False, kw_only=True, slots=True)
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
    cancel_event: asyncio.Event = field(default_factory=CancelEvent)
    cancel_reason: str | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[Any] | None = None
    was_queued: bool = False
    child_result: ChildAgentResult | None = None
    recorder: RunRecorder = field(init=False, repr=False)
    """The run's write side, attached at registration (``lifecycle.attach_recorder``)."""
    model: ResolvedModelConfig | None = None
    cursor: AgentCursor | None = None
    """The agent's own cursor (child and compact runs; a root run uses its session's)."""
    budget: Budget | None = None
    """The limits budget of the run's tree (opened by the root run, shared by its descendants)."""
    output_schema: OutputSchema | None = None
    output_retries: int | None = None
    output_value: Any = None
    output_accepted: bool = False
    # child runs (agents/children.py)
    parent_tool_call_id: str | None = None
    """The parent's agent-tool call that started this run."""
    definition_block: SystemBlock | None = None
    """The ``agent_definition:<id>`` dynamic block of a child run."""
    launched_by: object | None = None
    """The launcher that started this child run (cancel propagation)."""
    outcome: LoopOutcome | None = None
    timed_out: bool = False
    cancel_watcher: asyncio.Future[None] | None = None
    finalized: bool = False

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


@dataclass(eq=False, kw_only=True, slots=True)
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

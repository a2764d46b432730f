"""Live run and session state held by one runtime (docs/runs.md#starting-a-run,
docs/runs.md#the-session-queue)."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
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
from agent_core.types.permissions import PermissionMode
from agent_core.types.runtime import ChildAgentResult, UserMessage

if TYPE_CHECKING:
    from agent_core._context.prompt import DynamicSource
    from agent_core._loop._output import OutputSchema
    from agent_core.tools.context import WorkerTaskScope
    from agent_core.types.inbox import InboxEntry


@dataclass(eq=False, kw_only=True, slots=True)
class RootRunOptions:
    """What one root run adds to its session's runs (an autonomous teammate's claimed Task step)."""

    trigger: str
    """Why the run started without a user message (``runs.metadata_json.trigger``)."""
    run_id: str | None = None
    """The run's id when its starter fixed it beforehand (a step claimed for it)."""
    first_note: str | None = None
    """A synthetic ``system_note`` written as the run's first node."""
    first_note_metadata: dict[str, Any] = field(default_factory=dict)
    task_scope: WorkerTaskScope | None = None
    """The Task step the run works (``RunScope.task_scope``)."""
    task_session_id: str | None = None
    """The session whose Task board it works on (``RunScope.task_session_id``)."""
    extra_tools: frozenset[str] = frozenset()
    """Tool names added to the run's effective set (the Task step tools of a claimed step)."""
    on_ended: Callable[[RunState], Awaitable[None]] | None = None
    """Called once the run is terminal (the claimed step's worker-run-end fallback)."""


@dataclass(eq=False, kw_only=True, slots=True)
class SessionProfile:
    """How the root runs of a session differ from a plain main agent's: a teammate's session (set by the
    team feature when the session is created or loaded)."""

    name: str
    """The teammate's name (its lead addresses it by it)."""
    model: ResolvedModelConfig | None = None
    remove_tools: frozenset[str] = frozenset()
    extra_tools: frozenset[str] = frozenset()
    dynamic_sources: Sequence[DynamicSource] = ()
    workdir: Path | None = None
    """Project directory, cwd and write root of the runs (a worktree) instead of the project."""
    budget: Callable[[], Budget] | None = None
    """The ``[limits]`` budget the runs spend (the lead's)."""
    on_drained: Callable[[RunState, Sequence[InboxEntry]], Awaitable[LoopOutcome | None]] | None = None
    """After the run's inbox note was written: an outcome ends the run (a shutdown request)."""
    closed: str | None = None
    """Why the agent takes no more inbox entries (a stopped teammate); ``None`` while it does."""


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
    permission_mode: PermissionMode = "default"
    """How the run's permission requests are decided (inherited by its child runs)."""
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
    max_turns: int | None = None
    """The run's own turn limit (``AgentRuntime.start(max_turns=...)``), else the configured one."""
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
    root_options: RootRunOptions | None = None
    """A root run started without a user message for a reason other than its inbox (``None``: a user or
    wake-up run)."""

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
    store_seen: int = -1
    """The store's ``writes_elsewhere()`` when this state last matched the store: another value at a run's
    start means another process may have moved the session on (it is read again)."""
    live_elsewhere: bool = False
    """Crash recovery last found runs of the session that another live process (or store) runs: the next
    root run looks again (that process may have died without writing)."""
    profile: SessionProfile | None = None
    """A teammate's session: how its root runs differ (``None``: a plain session)."""

    @property
    def busy(self) -> bool:
        return self.active is not None or bool(self.queue)

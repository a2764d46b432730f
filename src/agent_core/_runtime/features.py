"""The optional features the runs of one runtime call into, as typed members
(docs/architecture.md#assembling-an-open-runtime).

:class:`RunFeatures` is built once, in a fixed order, by ``agent_core._api.wiring.open_services`` and handed
to the :class:`~agent_core._runtime.runs.RunManager`; a member is ``None`` when its feature is off. Each
member is typed by the protocol below that says what the run manager calls, and when:

==================  ===========================================================================
member              called
==================  ===========================================================================
``context``         every agent run: the instruction catalog and instruction/skill blocks
``children``        a run's cancel request: cancel requests to its child runs (agents)
``tasks``           orchestrator starts, before a root run's loop, the ``<task_board>`` text
``compaction``      every non-compact agent run: its loop's compaction hooks; runtime close
``memory``          root run start/end, the memory catalog block; runtime close
``jobs``            before a root run's loop, a run's cancel request
``telemetry``       every delivered event of every run; runtime close
``engine``          a root run leaving the queue runs there instead of in this process
``inbox``           every agent run: its inbox drain before each model step; a root run's end
``team``            a session loaded from the store; a root run's end (teammates)
==================  ===========================================================================

The protocols keep this module free of the feature packages (which build on the run manager), so the
imports point one way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from agent_core._context.prompt import DynamicSource
from agent_core._loop.cursor import AgentCursor
from agent_core._loop.spec import CompactionHooks, InboxHook, NoCompaction
from agent_core._runtime.state import RunState, SessionState
from agent_core.tools._effective import EffectiveTools
from agent_core.types.enums import AgentRole
from agent_core.types.model import SystemBlock
from agent_core.types.runtime import Node, RuntimeEvent, TaskInspectView

TaskBoard = Callable[[], str | None]


class ContextSources(Protocol):
    """The instruction catalog (static block) and the per-run instruction and skill blocks."""

    def instruction_catalog(self) -> SystemBlock | None: ...

    def dynamic_sources(
        self, state: RunState, role: AgentRole, effective: EffectiveTools
    ) -> list[DynamicSource]: ...


class ChildRuns(Protocol):
    async def on_parent_cancel(self, parent: RunState) -> None:
        """Requests the cancel of every active child run of ``parent``."""
        ...

    async def close(self) -> None:
        """Runtime close, after the runs: nothing of the child runs keeps running."""
        ...


class TaskOrchestration(Protocol):
    async def check(self) -> None:
        """Before an orchestrator run is registered: ``config_error`` when no valid worker pool remains."""
        ...

    async def before_root_run(self, state: RunState) -> None:
        """Restores the session's Tasks before the first model request
        (docs/task-board.md#restore-and-replay)."""
        ...

    def task_board_for(self, state: RunState, role: AgentRole) -> TaskBoard | None: ...

    async def task_views(self, session_id: str) -> list[TaskInspectView]:
        """The session's Tasks for replay (an unloaded session is read without restoring it)."""
        ...

    def active_wal_paths(self) -> list[Path]:
        """The Task WALs of the loaded sessions (never removed by cleanup)."""
        ...


class Compaction(Protocol):
    def hooks_for(self, state: RunState, cursor: AgentCursor, role: AgentRole) -> CompactionHooks: ...

    async def close(self) -> None: ...


class Memory(Protocol):
    def dynamic_sources(
        self, state: RunState, role: AgentRole, effective: EffectiveTools
    ) -> list[DynamicSource]: ...

    def on_run_start(self, state: RunState) -> None: ...

    async def on_run_end(self, state: RunState) -> None: ...

    async def close(self) -> None: ...


class Jobs(Protocol):
    async def before_root_run(self, state: RunState) -> None: ...

    async def on_run_cancel(self, state: RunState) -> None: ...


class InboxRuns(Protocol):
    def hook_for(self, state: RunState, effective: EffectiveTools) -> InboxHook | None:
        """The run's inbox drain (``LoopSpec.inbox``); ``None`` for runs that read no inbox."""
        ...

    async def before_first_node(self, state: RunState, effective: EffectiveTools) -> bool:
        """A root run of a user message: the unread entries as one note before the message; whether one
        was written."""
        ...

    async def after_root_run(self, session: SessionState, state: RunState) -> None:
        """A root run ended: a wake-up run when entries that asked for one are still unread."""
        ...


class TeamRuns(Protocol):
    async def on_session_loaded(self, session: SessionState) -> None:
        """Sets ``session.profile`` when the session is a teammate's."""
        ...

    def observe(self, event: RuntimeEvent) -> None:
        """Every delivered event (teammates' events feed their lead's watchers; must not raise)."""
        ...

    async def close(self) -> None: ...

    async def after_root_run(self, session: SessionState, state: RunState) -> None:
        """A root run of a session ended (a teammate goes idle or stops; autonomous ones claim)."""
        ...


class RootEngine(Protocol):
    async def run_root(self, session: SessionState, state: RunState) -> None:
        """Runs the root run elsewhere (``agent_core.engine``); leaves ``state`` terminal."""
        ...


class Telemetry(Protocol):
    def __call__(self, event: RuntimeEvent) -> None:
        """Observes one delivered event (must not raise)."""
        ...

    async def close(self) -> None: ...


@dataclass(eq=False, kw_only=True, slots=True)
class RunFeatures:
    """The features of one open runtime (``None``: off). See the module docstring for when each is called."""

    context: ContextSources | None = None
    children: ChildRuns | None = None
    tasks: TaskOrchestration | None = None
    compaction: Compaction | None = None
    memory: Memory | None = None
    jobs: Jobs | None = None
    telemetry: Telemetry | None = None
    engine: RootEngine | None = None
    inbox: InboxRuns | None = None
    team: TeamRuns | None = None

    @property
    def event_observers(self) -> list[Callable[[RuntimeEvent], None]]:
        """What a run's recorder hands every delivered event to."""
        observers: list[Callable[[RuntimeEvent], None]] = []
        if self.telemetry is not None:
            observers.append(self.telemetry)
        if self.team is not None:
            observers.append(self.team.observe)
        return observers

    def instruction_catalog(self, role: AgentRole) -> SystemBlock | None:
        if self.context is None or role == AgentRole.compact:
            return None
        return self.context.instruction_catalog()

    def dynamic_sources(
        self, state: RunState, role: AgentRole, effective: EffectiveTools
    ) -> list[DynamicSource]:
        """The feature blocks of one run, in prompt order: instructions and skills, the child's agent
        definition, the memory catalog."""
        sources: list[DynamicSource] = []
        if self.context is not None:
            sources.extend(self.context.dynamic_sources(state, role, effective))
        block = state.definition_block
        if block is not None and role not in (AgentRole.main, AgentRole.orchestrator):
            sources.append(_fixed(block))
        if self.memory is not None:
            sources.extend(self.memory.dynamic_sources(state, role, effective))
        return sources

    def compaction_for(self, state: RunState, cursor: AgentCursor, role: AgentRole) -> CompactionHooks:
        if self.compaction is None:
            return NoCompaction()
        return self.compaction.hooks_for(state, cursor, role)

    def task_board_for(self, state: RunState, role: AgentRole) -> TaskBoard | None:
        return self.tasks.task_board_for(state, role) if self.tasks is not None else None


def _fixed(block: SystemBlock) -> DynamicSource:
    def source(_path: Sequence[Node]) -> list[SystemBlock]:
        return [block]

    return source

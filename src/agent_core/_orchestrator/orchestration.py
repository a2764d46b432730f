"""Orchestrator mode of one runtime: :class:`Orchestration`, built on first use by
:class:`agent_core._orchestrator.feature.TaskFeature` (``RunFeatures.tasks``).

It creates one :class:`TaskRegistry` per runtime (``task.wal_dir``, ``task.step_lease_timeout_ms``, pool
ids = the valid worker pools, artifact checks against the session's artifacts, Task-level cancellation
of holder worker runs, out-of-call Task events persisted to the session's events with the actor's ids),
and the Task tool adapter and the worker/plan tool adapter (registered by the feature).
:class:`Orchestration` answers the run manager: :meth:`~Orchestration.check` (``config_error`` when no
valid pool remains, so ``runtime.start(mode="orchestrator")`` fails before any run row),
:meth:`~Orchestration.before_root_run` (restores the session's Tasks before the first model request,
docs/task-board.md#restore-and-replay, and reports each invalid pool with an ``error`` event on an
Orchestrator run), :meth:`~Orchestration.task_board_for` (the ``<task_board>`` text,
docs/context.md#the-task-board-summary), and replay/cleanup (:meth:`~Orchestration.task_views`,
:meth:`~Orchestration.active_wal_paths`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agent_core._agents.feature import Agents
from agent_core._orchestrator.dispatch import WorkerDispatcher
from agent_core._orchestrator.pools import WorkerPools
from agent_core._orchestrator.tools import OrchestratorToolAdapter
from agent_core._runtime.runs import RunManager
from agent_core._runtime.state import RunState
from agent_core._storage.drafts import EventDraft
from agent_core._tasks import CORE, Actor, TaskCaller, TaskRegistry, TaskToolAdapter
from agent_core._tasks.tools import board_session
from agent_core.tools.adapter import ToolAdapter
from agent_core.tools.context import ToolContext
from agent_core.types import events as ev
from agent_core.types.base import utc_now
from agent_core.types.enums import AgentRole
from agent_core.types.model import ToolCall
from agent_core.types.runtime import TaskInspectView


class Orchestration:
    """The Task board and worker pools of one runtime (``RunFeatures.tasks``)."""

    def __init__(
        self, manager: RunManager, agents: Agents, board_listeners: Sequence[Callable[[str], None]] = ()
    ) -> None:
        self.manager = manager
        services = manager.services
        settings = services.settings
        self.pools = WorkerPools(settings)
        self._definitions = agents.registry
        self.task_registry = TaskRegistry(
            project=services.config.project,
            wal_dir=Path(settings.task.wal_dir),
            lease_timeout_ms=settings.task.step_lease_timeout_ms,
            emit=self._session_emit,
            pool_ids=self._pool_ids,
            artifact_exists=self._artifact_exists,
            cancel_worker_runs=self._cancel_worker_runs,
            child_cancel_timeout_ms=settings.agents.child_cancel_timeout_ms,
            writer=services.storage.task_wal_writer(),
        )
        self.dispatcher = WorkerDispatcher(
            manager, self.pools, self.task_registry, agents.registry, agents.launcher
        )
        task_tools: Any = TaskToolAdapter(
            self.task_registry, template_loader=services.assets.load, redactor=services.redactor
        )
        # docs/multi-agent.md#autonomous-workers (issue 22)
        if any(pool.autonomous for pool in settings.agents.worker_pools):
            from agent_core._orchestrator.autonomous import AutonomousTaskTools, AutonomousWorkers

            task_tools = AutonomousTaskTools(task_tools, AutonomousWorkers(self.dispatcher))
        self.task_tools: ToolAdapter = BoardNotifier(task_tools, board_listeners)
        """Serves the ``agent.task_*`` tools (registered with their static definitions by the feature)."""
        self.orchestrator_tools: ToolAdapter = OrchestratorToolAdapter(manager, self.dispatcher)

    def pool_id(self, pool_id: str | None) -> str:
        """A valid worker pool id (``None``: the default pool); unknown or invalid → ``validation_error``."""
        self._pool_ids()
        return self.pools.resolve_pool(pool_id)

    # ---- the TaskRegistry's callbacks ---------------------------------------------------------------
    def _validate_pools(self) -> None:
        services = self.manager.services
        servers = set(services.mcp.catalog.servers) if services.mcp is not None else set()
        self.pools.validate(self._definitions, services.tools.definitions(), mcp_servers=servers)

    def _pool_ids(self) -> list[str]:
        if not self.pools.validated:
            self._validate_pools()
        return self.pools.valid_ids()

    async def _session_emit(self, session_id: str, event: ev.EventPayload, actor: Actor) -> None:
        """Task events outside a tool call (restore, worker-run-end fallback): persisted with the actor."""
        state = self.manager.runs.get(actor.run_id) if actor.run_id else None
        if state is not None and not state.terminal:
            await state.recorder.emit(event)
            return
        await self.manager.services.storage.append(
            session_id,
            events=[
                EventDraft.of(
                    event,
                    agent_id=None if actor.agent_id == CORE.agent_id else actor.agent_id,
                    run_id=actor.run_id,
                    created_at=utc_now(),
                )
            ],
        )

    async def _artifact_exists(self, session_id: str, artifact_id: str) -> bool:
        record = await self.manager.services.storage.get_artifact(artifact_id)
        return record is not None and record.session_id == session_id

    async def _cancel_worker_runs(self, run_ids: list[str], reason: str) -> None:
        await self.dispatcher.cancel_worker_runs(run_ids, reason)

    # ---- RunFeatures.tasks ----------------------------------------------------------------------------
    async def check(self) -> None:
        self._validate_pools()
        self.pools.require_valid()

    async def before_root_run(self, state: RunState) -> None:
        await self.task_registry.get(state.session_id)
        if state.role != AgentRole.orchestrator:
            return
        for problem in self.pools.problems:
            error = problem.error().to_payload(self.manager.services.redactor)
            await state.recorder.emit(ev.Error(error.model_dump(mode="json")))

    def task_board_for(self, state: RunState, role: AgentRole) -> Callable[[], str | None] | None:
        def board() -> str | None:
            service = self.task_registry.peek(state.session_id)
            if service is None or not service.active_dags():
                return None
            if role not in (AgentRole.orchestrator, AgentRole.worker) and not service.has_attention_items():
                return None
            caller = TaskCaller(agent_id=state.agent_id, run_id=state.run_id, role=role)
            return self.dispatcher.board(service, caller)

        return board

    async def task_views(self, session_id: str) -> list[TaskInspectView]:
        return await self.task_registry.reader(session_id).inspect_views()

    def active_wal_paths(self) -> list[Path]:
        paths: list[Path] = []
        for session_id in list(self.manager.sessions):
            service = self.task_registry.peek(session_id)
            if service is not None:
                paths.extend(service.active_wal_paths())
        return paths


class BoardNotifier:
    """Wraps the Task tool adapter: after each call the listeners learn which session's board it used."""

    def __init__(self, inner: Any, listeners: Sequence[Callable[[str], None]]) -> None:
        self._inner = inner
        self._listeners = listeners

    def definitions(self) -> Any:
        return self._inner.definitions()

    async def execute(self, call: ToolCall, ctx: ToolContext) -> Any:
        try:
            return await self._inner.execute(call, ctx)
        finally:
            session_id = board_session(ctx)
            for listener in self._listeners:
                listener(session_id)

    async def close(self) -> None:
        await self._inner.close()

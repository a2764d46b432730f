"""Wires orchestrator mode into a :class:`RunManager` (called once from ``open_services``).

:func:`install` must run after :func:`agent_core.agents.tools.install` (it uses
``services.extras["agent_definitions"]`` and ``["child_launcher"]``). It creates:

* one :class:`TaskRegistry` per runtime (``task.wal_dir``, ``task.step_lease_timeout_ms``, pool ids =
  the valid worker pools, artifact checks against the session's artifacts, Task-level cancellation of
  holder worker runs, out-of-call Task events persisted to the session's events with the actor's ids);
* the Task tool adapter and the worker/plan tool adapter (privileged registration);
* ``manager.orchestrator_check``: validates the pools (references) and raises ``config_error`` when no
  valid pool remains, so ``runtime.start(mode="orchestrator")`` fails before any run row;
* ``manager.before_root_run``: restores the session's Tasks before the first model request
  (task-board.md §2.5) and reports each invalid pool with an ``error`` event on an Orchestrator run;
* ``manager.task_board_for``: the ``<task_board>`` text for root runs (context.md §13.2);
* ``services.extras["task_views"]`` (async ``session_id -> list[TaskInspectView]`` for replay; an unloaded
  session is read without restoring it), ``["active_wal_paths"]`` (for Task WAL cleanup),
  ``["task_registry"]`` and ``["worker_dispatcher"]``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_core.agents.children import ChildLauncher
from agent_core.agents.registry import AgentDefinitionRegistry
from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.events.catalog import level_of
from agent_core.orchestrator.dispatch import WorkerDispatcher
from agent_core.orchestrator.pools import WorkerPools
from agent_core.orchestrator.tools import OrchestratorToolAdapter
from agent_core.runtime.runs import RunManager
from agent_core.runtime.state import RunState
from agent_core.storage.drafts import EventDraft
from agent_core.tasks import CORE, Actor, TaskCaller, TaskRegistry, TaskService, TaskToolAdapter
from agent_core.types.base import utc_now
from agent_core.types.enums import AgentRole, EventType
from agent_core.types.runtime import TaskInspectView


@dataclass(eq=False, kw_only=True)
class Orchestration:
    """What :func:`install` wired (kept in ``services.extras["orchestration"]``)."""

    pools: WorkerPools
    tasks: TaskRegistry
    dispatcher: WorkerDispatcher


def install(manager: RunManager) -> Orchestration:
    services = manager.services
    settings = services.settings
    definitions = services.extras.get("agent_definitions")
    launcher = services.extras.get("child_launcher")
    if not isinstance(definitions, AgentDefinitionRegistry) or not isinstance(launcher, ChildLauncher):
        raise AgentCoreError(ErrorCode.internal_error, "orchestrator install needs the multi-agent services")
    pools = WorkerPools(settings)

    def validate_pools() -> None:
        mcp = services.extras.get("mcp")
        servers = set(mcp.catalog.servers) if mcp is not None else set()
        pools.validate(definitions, services.tools.definitions(), mcp_servers=servers)

    def pool_ids() -> list[str]:
        if not pools.validated:
            validate_pools()
        return pools.valid_ids()

    async def session_emit(
        session_id: str, event_type: EventType, payload: dict[str, Any], actor: Actor
    ) -> None:
        """Task events outside a tool call (restore, worker-run-end fallback): persisted with the actor."""
        state = manager.runs.get(actor.run_id) if actor.run_id else None
        if state is not None and not state.terminal:
            await state.recorder.emit(event_type, payload)
            return
        await services.storage.append(
            session_id,
            events=[
                EventDraft(
                    event_type=event_type,
                    agent_id=None if actor.agent_id == CORE.agent_id else actor.agent_id,
                    run_id=actor.run_id,
                    level=level_of(event_type),
                    payload=payload,
                    created_at=utc_now(),
                )
            ],
        )

    async def artifact_exists(session_id: str, artifact_id: str) -> bool:
        record = await services.storage.get_artifact(artifact_id)
        return record is not None and record.session_id == session_id

    holder: list[WorkerDispatcher] = []

    async def cancel_worker_runs(run_ids: list[str], reason: str) -> None:
        await holder[0].cancel_worker_runs(run_ids, reason)

    wal_dir = Path(settings.task.wal_dir)
    project = services.config.project
    registry = TaskRegistry(
        project=project,
        wal_dir=wal_dir,
        lease_timeout_ms=settings.task.step_lease_timeout_ms,
        emit=session_emit,
        pool_ids=pool_ids,
        artifact_exists=artifact_exists,
        cancel_worker_runs=cancel_worker_runs,
        child_cancel_timeout_ms=settings.agents.child_cancel_timeout_ms,
        writer=services.storage.task_wal_writer(),
    )
    dispatcher = WorkerDispatcher(manager, pools, registry, definitions, launcher)
    holder.append(dispatcher)
    task_tools: Any = TaskToolAdapter(
        registry, template_loader=services.assets.load, redactor=services.redactor
    )
    if any(pool.autonomous for pool in settings.agents.worker_pools):  # surfaces.md §6 (issue 22)
        from agent_core.orchestrator.autonomous import AutonomousTaskTools, AutonomousWorkers

        task_tools = AutonomousTaskTools(task_tools, AutonomousWorkers(dispatcher))
    services.tools.register_adapter(task_tools, internal=True)
    services.tools.register_adapter(OrchestratorToolAdapter(manager, dispatcher), internal=True)

    async def orchestrator_check() -> None:
        validate_pools()
        pools.require_valid()

    async def before_root_run(state: RunState) -> None:
        await registry.get(state.session_id)
        if state.role != AgentRole.orchestrator:
            return
        for problem in pools.problems:
            error = problem.error().to_payload(services.redactor)
            await state.recorder.emit(EventType.error, error.model_dump(mode="json"))

    def task_board_for(state: RunState, role: AgentRole) -> Callable[[], str | None] | None:
        def board() -> str | None:
            service = registry.peek(state.session_id)
            if service is None or not service.active_dags():
                return None
            if role not in (AgentRole.orchestrator, AgentRole.worker) and not service.has_attention_items():
                return None
            caller = TaskCaller(agent_id=state.agent_id, run_id=state.run_id, role=role)
            return dispatcher.board(service, caller)

        return board

    async def task_views(session_id: str) -> list[TaskInspectView]:
        service = registry.peek(session_id)
        if service is None:
            service = TaskService(session_id, wal_dir, project, settings.task.step_lease_timeout_ms)
        return service.inspect_views()

    def active_wal_paths() -> list[Path]:
        paths: list[Path] = []
        for session_id in list(manager.sessions):
            service = registry.peek(session_id)
            if service is not None:
                paths.extend(service.active_wal_paths())
        return paths

    manager.orchestrator_check = orchestrator_check
    manager.before_root_run.append(before_root_run)
    manager.task_board_for = task_board_for
    orchestration = Orchestration(pools=pools, tasks=registry, dispatcher=dispatcher)
    services.extras["task_views"] = task_views
    services.extras["active_wal_paths"] = active_wal_paths
    services.extras["task_registry"] = registry
    services.extras["worker_dispatcher"] = dispatcher
    services.extras["orchestration"] = orchestration
    return orchestration

"""A dispatched worker run as a worker process executes it (docs/scale-out.md;
docs/multi-agent.md#worker-pools, docs/multi-agent.md#agentlist_workers,
docs/multi-agent.md#dispatching-a-worker).

The Orchestrator's side admitted the run and wrote its agent and run rows (``runs.metadata_json`` holds
the definition, ``allowed_tools``, the pool, the worker and the Task scope); the child workflow's steps
execute it here. :func:`worker_run_loop` builds the run's state and loop from those rows exactly as
:class:`~agent_core._agents.children.ChildLauncher` does in process — the same model resolution,
effective tools, Task scope, ``agent_definition`` block, Task board and first ``<worker_dispatch>`` node —
so the run's nodes, events and Task WAL records are the local engine's. Its ``[limits]`` budget starts from
the Orchestrator tree's consumption at dispatch and its interruption is a local child run's (``aborted``
with error code ``timeout`` when the dispatch timed out): see :mod:`._worker_handoff`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent_core._agents.children import _interruption as child_interruption
from agent_core._agents.feature import Agents
from agent_core._events.stream import EventChannel
from agent_core._ids import new_id
from agent_core._loop.cursor import AgentCursor
from agent_core._loop.spec import LoopSpec
from agent_core._orchestrator.feature import TaskFeature
from agent_core._runtime.agent_run import AgentRunSpec, prepare_agent_loop
from agent_core._runtime.runs import RunManager
from agent_core._runtime.state import RunState, SessionState
from agent_core._tasks import TaskCaller, WorkerTaskScope
from agent_core.config.schema import worker_entries
from agent_core.engine.temporal._worker_handoff import start_budget
from agent_core.errors import ConfigError, ErrorCode, InternalError
from agent_core.permissions._modes import stored_permission_mode
from agent_core.tools._effective import compute_effective_tools
from agent_core.tools.context import RunScope
from agent_core.types import events as ev
from agent_core.types.content import TextBlock, text_of
from agent_core.types.enums import AgentRole, AgentType, MessageRole, NodeType, RunMode, RunStatus
from agent_core.types.runtime import UserMessage
from agent_core.types.storage import RunRecord


def is_worker_run(meta: dict[str, Any]) -> bool:
    """Whether a run's metadata is a dispatched worker run's."""
    return meta.get("agent_role") == AgentRole.worker.value and "worker_pool_id" in meta


async def worker_run_loop(
    manager: RunManager,
    session: SessionState,
    run: RunRecord,
    meta: dict[str, Any],
    message: UserMessage | None,
) -> tuple[RunState, LoopSpec]:
    """The worker run's state and loop; with ``message`` (its first step) ``loop_started`` and the
    ``<worker_dispatch>`` node are written unless already stored."""
    services = manager.services
    agents = manager.features.children
    tasks = manager.features.tasks
    if not isinstance(agents, Agents) or not isinstance(tasks, TaskFeature):
        raise InternalError(ErrorCode.internal_error, "a worker run needs the multi-agent and Task features")
    definition = agents.registry.get(str(meta.get("agent_definition_id")))
    if definition is None:
        raise ConfigError(
            ErrorCode.config_error,
            f"worker run {run.run_id}: agent definition {meta.get('agent_definition_id')!r} is not known "
            "to this worker (its config and agent definitions must match the orchestrator's)",
        )
    pool_id, worker_id = str(meta["worker_pool_id"]), str(meta["worker_id"])
    entry = next(
        (w for w in worker_entries(services.settings) if (w.pool_id, w.worker_id) == (pool_id, worker_id)),
        None,
    )
    if entry is None:
        raise ConfigError(
            ErrorCode.config_error,
            f"worker {worker_id!r} of pool {pool_id!r} is not configured on this worker "
            "(agents.worker_pools must match the orchestrator's)",
            details={"config_keys": ["agents.worker_pools"]},
        )
    policy = (
        agents.launcher.model_policy(definition, AgentRole.worker) if agents.launcher.model_policy else None
    )
    model = agents.registry.resolve_model(definition, purpose=AgentRole.worker.value, policy=policy)
    allowed = meta.get("allowed_tools")
    effective = compute_effective_tools(
        services.tools.definitions(),
        services.settings,
        AgentRole.worker,
        requested=list(allowed) if allowed is not None else None,
        worker_entry_tools=entry.allowed_tools,
    )
    started = run.start_node_id is not None
    cursor = AgentCursor(run.agent_id, await _path(manager, session, run, started))
    state = RunState(
        run_id=run.run_id,
        session_id=run.session_id,
        agent_id=run.agent_id,
        mode=RunMode(meta.get("mode", RunMode.orchestrator.value)),
        role=AgentRole.worker,
        agent_type=AgentType.sub,
        status=RunStatus.pending,
        channel=EventChannel(buffer_before_subscribe=False),
        purpose="worker",
        permission_mode=stored_permission_mode(meta, services.settings),
        model=model,
        cursor=cursor,
        parent_tool_call_id=meta.get("tool_call_id"),
        definition_block=agents.registry.definition_block(definition),
        message=message or UserMessage(content="(continued)"),
    )
    manager.recorder_for(state, cursor, root_agent=False)
    allowed_steps = meta.get("allowed_step_ids")
    scope = WorkerTaskScope(
        task_id=str(meta["task_id"]),
        worker_pool_id=pool_id,
        worker_agent_id=worker_id,
        allowed_step_ids=tuple(allowed_steps) if allowed_steps is not None else None,
    )
    orchestration = tasks.load()
    service = await orchestration.task_registry.get(run.session_id)
    caller = TaskCaller(agent_id=run.agent_id, run_id=None, role=AgentRole.worker, worker_scope=scope)
    node_id = new_id("node_")
    parent_agent_id, parent_run_id = meta.get("parent_agent_id"), meta.get("parent_run_id")
    spec = AgentRunSpec(
        state=state,
        session=session,
        cursor=cursor,
        model=model,
        effective=effective,
        role=AgentRole.worker,
        root_agent=False,
        current_user_node_id=node_id,
        parent_agent_id=parent_agent_id,
        parent_run_id=parent_run_id,
        task_scope=scope,
        workdir=Path(meta["workdir"]) if meta.get("workdir") else None,
        purpose="worker",
        agent_type=AgentType.sub,
        task_board=lambda: orchestration.dispatcher.board(service, caller),
        interruption=lambda: child_interruption(state),
    )
    first_text = text_of(state.message.content) if state.message is not None else ""

    async def first_nodes(_scope: RunScope) -> None:
        metadata = {
            "synthetic": True,
            "source": "agent_tool",
            "parent_agent_id": parent_agent_id,
            "parent_run_id": parent_run_id,
            "tool_call_id": meta.get("tool_call_id"),
            "agent_definition_id": definition.agent_definition_id,
            "task_id": scope.task_id,
            "allowed_step_ids": allowed_steps,
            "worker_pool_id": pool_id,
            "worker_id": worker_id,
        }
        await state.recorder.write_node(
            node_id=node_id,
            role=MessageRole.user,
            node_type=NodeType.message,
            content=[TextBlock(text=first_text)],
            metadata=metadata,
            events=[(ev.MessageCreated(text_preview=first_text[:200]), None)],
            run_update={"start_node_id": node_id},
        )

    loop = await prepare_agent_loop(services, manager.features, spec, first_nodes, started=started)
    if loop.limits is not None:  # a checkpoint, when the run has one, restores it afterwards
        start_budget(loop.limits.budget, meta)
    return state, loop


async def _path(manager: RunManager, session: SessionState, run: RunRecord, started: bool) -> list[Any]:
    """The worker's active path: its tree root before the run starts, else up to the run's last node."""
    storage = manager.services.storage
    if started:
        nodes = await storage.list_nodes(run.session_id, run_id=run.run_id)
        return await storage.node_path(run.session_id, nodes[-1].node_id) if nodes else []
    agent = await storage.get_agent(run.agent_id)
    root_id = json.loads(agent.metadata_json or "{}").get("root_node_id") if agent is not None else None
    if not isinstance(root_id, str):
        raise InternalError(ErrorCode.internal_error, f"worker agent {run.agent_id} has no context tree root")
    return await storage.node_path(session.session_id, root_id)

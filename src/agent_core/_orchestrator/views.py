"""``AgentRuntime.list_worker_pools``: every configured pool with its validity and its workers' state.

Pools are (re)validated against the current AgentDefinitions and tools first, exactly like the start of an
orchestrator run (an invalid pool lists its problems and no workers). With a ``session_id`` a worker's
state is its state in that session (what ``agent.list_workers`` reports there); without one it is its
state in any session: ``busy``/``unavailable`` with that run's session and ids when some session has a
live run of it, else ``idle``. Reading never creates agents, runs or rows.
"""

from __future__ import annotations

import contextlib
from typing import Any

from agent_core._orchestrator.feature import TaskFeature
from agent_core._orchestrator.pools import PoolWorker, WorkerSlot
from agent_core._runtime.runs import RunManager
from agent_core.errors import AgentCoreError
from agent_core.types.workers import WorkerPoolView, WorkerView


def _view(worker: PoolWorker, **state: Any) -> WorkerView:
    definition = worker.definition
    return WorkerView(
        worker_pool_id=worker.pool_id,
        worker_agent_id=worker.worker_id,
        agent_definition_id=definition.agent_definition_id,
        name=definition.name,
        description=definition.description,
        tags=list(definition.tags),
        **state,
    )


def _slot_state(slot: WorkerSlot, step_id: str | None) -> dict[str, Any]:
    status = slot.status()
    if status == "idle" or slot.run is None:
        return {"status": status}
    return {
        "status": status,
        "session_id": slot.session_id,
        "current_run_id": slot.run.run_id,
        "current_step_id": step_id,
    }


async def worker_pools_view(manager: RunManager, session_id: str | None) -> list[WorkerPoolView]:
    tasks = manager.features.tasks
    if not isinstance(tasks, TaskFeature):
        return []
    orchestration = tasks.load()
    with contextlib.suppress(AgentCoreError):  # no valid pool: the problems are listed below
        await orchestration.check()
    pools, dispatcher = orchestration.pools, orchestration.dispatcher
    problems: dict[str, list[str]] = {}
    for problem in pools.problems:
        problems.setdefault(problem.pool_id, []).append(problem.message)
    live = {(s.worker.pool_id, s.worker.worker_id): s for s in dispatcher.slots.live()}
    default = pools.default_pool_id()
    out: list[WorkerPoolView] = []
    for pool_id in pools.configured_ids:
        workers: list[WorkerView] = []
        valid = pool_id in pools.valid_ids()
        steps: dict[str, Any] = {}
        if session_id is not None and valid:
            listed = dispatcher.list_workers(session_id, pool_id)["workers"]
            steps = {w["worker_agent_id"]: w.get("current_step_id") for w in listed}
        for worker in pools.workers(pool_id):
            if session_id is not None:
                slot = dispatcher.slots.get(session_id, worker)
                workers.append(_view(worker, **_slot_state(slot, steps.get(worker.worker_id))))
                continue
            busy = live.get((pool_id, worker.worker_id))
            workers.append(_view(worker, **(_slot_state(busy, None) if busy else {"status": "idle"})))
        out.append(
            WorkerPoolView(
                pool_id=pool_id,
                valid=valid,
                default=pool_id == default,
                problems=problems.get(pool_id, []),
                workers=workers,
            )
        )
    return out

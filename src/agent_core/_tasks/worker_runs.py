"""Runtime hooks around worker runs: dispatch checks and the worker-run-end fallback
(docs/multi-agent.md#dispatching-a-worker, docs/task-board.md#worker-run-end-fallback,
docs/task-board.md#claims-and-leases)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from agent_core._tasks.access import WorkerPools
from agent_core._tasks.dag import Actor, TaskDag
from agent_core._tasks.decide import decide_run_end
from agent_core._tasks.inputs import dedupe
from agent_core._tasks.models import TaskStep, TaskWalEvent
from agent_core._tasks.store import EmitFn, TaskStore, TerminalTask
from agent_core.errors import (
    AgentCoreError,
    ErrorCode,
    InvalidArgumentError,
    PermissionDeniedError,
    TaskError,
)
from agent_core.types import events as ev
from agent_core.types.enums import TaskStatus

logger = logging.getLogger("agent_core._tasks")

WorkerRunEnding = Literal["completed", "failed", "cancelled", "timeout"]
"""How a worker run ended; ``failed`` maps to the same fallback reason as ``completed``
(docs/task-board.md#worker-run-end-fallback)."""
_END_REASONS: dict[str, str] = {
    "completed": "worker_finished_without_terminal_step_status",
    "failed": "worker_finished_without_terminal_step_status",
    "cancelled": "worker_cancelled",
    "timeout": "worker_timeout",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class DispatchCheck:
    """A dispatch request that passed the Task checks of docs/multi-agent.md#dispatching-a-worker."""

    task_id: str
    worker_pool_id: str
    allowed_step_ids: tuple[str, ...] | None


@dataclass(frozen=True, kw_only=True, slots=True)
class WorkerRunEnd:
    """Task facts for the ``agent.dispatch_worker`` result after the fallback ran
    (docs/task-board.md#worker-run-end-fallback)."""

    task_id: str
    claimed_step_id: str | None
    step_status: str | None
    step_result_summary: str | None
    no_step_claimed: bool
    wal_event_ids: list[str]


class WorkerRuns:
    """What ``agent.dispatch_worker`` needs from the Task board of one session."""

    def __init__(self, store: TaskStore, pools: WorkerPools) -> None:
        self._store = store
        self._pools = pools

    async def check_dispatchable(
        self, task_id: str, *, worker_pool_id: str | None = None, allowed_step_ids: list[str] | None = None
    ) -> DispatchCheck:
        """Task checks of ``agent.dispatch_worker`` (docs/multi-agent.md#dispatching-a-worker, steps 2, 3, 5;
        pool step 4)."""
        await self._store.load()
        target = await self._store.resolve(task_id)
        if isinstance(target, TerminalTask) or target.terminating or target.dag.status == TaskStatus.blocked:
            status = target.status if isinstance(target, TerminalTask) else target.dag.status
            raise TaskError(ErrorCode.task_not_dispatchable, f"Task {task_id} is {status}; not dispatchable")
        pool = worker_pool_id or self._pools.default_pool_id()
        if worker_pool_id is not None and not self._pools.pool_ok(worker_pool_id):
            raise InvalidArgumentError(
                ErrorCode.validation_error, f"unknown worker_pool_id {worker_pool_id!r}"
            )
        allowed: tuple[str, ...] | None = None
        if allowed_step_ids is not None:
            if not allowed_step_ids:
                raise InvalidArgumentError(ErrorCode.validation_error, "allowed_step_ids must not be empty")
            allowed = tuple(dedupe(allowed_step_ids))
            unknown = [s for s in allowed if target.dag.step(s) is None]
            if unknown:
                raise InvalidArgumentError(
                    ErrorCode.validation_error, f"unknown step ids {unknown}", details={"step_ids": unknown}
                )
            default_pool = self._pools.default_pool_id()
            foreign = []
            for step_id in allowed:
                step = target.dag.step(step_id)
                if step is not None and (step.worker_pool_id or default_pool) != pool:
                    foreign.append(step_id)
            if foreign:
                raise PermissionDeniedError(
                    ErrorCode.permission_denied,
                    f"steps {foreign} belong to another worker pool",
                    details={"step_ids": foreign},
                )
        return DispatchCheck(task_id=task_id, worker_pool_id=pool, allowed_step_ids=allowed)

    def claimed_step(self, task_id: str, run_id: str) -> TaskStep | None:
        """The step ``run_id`` claimed in ``task_id`` (active, or ended in this process), if any."""
        entry = self._store.active.get(task_id)
        tomb = self._store.tombstones.get(task_id)
        dag = entry.dag if entry is not None else (tomb.dag if tomb is not None else None)
        if dag is None:
            return None
        claimed = dag.run_claims.get(run_id)
        return dag.step(claimed) if claimed is not None else None

    async def catch_up(self, task_id: str) -> None:
        """Applies the records other processes appended to ``task_id``'s shared WAL (a worker run that
        executed elsewhere claimed and updated its steps there); nothing for a process-local WAL."""
        entry = self._store.active.get(task_id)
        if entry is None or not self._store.writer.SHARED:
            return
        async with entry.lock:
            if self._store.active.get(task_id) is entry:
                try:
                    await self._store.recheck(entry)
                except AgentCoreError:  # it became terminal meanwhile: its tombstone holds the DAG
                    pass

    async def on_worker_run_end(
        self,
        run_id: str,
        *,
        agent_id: str,
        task_id: str,
        ending: WorkerRunEnding,
        worker_agent_id: str | None = None,
        emit: EmitFn | None = None,
    ) -> WorkerRunEnd:
        """Worker-run-end fallback (docs/task-board.md#worker-run-end-fallback), run before the dispatch
        result is assembled.

        Fails the step the run still holds (reason from ``ending``), unless the Task is terminal or being
        terminated. Emits ``task_step_claim_skipped`` (``code=no_step_claimed``) if the run never claimed.
        """
        await self._store.load()
        actor = Actor(agent_id=agent_id, run_id=run_id)
        emit_fn = emit or self._store.emit
        records: list[TaskWalEvent] = []
        entry = self._store.active.get(task_id)
        dag: TaskDag | None = entry.dag if entry is not None else None
        if entry is not None and not entry.terminating:
            async with entry.lock:
                if self._store.active.get(task_id) is entry and not entry.terminating:
                    try:
                        await self._store.recheck(entry)  # a shared WAL: other processes' records
                        await self._store.reconcile(entry, actor, emit)
                        records = decide_run_end(
                            entry.dag, run_id, _END_REASONS[ending], actor=actor, now=self._store.clock()
                        )
                        await self._store.commit(entry, records, actor, emit)
                    except AgentCoreError as exc:
                        logger.warning("worker-run-end fallback for %s failed: %s", run_id, exc)
                        records = []
        if dag is None:
            tomb = self._store.tombstones.get(task_id)
            dag = tomb.dag if tomb is not None else None
        claimed = dag.run_claims.get(run_id) if dag is not None else None
        step = dag.step(claimed) if dag is not None and claimed is not None else None
        if claimed is None:
            skipped = ev.TaskStepClaimSkipped(
                task_id=task_id,
                step_id=None,
                code=ErrorCode.no_step_claimed.value,
                worker_agent_id=worker_agent_id or agent_id,
                worker_run_id=run_id,
            )
            await emit_fn(skipped, actor)
        return WorkerRunEnd(
            task_id=task_id,
            claimed_step_id=claimed,
            step_status=step.status.value if step is not None else None,
            step_result_summary=step.result_summary if step is not None else None,
            no_step_claimed=claimed is None,
            wal_event_ids=[r.event_id for r in records],
        )

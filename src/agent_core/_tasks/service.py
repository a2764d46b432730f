"""The per-session Task service: every ``agent.task_*`` operation (docs/task-board.md#task-tools).

:class:`TaskService` composes :class:`~agent_core._tasks.store.TaskStore` (state, restore, commits),
:class:`~agent_core._tasks.access.WorkerPools` (pools and worker scope),
:class:`~agent_core._tasks.reads.TaskReads` (the read operations and views) and
:class:`~agent_core._tasks.worker_runs.WorkerRuns` (dispatch checks, worker-run-end fallback), and holds the write operations below. Worker runs are identified by
``RunScope.task_scope`` (:class:`~agent_core._tasks.scope.WorkerTaskScope`); roles come from
:class:`~agent_core._tasks.scope.TaskCaller`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from agent_core._ids import validate_id
from agent_core._tasks import wal as wal_mod
from agent_core._tasks.access import (
    WorkerPools,
    require_board_role,
    require_dispatch_task,
    require_orchestrator,
)
from agent_core._tasks.dag import TaskDag
from agent_core._tasks.decide import (
    decide_claim,
    decide_complete,
    decide_create,
    decide_terminate,
    decide_update_step,
    precheck_claim,
)
from agent_core._tasks.inputs import (
    TaskClaimStepInput,
    TaskCompleteInput,
    TaskCreateInput,
    TaskTerminateInput,
    TaskUpdateInput,
    TaskUpdateStepInput,
    dedupe,
)
from agent_core._tasks.patch import decide_update
from agent_core._tasks.reads import TaskReads
from agent_core._tasks.scope import TaskCaller
from agent_core._tasks.store import ArtifactCheck, CancelWorkerRuns, EmitFn, TaskEntry, TaskStore
from agent_core._tasks.views import (
    mirror_event,
    step_view,
    write_result,
)
from agent_core._tasks.wal import WalAppendError, WalWriter
from agent_core._tasks.worker_runs import WorkerRuns
from agent_core.errors import (
    AgentCoreError,
    ErrorCode,
    FileOperationError,
    InvalidArgumentError,
    PermissionDeniedError,
    StepNotFoundError,
    StorageError,
    TaskError,
)
from agent_core.tools._paths import project_side_dir
from agent_core.types import events as ev
from agent_core.types.base import utc_now
from agent_core.types.enums import AgentRole, TaskStatus

logger = logging.getLogger("agent_core._tasks")

SKIP_CODES = frozenset(
    {ErrorCode.step_already_claimed, ErrorCode.step_not_ready, ErrorCode.step_already_claimed_by_run}
)
"""Claim outcomes reported as ``task_step_claim_skipped`` (never written to the WAL,
docs/task-board.md#claims-and-leases)."""


class TaskService:
    """All Task operations of one session (one instance per session per process).

    Composed of parts with one responsibility each: :attr:`store` (state, restore, commits), :attr:`pools`
    (worker pools and scope), :attr:`reads` (get/list/query, inspect views, the board) and :attr:`workers`
    (dispatch checks, the worker-run-end fallback). The service itself holds the write operations; the
    other operations are the parts' methods, exposed here under the service's API.
    """

    def __init__(
        self,
        session_id: str,
        wal_dir: Path | None,
        project: Path,
        lease_timeout_ms: int = 300_000,
        *,
        clock: Callable[[], datetime] = utc_now,
        emit: EmitFn | None = None,
        writer: WalWriter | None = None,
        pool_ids: Callable[[], Sequence[str]] | None = None,
        artifact_exists: ArtifactCheck | None = None,
        cancel_worker_runs: CancelWorkerRuns | None = None,
        child_cancel_timeout_ms: int = 30_000,
        recent_capacity: int = 256,
    ) -> None:
        self.store = TaskStore(
            session_id,
            wal_dir,
            project,
            clock=clock,
            emit=emit,
            writer=writer,
            recent_capacity=recent_capacity,
        )
        self.pools = WorkerPools(pool_ids)
        self.reads = TaskReads(self.store, self.pools)
        self.workers = WorkerRuns(self.store, self.pools)
        self.lease_timeout_ms = lease_timeout_ms
        self._artifact_exists = artifact_exists
        self._cancel_worker_runs = cancel_worker_runs
        self._child_cancel_timeout_ms = child_cancel_timeout_ms
        # the parts' operations under the service's API
        self.load = self.store.load
        self.reconcile_leases = self.store.reconcile_leases
        self.holder_run_ids = self.store.holder_run_ids
        self.active_wal_paths = self.store.active_wal_paths
        self.active_dags = self.store.active_dags
        self.default_pool_id = self.pools.default_pool_id
        self.get_task = self.reads.get_task
        self.list_tasks = self.reads.list_tasks
        self.query_steps = self.reads.query_steps
        self.inspect_views = self.reads.inspect_views
        self.has_attention_items = self.reads.has_attention_items
        self.board_summary = self.reads.board_summary
        self.check_dispatchable = self.workers.check_dispatchable
        self.claimed_step = self.workers.claimed_step
        self.on_worker_run_end = self.workers.on_worker_run_end
        self.catch_up = self.workers.catch_up

    @property
    def session_id(self) -> str:
        return self.store.session_id

    @property
    def project(self) -> Path:
        return self.store.project

    @property
    def wal_root(self) -> Path:
        return self.store.wal_root

    @property
    def session_dir(self) -> Path:
        return self.store.session_dir

    # ================================================================== tools: Orchestrator writes

    async def create_task(
        self, caller: TaskCaller, inp: TaskCreateInput, *, emit: EmitFn | None = None
    ) -> dict[str, Any]:
        """``agent.task_create``: creates the WAL (exclusively) and the in-memory DAG."""
        file_name = wal_mod.normalize_wal_name(inp.wal_name)
        require_orchestrator(caller)
        await self.store.load()
        if inp.task_id in self.store.active or any(
            e.details.get("task_id") == inp.task_id for e in self.store.unavailable.values()
        ):
            raise InvalidArgumentError(
                ErrorCode.validation_error, f"an active Task {inp.task_id!r} already exists"
            )
        path = self.store.session_dir / file_name
        if await self.store.writer.offload(lambda: self.store.writer.exists(path)):
            raise FileOperationError(ErrorCode.path_conflict, f"a Task WAL named {file_name} already exists")
        records = decide_create(
            session_id=self.store.session_id,
            task_id=inp.task_id,
            wal_path=str(path),
            title=inp.title,
            summary=inp.summary,
            steps=inp.steps,
            actor=caller.actor,
            now=self.store.clock(),
            pool_ok=self.pools.pool_ok,
        )
        try:
            # inside <project> unless configured elsewhere; never through a link (issue 14 item 3)
            project_side_dir(
                self.store.wal_dir_configured.absolute() / self.store.session_id,
                self.store.project,
                purpose="Task WAL directory",
                config_key="task.wal_dir",
            )
        except OSError as exc:
            raise StorageError(
                ErrorCode.storage_error, f"cannot create {self.store.session_dir}: {exc}"
            ) from exc
        try:
            await self.store.writer.offload(lambda: self.store.writer.create(path, records))
        except WalAppendError as exc:
            await self.store.emit_wal_failed(
                path, exc, "append", caller.actor, emit or self.store.emit, task_id=inp.task_id
            )
            raise
        dag = TaskDag.from_created(records[0], wal_path=str(path))
        for record in records[1:]:
            dag.apply(record)
        entry = TaskEntry(dag=dag, path=path)
        self.store.register_created(entry, records)
        for record in records:
            await (emit or self.store.emit)(mirror_event(str(path), record), caller.actor)
        return write_result(dag, records, wal_path=str(path))

    async def update_task(
        self, caller: TaskCaller, inp: TaskUpdateInput, *, emit: EmitFn | None = None
    ) -> dict[str, Any]:
        """``agent.task_update``: one atomic patch."""
        ops = inp.parsed_operations()
        require_orchestrator(caller)
        await self.store.load()
        entry = await self.store.mutable(inp.task_id)
        async with entry.lock:
            await self.store.recheck(entry)
            records, after_dispatch = decide_update(
                entry.dag,
                ops,
                inp.operations,
                actor=caller.actor,
                now=self.store.clock(),
                pool_ok=self.pools.pool_ok,
            )
            await self.store.commit(entry, records, caller.actor, emit)
        return write_result(entry.dag, records, updated_after_dispatch_step_ids=after_dispatch)

    async def complete_task(
        self, caller: TaskCaller, inp: TaskCompleteInput, *, emit: EmitFn | None = None
    ) -> dict[str, Any]:
        """``agent.task_complete``."""
        require_orchestrator(caller)
        await self.store.load()
        entry = await self.store.mutable(inp.task_id)
        async with entry.lock:
            await self.store.recheck(entry)
            await self.store.reconcile(entry, caller.actor, emit)
            records = decide_complete(
                entry.dag, inp.result_summary, actor=caller.actor, now=self.store.clock()
            )
            await self.store.commit(entry, records, caller.actor, emit)
        cancelled = [r.step_id for r in records if r.event_type == "task_step_cancelled"]
        return write_result(entry.dag, records, cancelled_optional_step_ids=cancelled)

    async def terminate_task(
        self,
        caller: TaskCaller,
        inp: TaskTerminateInput,
        kind: Literal["failed", "cancelled"],
        *,
        emit: EmitFn | None = None,
    ) -> dict[str, Any]:
        """``agent.task_fail`` / ``agent.task_cancel`` (docs/task-board.md#failing-and-cancelling-a-task).

        The Task is marked terminating (no new claims/dispatches), holder worker runs are cancelled in
        parallel *without* holding the Task lock (so they can still write their own step), then every
        unfinished step and the Task are terminated under the lock.
        """
        require_orchestrator(caller)
        await self.store.load()
        entry = await self.store.mutable(inp.task_id)
        entry.terminating = True
        try:
            holders = self.store.holder_run_ids(inp.task_id)
            if holders and self._cancel_worker_runs is not None:
                try:
                    await asyncio.wait_for(
                        self._cancel_worker_runs(holders, f"task_{kind}"),
                        timeout=self._child_cancel_timeout_ms / 1000 + 1.0,
                    )
                except TimeoutError:
                    logger.warning("worker cancellation for Task %s did not return in time", inp.task_id)
            async with entry.lock:
                await self.store.recheck(entry)
                records = decide_terminate(
                    entry.dag, kind, inp.reason, actor=caller.actor, now=self.store.clock()
                )
                await self.store.commit(entry, records, caller.actor, emit)
        finally:
            entry.terminating = False
        ended = [r.step_id for r in records if r.event_type == f"task_step_{kind}"]
        key = "failed_step_ids" if kind == "failed" else "cancelled_step_ids"
        return write_result(entry.dag, records, **{key: ended, "cancelled_worker_run_ids": holders})

    # ================================================================== tools: step execution

    async def claim_step(
        self, caller: TaskCaller, inp: TaskClaimStepInput, *, emit: EmitFn | None = None
    ) -> dict[str, Any]:
        """``agent.task_claim_step`` with the check order of docs/task-board.md#claims-and-leases."""
        scope = caller.worker_scope
        if caller.role != AgentRole.worker or scope is None:
            raise PermissionDeniedError(ErrorCode.permission_denied, "only worker runs claim steps")
        require_dispatch_task(scope, inp.task_id)
        await self.store.load()
        entry = await self.store.mutable(inp.task_id)
        emit_fn = emit or self.store.emit
        async with entry.lock:
            await self.store.recheck(entry)
            if entry.terminating or entry.dag.status == TaskStatus.blocked:
                raise TaskError(
                    ErrorCode.task_not_dispatchable,
                    f"Task {inp.task_id} is {entry.dag.status}; no claims now",
                )
            run_id = caller.run_id or ""
            try:
                precheck_claim(
                    entry.dag, inp.step_id, run_id=run_id, in_scope=lambda s: self.pools.in_scope(scope, s)
                )
                await self.store.reconcile(entry, caller.actor, emit)
                records = decide_claim(
                    entry.dag,
                    inp.step_id,
                    actor=caller.actor,
                    now=self.store.clock(),
                    lease_ms=self.lease_timeout_ms,
                )
            except AgentCoreError as exc:
                if exc.code in SKIP_CODES:
                    skipped = ev.TaskStepClaimSkipped(
                        task_id=inp.task_id,
                        step_id=inp.step_id,
                        code=exc.code.value,
                        worker_agent_id=scope.worker_agent_id,
                        worker_run_id=caller.run_id,
                    )
                    await emit_fn(skipped, caller.actor)
                raise
            await self.store.commit(entry, records, caller.actor, emit)
        step = entry.dag.step(inp.step_id)
        assert step is not None
        return write_result(
            entry.dag,
            records,
            task_id=inp.task_id,
            step=step_view(step, orchestrator=False),
            lease_expires_at=step.lease_expires_at,
        )

    async def update_step(
        self, caller: TaskCaller, inp: TaskUpdateStepInput, *, emit: EmitFn | None = None
    ) -> dict[str, Any]:
        """``agent.task_update_step`` (docs/task-board.md#task-tools)."""
        scope = require_board_role(caller)
        await self.store.load()
        entry = await self.store.mutable(inp.task_id)
        require_dispatch_task(scope, inp.task_id)
        if entry.dag.step(inp.step_id) is None:
            raise StepNotFoundError(ErrorCode.step_not_found, f"unknown step {inp.step_id!r}")
        await self._check_artifacts(inp.artifact_ids or [])
        async with entry.lock:
            await self.store.recheck(entry)
            await self.store.reconcile(entry, caller.actor, emit)
            records = decide_update_step(
                entry.dag,
                inp,
                actor=caller.actor,
                is_worker=scope is not None,
                now=self.store.clock(),
                lease_ms=self.lease_timeout_ms,
            )
            await self.store.commit(entry, records, caller.actor, emit)
        step = entry.dag.step(inp.step_id)
        assert step is not None
        return write_result(
            entry.dag,
            records,
            task_id=inp.task_id,
            step=step_view(step, orchestrator=scope is None),
            lease_expires_at=step.lease_expires_at,
        )

    async def _check_artifacts(self, artifact_ids: list[str]) -> None:
        for artifact_id in dedupe(artifact_ids):
            try:
                validate_id(artifact_id, "artifact_")
            except AgentCoreError as exc:
                raise InvalidArgumentError(
                    ErrorCode.validation_error, f"invalid artifact id {artifact_id!r}"
                ) from exc
            if self._artifact_exists is not None and not await self._artifact_exists(artifact_id):
                raise InvalidArgumentError(
                    ErrorCode.validation_error,
                    f"artifact {artifact_id!r} does not exist in this session",
                    details={"artifact_id": artifact_id},
                )

"""The per-session Task service: every ``agent.task_*`` operation (task-board.md §5).

:class:`TaskService` = :class:`~agent_core.tasks.store.TaskStore` (state, restore, commits, views) +
:class:`~agent_core.tasks.worker_runs.WorkerRunSupport` (dispatch checks, worker-run-end fallback) + the tool
operations below. Worker runs are identified by ``RunScope.extras["task_scope"]``
(:class:`~agent_core.tasks.scope.WorkerTaskScope`); roles come from :class:`~agent_core.tasks.scope.TaskCaller`.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from agent_core.errors import AgentCoreError, ErrorCode, StorageError
from agent_core.ids import validate_id
from agent_core.tasks import wal as wal_mod
from agent_core.tasks.dag import TaskDag
from agent_core.tasks.decide import (
    decide_claim,
    decide_complete,
    decide_create,
    decide_terminate,
    decide_update_step,
    precheck_claim,
)
from agent_core.tasks.inputs import (
    TaskClaimStepInput,
    TaskCompleteInput,
    TaskCreateInput,
    TaskGetInput,
    TaskListInput,
    TaskQueryStepsInput,
    TaskTerminateInput,
    TaskUpdateInput,
    TaskUpdateStepInput,
    dedupe,
)
from agent_core.tasks.models import (
    CLOSED_STEP_STATUSES,
    TERMINAL_TASK_STATUSES,
    UNFINISHED_STEP_STATUSES,
    TaskStep,
)
from agent_core.tasks.patch import decide_update
from agent_core.tasks.scope import TaskCaller
from agent_core.tasks.store import EmitFn, TaskEntry, TerminalTask
from agent_core.tasks.views import (
    event_payload,
    step_view,
    task_summary,
    task_view,
    write_result,
)
from agent_core.tasks.wal import WalAppendError, WalReplayError
from agent_core.tasks.worker_runs import WorkerRunSupport
from agent_core.tools.paths import project_side_dir
from agent_core.types.base import parse_ts
from agent_core.types.enums import AgentRole, EventType, StepStatus, TaskStatus

logger = logging.getLogger("agent_core.tasks")

SKIP_CODES = frozenset(
    {ErrorCode.step_already_claimed, ErrorCode.step_not_ready, ErrorCode.step_already_claimed_by_run}
)
"""Claim outcomes reported as ``task_step_claim_skipped`` (never written to the WAL, §8)."""


class TaskService(WorkerRunSupport):
    """All Task operations of one session (one instance per session per process)."""

    # ================================================================== tools: Orchestrator writes

    async def create_task(
        self, caller: TaskCaller, inp: TaskCreateInput, *, emit: EmitFn | None = None
    ) -> dict[str, Any]:
        """``agent.task_create``: creates the WAL (exclusively) and the in-memory DAG."""
        file_name = wal_mod.normalize_wal_name(inp.wal_name)
        self._require_orchestrator(caller)
        await self.load()
        if inp.task_id in self._active or any(
            e.details.get("task_id") == inp.task_id for e in self._unavailable.values()
        ):
            raise AgentCoreError(ErrorCode.validation_error, f"an active Task {inp.task_id!r} already exists")
        path = self.session_dir / file_name
        if path.exists():
            raise AgentCoreError(ErrorCode.path_conflict, f"a Task WAL named {file_name} already exists")
        records = decide_create(
            session_id=self.session_id,
            task_id=inp.task_id,
            wal_path=str(path),
            title=inp.title,
            summary=inp.summary,
            steps=inp.steps,
            actor=caller.actor,
            now=self._clock(),
            pool_ok=self._pool_ok,
        )
        try:
            # inside <project> unless configured elsewhere; never through a link (issue 14 §3)
            project_side_dir(
                self.wal_dir_configured.absolute() / self.session_id,
                self.project,
                purpose="Task WAL directory",
                config_key="task.wal_dir",
            )
        except OSError as exc:
            raise StorageError(ErrorCode.storage_error, f"cannot create {self.session_dir}: {exc}") from exc
        try:
            self._writer.create(path, records)
        except WalAppendError as exc:
            await self._emit_wal_failed(
                path, exc, "append", caller.actor, emit or self._emit, task_id=inp.task_id
            )
            raise
        dag = TaskDag.from_created(records[0], wal_path=str(path))
        for record in records[1:]:
            dag.apply(record)
        entry = TaskEntry(dag=dag, path=path)
        self._active[inp.task_id] = entry
        self._tombstones.pop(inp.task_id, None)
        self._first_ids.pop(path, None)
        self._remember(records)
        for record in records:
            await (emit or self._emit)(
                EventType(record.event_type), event_payload(str(path), record), caller.actor
            )
        return write_result(dag, records, wal_path=str(path))

    async def update_task(
        self, caller: TaskCaller, inp: TaskUpdateInput, *, emit: EmitFn | None = None
    ) -> dict[str, Any]:
        """``agent.task_update``: one atomic patch."""
        ops = inp.parsed_operations()
        self._require_orchestrator(caller)
        await self.load()
        entry = self._mutable(inp.task_id)
        async with entry.lock:
            self._recheck(entry)
            records, after_dispatch = decide_update(
                entry.dag, ops, inp.operations, actor=caller.actor, now=self._clock(), pool_ok=self._pool_ok
            )
            await self._commit(entry, records, caller.actor, emit)
        return write_result(entry.dag, records, updated_after_dispatch_step_ids=after_dispatch)

    async def complete_task(
        self, caller: TaskCaller, inp: TaskCompleteInput, *, emit: EmitFn | None = None
    ) -> dict[str, Any]:
        """``agent.task_complete``."""
        self._require_orchestrator(caller)
        await self.load()
        entry = self._mutable(inp.task_id)
        async with entry.lock:
            self._recheck(entry)
            await self._reconcile(entry, caller.actor, emit)
            records = decide_complete(entry.dag, inp.result_summary, actor=caller.actor, now=self._clock())
            await self._commit(entry, records, caller.actor, emit)
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
        """``agent.task_fail`` / ``agent.task_cancel`` (task-board.md §5.11).

        The Task is marked terminating (no new claims/dispatches), holder worker runs are cancelled in
        parallel *without* holding the Task lock (so they can still write their own step), then every
        unfinished step and the Task are terminated under the lock.
        """
        self._require_orchestrator(caller)
        await self.load()
        entry = self._mutable(inp.task_id)
        entry.terminating = True
        try:
            holders = self.holder_run_ids(inp.task_id)
            if holders and self._cancel_worker_runs is not None:
                try:
                    await asyncio.wait_for(
                        self._cancel_worker_runs(holders, f"task_{kind}"),
                        timeout=self._child_cancel_timeout_ms / 1000 + 1.0,
                    )
                except TimeoutError:
                    logger.warning("worker cancellation for Task %s did not return in time", inp.task_id)
            async with entry.lock:
                self._recheck(entry)
                records = decide_terminate(entry.dag, kind, inp.reason, actor=caller.actor, now=self._clock())
                await self._commit(entry, records, caller.actor, emit)
        finally:
            entry.terminating = False
        ended = [r.step_id for r in records if r.event_type == f"task_step_{kind}"]
        key = "failed_step_ids" if kind == "failed" else "cancelled_step_ids"
        return write_result(entry.dag, records, **{key: ended, "cancelled_worker_run_ids": holders})

    # ================================================================== tools: reads

    async def get_task(
        self, caller: TaskCaller, inp: TaskGetInput, *, emit: EmitFn | None = None
    ) -> dict[str, Any]:
        """``agent.task_get``: active Tasks after lease reconciliation; terminal ones as a read-only replay."""
        scope = self._require_board_role(caller)
        await self.load()
        target = self._resolve(inp.task_id)
        self._require_dispatch_task(scope, inp.task_id)
        dag, read_only = await self._readable(target, caller, emit)
        return task_view(
            dag,
            read_only=read_only,
            include_terminal_steps=inp.include_terminal_steps,
            orchestrator=scope is None,
        )

    async def _readable(
        self, target: TaskEntry | TerminalTask, caller: TaskCaller, emit: EmitFn | None
    ) -> tuple[TaskDag, bool]:
        if isinstance(target, TerminalTask):
            return self._replay_read_only(target.path), True
        async with target.lock:
            if self._active.get(target.dag.task_id) is target:
                await self._reconcile(target, caller.actor, emit)
        return target.dag, target.dag.task.terminal

    async def list_tasks(self, caller: TaskCaller, inp: TaskListInput) -> dict[str, Any]:
        """``agent.task_list``: active Tasks (``updated_at`` desc), then terminal WALs (mtime desc).

        Terminal status comes from each file's last line; only terminal WALs inside the page are replayed.
        """
        self._require_orchestrator(caller)
        await self.load()
        status = inp.status
        include_terminal = inp.include_terminal or (status is not None and status in TERMINAL_TASK_STATUSES)
        items: list[tuple[str, Any]] = []
        if status is None or status not in TERMINAL_TASK_STATUSES:
            active = sorted(
                self._active.values(), key=lambda e: (e.dag.task.updated_at, e.dag.task_id), reverse=True
            )
            items += [("active", e) for e in active if status is None or e.dag.status == status]
            if status is None:
                items += [("unavailable", (p, err)) for p, err in self._unavailable.items()]
        if include_terminal:
            terminal: list[tuple[int, str, Path, TaskStatus]] = []
            for path in self._other_wals():
                try:
                    tail = wal_mod.read_tail(path)
                    mtime = path.stat().st_mtime_ns
                except OSError:
                    continue
                tstatus = tail.terminal_status
                if tstatus is not None and (status is None or tstatus == status):
                    terminal.append((mtime, tail.created_at or "", path, tstatus))
            terminal.sort(key=lambda t: (t[0], t[1]), reverse=True)
            items += [("terminal", t[2]) for t in terminal]
        page = items[inp.offset : inp.offset + inp.limit]
        tasks: list[dict[str, Any]] = []
        for kind, value in page:
            if kind == "active":
                tasks.append({**task_summary(value.dag, read_only=False), "wal_path": str(value.path)})
            elif kind == "unavailable":
                path, err = value
                tasks.append(self._unavailable_summary(path, err))
            else:
                try:
                    dag = self._replay_read_only(value)
                except WalReplayError as exc:
                    tasks.append(self._unavailable_summary(value, exc))
                    continue
                tasks.append({**task_summary(dag, read_only=True), "wal_path": str(value)})
        has_more = inp.offset + len(page) < len(items)
        return {
            "tasks": tasks,
            "offset": inp.offset,
            "limit": inp.limit,
            "returned": len(tasks),
            "has_more": has_more,
            "next_offset": inp.offset + len(page) if has_more else None,
        }

    @staticmethod
    def _unavailable_summary(path: Path, err: AgentCoreError) -> dict[str, Any]:
        out: dict[str, Any] = {"wal_path": str(path), "error_code": ErrorCode.task_wal_unavailable.value}
        if err.details.get("task_id"):
            out["task_id"] = err.details["task_id"]
        return out

    async def query_steps(
        self, caller: TaskCaller, inp: TaskQueryStepsInput, *, emit: EmitFn | None = None
    ) -> dict[str, Any]:
        """``agent.task_query_steps`` (task-board.md §5.7)."""
        scope = self._require_board_role(caller)
        if inp.statuses and not inp.include_terminal_steps:
            closed = [s.value for s in inp.statuses if s in CLOSED_STEP_STATUSES]
            if closed:
                raise AgentCoreError(
                    ErrorCode.validation_error,
                    f"statuses {closed} need include_terminal_steps=true",
                    details={"statuses": closed},
                )
        await self.load()
        target = self._resolve(inp.task_id)
        self._require_dispatch_task(scope, inp.task_id)
        if (
            scope is not None
            and inp.worker_pool_id is not None
            and inp.worker_pool_id != scope.worker_pool_id
        ):
            raise AgentCoreError(ErrorCode.permission_denied, "a worker may only query its own pool")
        dag, read_only = await self._readable(target, caller, emit)
        if inp.statuses is not None:
            wanted = set(inp.statuses)
        elif scope is not None:
            wanted = {StepStatus.ready}
        else:
            wanted = set(UNFINISHED_STEP_STATUSES)
        if inp.statuses is None and inp.include_terminal_steps:
            wanted |= CLOSED_STEP_STATUSES
        limit = inp.limit if inp.limit is not None else (5 if scope is not None else 50)
        default_pool = self.default_pool_id()
        entry = target if isinstance(target, TaskEntry) else None
        no_ready = dag.status != TaskStatus.running and dag.status != TaskStatus.pending
        no_ready = no_ready or (entry is not None and entry.terminating)
        now = self._clock()
        steps: list[TaskStep] = []
        for step in dag.steps():
            if step.status not in wanted:
                continue
            if inp.worker_pool_id is not None and (step.worker_pool_id or default_pool) != inp.worker_pool_id:
                continue
            if inp.claimed_by_agent_id is not None and step.claimed_by_agent_id != inp.claimed_by_agent_id:
                continue
            if scope is not None:
                if not self._in_scope(scope, step):
                    continue
                if step.status == StepStatus.ready and (
                    no_ready or not dag.deps_completed(step) or _lease_valid(step, now)
                ):
                    continue
            steps.append(step)
        steps.sort(key=lambda s: (s.created_at, s.step_id))
        page = steps[inp.offset : inp.offset + limit]
        has_more = inp.offset + len(page) < len(steps)
        return {
            "task_id": dag.task_id,
            "task_status": dag.status.value,
            "read_only": read_only,
            "steps": [step_view(s, orchestrator=scope is None) for s in page],
            "total": len(steps),
            "offset": inp.offset,
            "limit": limit,
            "has_more": has_more,
            "next_offset": inp.offset + len(page) if has_more else None,
        }

    # ================================================================== tools: step execution

    async def claim_step(
        self, caller: TaskCaller, inp: TaskClaimStepInput, *, emit: EmitFn | None = None
    ) -> dict[str, Any]:
        """``agent.task_claim_step`` with the check order of task-board.md §5.8."""
        scope = caller.worker_scope
        if caller.role != AgentRole.worker or scope is None:
            raise AgentCoreError(ErrorCode.permission_denied, "only worker runs claim steps")
        self._require_dispatch_task(scope, inp.task_id)
        await self.load()
        entry = self._mutable(inp.task_id)
        emit_fn = emit or self._emit
        async with entry.lock:
            self._recheck(entry)
            if entry.terminating or entry.dag.status == TaskStatus.blocked:
                raise AgentCoreError(
                    ErrorCode.task_not_dispatchable,
                    f"Task {inp.task_id} is {entry.dag.status}; no claims now",
                )
            run_id = caller.run_id or ""
            try:
                precheck_claim(
                    entry.dag, inp.step_id, run_id=run_id, in_scope=lambda s: self._in_scope(scope, s)
                )
                await self._reconcile(entry, caller.actor, emit)
                records = decide_claim(
                    entry.dag,
                    inp.step_id,
                    actor=caller.actor,
                    now=self._clock(),
                    lease_ms=self.lease_timeout_ms,
                )
            except AgentCoreError as exc:
                if exc.code in SKIP_CODES:
                    await emit_fn(
                        EventType.task_step_claim_skipped,
                        {
                            "task_id": inp.task_id,
                            "step_id": inp.step_id,
                            "code": exc.code.value,
                            "worker_agent_id": scope.worker_agent_id,
                            "worker_run_id": caller.run_id,
                        },
                        caller.actor,
                    )
                raise
            await self._commit(entry, records, caller.actor, emit)
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
        """``agent.task_update_step`` (task-board.md §5.9)."""
        scope = self._require_board_role(caller)
        await self.load()
        entry = self._mutable(inp.task_id)
        self._require_dispatch_task(scope, inp.task_id)
        if entry.dag.step(inp.step_id) is None:
            raise AgentCoreError(ErrorCode.step_not_found, f"unknown step {inp.step_id!r}")
        await self._check_artifacts(inp.artifact_ids or [])
        async with entry.lock:
            self._recheck(entry)
            await self._reconcile(entry, caller.actor, emit)
            records = decide_update_step(
                entry.dag,
                inp,
                actor=caller.actor,
                is_worker=scope is not None,
                now=self._clock(),
                lease_ms=self.lease_timeout_ms,
            )
            await self._commit(entry, records, caller.actor, emit)
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
                raise AgentCoreError(
                    ErrorCode.validation_error, f"invalid artifact id {artifact_id!r}"
                ) from exc
            if self._artifact_exists is not None and not await self._artifact_exists(artifact_id):
                raise AgentCoreError(
                    ErrorCode.validation_error,
                    f"artifact {artifact_id!r} does not exist in this session",
                    details={"artifact_id": artifact_id},
                )


def _lease_valid(step: TaskStep, now: datetime) -> bool:
    return step.lease_expires_at is not None and parse_ts(step.lease_expires_at) >= now

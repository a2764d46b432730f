"""The per-session Task service: every Task operation, restore, leases and the dispatch helpers.

Commit protocol (task-board.md §2.4): under the Task's ``asyncio.Lock`` a pure decision
(:mod:`agent_core.tasks.decide`) returns records → the :class:`WalWriter` appends them (one write, fsync) →
the live :class:`TaskDag` applies the same records → runtime events are emitted in WAL order. A failed
append leaves memory untouched, emits ``task_wal_failed`` (``phase="append"``) and raises ``storage_error``.

Worker runs are identified by ``RunScope.extras["task_scope"]`` (:class:`WorkerTaskScope`); roles come from
:class:`TaskCaller`. Events go through an :data:`EmitFn` — the tool adapter passes one bound to the calling
run's sink; restore and other out-of-call work use the service's ``emit`` with the actor passed along.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from agent_core.errors import AgentCoreError, ErrorCode, StorageError
from agent_core.storage.ids import validate_id
from agent_core.tasks import wal as wal_mod
from agent_core.tasks.board import RecentChange, render_task_board
from agent_core.tasks.dag import CORE, Actor, TaskDag
from agent_core.tasks.decide import (
    decide_claim,
    decide_complete,
    decide_create,
    decide_heal,
    decide_lease_expiry,
    decide_run_end,
    decide_terminate,
    decide_update,
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
    HELD_STEP_STATUSES,
    TERMINAL_TASK_STATUSES,
    UNFINISHED_STEP_STATUSES,
    TaskStep,
    TaskWalEvent,
)
from agent_core.tasks.scope import TaskCaller, WorkerTaskScope
from agent_core.tasks.views import (
    event_payload,
    inspect_task,
    step_view,
    task_summary,
    task_view,
    write_result,
)
from agent_core.tasks.wal import WalAppendError, WalReplayError, WalWriter
from agent_core.types.base import parse_ts, utc_now
from agent_core.types.enums import AgentRole, EventType, StepStatus, TaskStatus
from agent_core.types.runtime import TaskInspectView

logger = logging.getLogger("agent_core.tasks")

EmitFn = Callable[[EventType, dict[str, Any], Actor], Awaitable[None]]
"""Emits one runtime event on behalf of ``actor`` (``agent_id``/``run_id`` of the event)."""
CancelWorkerRuns = Callable[[list[str], str], Awaitable[None]]
"""Requests cancellation of worker runs (reason ``task_failed``/``task_cancelled``), emits the
``child_agent_cancel_*`` events and returns once they stopped or ``agents.child_cancel_timeout_ms`` passed."""
ArtifactCheck = Callable[[str], Awaitable[bool]]
WorkerRunEnding = Literal["completed", "failed", "cancelled", "timeout"]
SKIP_CODES = frozenset(
    {ErrorCode.step_already_claimed, ErrorCode.step_not_ready, ErrorCode.step_already_claimed_by_run}
)
_END_REASONS: dict[str, str] = {
    "completed": "worker_finished_without_terminal_step_status",
    "failed": "worker_finished_without_terminal_step_status",
    "cancelled": "worker_cancelled",
    "timeout": "worker_timeout",
}


async def _no_emit(event_type: EventType, payload: dict[str, Any], actor: Actor) -> None:
    return None


@dataclass(eq=False)
class _Entry:
    dag: TaskDag
    path: Path
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    terminating: bool = False


@dataclass(frozen=True)
class _Terminal:
    task_id: str
    path: Path
    status: TaskStatus
    dag: TaskDag | None = None


@dataclass(frozen=True, kw_only=True)
class DispatchCheck:
    """A dispatch request that passed the Task checks of multi-agent.md §11."""

    task_id: str
    worker_pool_id: str
    allowed_step_ids: tuple[str, ...] | None


@dataclass(frozen=True, kw_only=True)
class WorkerRunEnd:
    """Task facts for the ``agent.dispatch_worker`` result after the fallback ran (task-board.md §6)."""

    task_id: str
    claimed_step_id: str | None
    step_status: str | None
    step_result_summary: str | None
    no_step_claimed: bool
    wal_event_ids: list[str]


class TaskService:
    """All Task operations of one session (one instance per session per process)."""

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
        self.session_id = validate_id(session_id)
        self.wal_root = (wal_dir if wal_dir is not None else project / ".soong-agent" / "tasks").resolve()
        self.session_dir = self.wal_root / session_id
        self.lease_timeout_ms = lease_timeout_ms
        self._clock = clock
        self._emit = emit or _no_emit
        self._writer = writer or WalWriter()
        self._pool_ids = pool_ids
        self._artifact_exists = artifact_exists
        self._cancel_worker_runs = cancel_worker_runs
        self._child_cancel_timeout_ms = child_cancel_timeout_ms
        self._active: dict[str, _Entry] = {}
        self._unavailable: dict[Path, AgentCoreError] = {}
        self._tombstones: dict[str, _Terminal] = {}
        self._first_ids: dict[Path, str | None] = {}
        self._recent: deque[RecentChange] = deque(maxlen=recent_capacity)
        self._load_lock = asyncio.Lock()
        self._loaded = False

    # ================================================================== restore

    async def load(self) -> list[TaskInspectView]:
        """Restores the session's non-terminal Tasks once per process (task-board.md §2.5).

        Never raises for a bad WAL: a failure makes that Task unavailable and emits ``task_wal_failed``.
        Returns one view per non-terminal WAL (restored or failed), without the timeline.
        """
        async with self._load_lock:
            if not self._loaded:
                await self._restore()
                self._loaded = True
        views = [
            TaskInspectView(
                task_id=e.dag.task_id,
                wal_path=str(e.path),
                status=e.dag.status.value,
                task=inspect_task(e.dag),
            )
            for e in self._active.values()
        ]
        views += [self._error_view(path, err) for path, err in self._unavailable.items()]
        return views

    async def _restore(self) -> None:
        for path in wal_mod.list_wal_files(self.session_dir):
            try:
                if wal_mod.read_tail(path).terminal_status is not None:
                    continue
                outcome = wal_mod.replay_wal(
                    path, session_id=self.session_id, repair=True, recent=self._recent.maxlen or 64
                )
                task_id = outcome.dag.task_id
                if task_id in self._active or any(
                    e.details.get("task_id") == task_id for e in self._unavailable.values()
                ):
                    raise WalReplayError(
                        path, f"a second active WAL for task_id {task_id!r}", task_id=task_id
                    )
            except (WalReplayError, OSError) as exc:
                err = exc if isinstance(exc, WalReplayError) else WalReplayError(path, str(exc), task_id=None)
                self._unavailable[path] = err
                await self._emit_wal_failed(path, err, "replay", CORE, self._emit)
                continue
            entry = _Entry(dag=outcome.dag, path=path)
            self._active[task_id] = entry
            self._remember(outcome.recent)
            await self._emit(
                EventType.task_wal_replayed,
                {
                    "task_id": task_id,
                    "wal_path": str(path),
                    "records": outcome.records,
                    "last_wal_seq": outcome.dag.last_wal_seq,
                    "torn_tail_truncated": outcome.torn_tail_truncated,
                },
                CORE,
            )
            async with entry.lock:
                try:
                    await self._reconcile(entry, CORE, self._emit)
                    await self._commit(
                        entry, decide_heal(entry.dag, now=self._clock(), actor=CORE), CORE, None
                    )
                except AgentCoreError as exc:
                    logger.warning("restore of Task %s could not finish: %s", task_id, exc)

    # ================================================================== commit machinery

    async def _commit(
        self, entry: _Entry, records: list[TaskWalEvent], actor: Actor, emit: EmitFn | None
    ) -> list[TaskWalEvent]:
        """Append → apply → emit. Raises ``storage_error`` (memory unchanged) when the append fails."""
        if not records:
            return []
        emit = emit or self._emit
        try:
            self._writer.append(entry.path, records)
        except WalAppendError as exc:
            if exc.unavailable:
                self._active.pop(entry.dag.task_id, None)
                self._unavailable[entry.path] = AgentCoreError(
                    ErrorCode.task_wal_unavailable,
                    f"Task {entry.dag.task_id} is unavailable: its WAL could not be restored after a failed append",
                    details={"task_id": entry.dag.task_id, "wal_path": str(entry.path)},
                )
            await self._emit_wal_failed(entry.path, exc, "append", actor, emit, task_id=entry.dag.task_id)
            raise
        for record in records:
            entry.dag.apply(record)
        self._remember(records)
        if entry.dag.task.terminal:
            self._active.pop(entry.dag.task_id, None)
            self._tombstones[entry.dag.task_id] = _Terminal(
                entry.dag.task_id, entry.path, entry.dag.status, entry.dag
            )
        for record in records:
            await emit(EventType(record.event_type), event_payload(str(entry.path), record), actor)
        return records

    async def _reconcile(self, entry: _Entry, actor: Actor, emit: EmitFn | None) -> list[TaskWalEvent]:
        return await self._commit(
            entry, decide_lease_expiry(entry.dag, now=self._clock(), actor=actor), actor, emit
        )

    async def _emit_wal_failed(
        self,
        path: Path,
        error: AgentCoreError,
        phase: str,
        actor: Actor,
        emit: EmitFn,
        *,
        task_id: str | None = None,
    ) -> None:
        payload: dict[str, Any] = {
            "wal_path": str(path),
            "task_id": task_id if task_id is not None else error.details.get("task_id"),
            "phase": phase,
            "error": error.to_payload().model_dump(mode="json"),
        }
        await emit(EventType.task_wal_failed, payload, actor)

    def _remember(self, records: Sequence[TaskWalEvent]) -> None:
        for r in records:
            self._recent.append(
                RecentChange(
                    created_at=r.created_at,
                    task_id=r.task_id,
                    step_id=r.step_id,
                    event_type=r.event_type,
                    actor_agent_id=r.actor_agent_id,
                )
            )

    # ================================================================== resolution

    def _resolve(self, task_id: str) -> _Entry | _Terminal:
        entry = self._active.get(task_id)
        if entry is not None:
            return entry
        for path, err in self._unavailable.items():
            if err.details.get("task_id") == task_id:
                raise AgentCoreError(
                    ErrorCode.task_wal_unavailable,
                    f"Task {task_id} is unavailable: {err.message}",
                    details={"task_id": task_id, "wal_path": str(path), "error": err.message},
                )
        tomb = self._tombstones.get(task_id)
        if tomb is not None:
            return tomb
        found = self._find_terminal(task_id)
        if found is not None:
            self._tombstones[task_id] = found
            return found
        raise AgentCoreError(ErrorCode.task_not_found, f"no Task {task_id!r} in this session")

    def _find_terminal(self, task_id: str) -> _Terminal | None:
        """Terminal WAL of ``task_id`` without a tombstone: first lines, newest mtime wins (§2.6)."""
        best: tuple[int, Path, TaskStatus] | None = None
        for path in self._other_wals():
            if path not in self._first_ids:
                self._first_ids[path] = wal_mod.read_first_task_id(path)
            if self._first_ids[path] != task_id:
                continue
            try:
                status = wal_mod.read_tail(path).terminal_status
                mtime = path.stat().st_mtime_ns
            except OSError:
                continue
            if status is not None and (best is None or mtime > best[0]):
                best = (mtime, path, status)
        return None if best is None else _Terminal(task_id, best[1], best[2])

    def _other_wals(self) -> list[Path]:
        """WAL files of the session that are neither active nor unavailable."""
        taken = {e.path for e in self._active.values()} | set(self._unavailable)
        return [p for p in wal_mod.list_wal_files(self.session_dir) if p not in taken]

    def _replay_read_only(self, path: Path) -> TaskDag:
        return wal_mod.replay_wal(path, session_id=self.session_id, repair=False).dag

    def _mutable(self, task_id: str) -> _Entry:
        target = self._resolve(task_id)
        if isinstance(target, _Terminal):
            raise AgentCoreError(
                ErrorCode.task_terminal, f"Task {task_id} is {target.status}; it accepts no further changes"
            )
        return target

    def _recheck(self, entry: _Entry) -> None:
        """After waiting for the Task lock: the Task may have become terminal or unavailable."""
        if self._active.get(entry.dag.task_id) is not entry:
            self._mutable(entry.dag.task_id)
            raise AgentCoreError(ErrorCode.task_terminal, f"Task {entry.dag.task_id} is terminal")

    # ================================================================== roles and scope

    def default_pool_id(self) -> str:
        pools = list(self._pool_ids()) if self._pool_ids is not None else []
        if "default" in pools or not pools:
            return "default"
        return pools[0]

    def _pool_ok(self, pool_id: str) -> bool:
        return self._pool_ids is None or pool_id in set(self._pool_ids())

    def _in_scope(self, scope: WorkerTaskScope, step: TaskStep) -> bool:
        pool = step.worker_pool_id or self.default_pool_id()
        allowed = scope.allowed_step_ids
        return pool == scope.worker_pool_id and (allowed is None or step.step_id in allowed)

    @staticmethod
    def _require_orchestrator(caller: TaskCaller) -> None:
        if caller.role != AgentRole.orchestrator:
            raise AgentCoreError(ErrorCode.permission_denied, "only the Orchestrator may do this")

    @staticmethod
    def _require_board_role(caller: TaskCaller) -> WorkerTaskScope | None:
        """Orchestrator (→ ``None``) or a worker with a dispatch scope; anyone else → permission_denied."""
        if caller.role == AgentRole.orchestrator:
            return None
        if caller.role == AgentRole.worker and caller.worker_scope is not None:
            return caller.worker_scope
        raise AgentCoreError(ErrorCode.permission_denied, "this run has no Task scope")

    @staticmethod
    def _require_dispatch_task(scope: WorkerTaskScope | None, task_id: str) -> None:
        if scope is not None and scope.task_id != task_id:
            raise AgentCoreError(
                ErrorCode.permission_denied, f"this worker run may only use Task {scope.task_id!r}"
            )

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
            self.session_dir.mkdir(parents=True, exist_ok=True)
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
        entry = _Entry(dag=dag, path=path)
        self._active[inp.task_id] = entry
        self._tombstones.pop(inp.task_id, None)
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
        self, target: _Entry | _Terminal, caller: TaskCaller, emit: EmitFn | None
    ) -> tuple[TaskDag, bool]:
        if isinstance(target, _Terminal):
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
        entry = target if isinstance(target, _Entry) else None
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

    # ================================================================== runtime / dispatch helpers

    def holder_run_ids(self, task_id: str) -> list[str]:
        """Worker runs holding a claimed/running step of an active Task (to cancel on fail/cancel)."""
        entry = self._active.get(task_id)
        if entry is None:
            return []
        return dedupe(
            [
                s.claimed_by_run_id
                for s in entry.dag.steps()
                if s.status in HELD_STEP_STATUSES and s.claimed_by_run_id
            ]
        )

    async def check_dispatchable(
        self, task_id: str, *, worker_pool_id: str | None = None, allowed_step_ids: list[str] | None = None
    ) -> DispatchCheck:
        """Task checks of ``agent.dispatch_worker`` (multi-agent.md §11, steps 2, 3, 5; pool step 4)."""
        await self.load()
        target = self._resolve(task_id)
        if isinstance(target, _Terminal) or target.terminating or target.dag.status == TaskStatus.blocked:
            status = target.status if isinstance(target, _Terminal) else target.dag.status
            raise AgentCoreError(
                ErrorCode.task_not_dispatchable, f"Task {task_id} is {status}; not dispatchable"
            )
        pool = worker_pool_id or self.default_pool_id()
        if worker_pool_id is not None and not self._pool_ok(worker_pool_id):
            raise AgentCoreError(ErrorCode.validation_error, f"unknown worker_pool_id {worker_pool_id!r}")
        allowed: tuple[str, ...] | None = None
        if allowed_step_ids is not None:
            if not allowed_step_ids:
                raise AgentCoreError(ErrorCode.validation_error, "allowed_step_ids must not be empty")
            allowed = tuple(dedupe(allowed_step_ids))
            unknown = [s for s in allowed if target.dag.step(s) is None]
            if unknown:
                raise AgentCoreError(
                    ErrorCode.validation_error, f"unknown step ids {unknown}", details={"step_ids": unknown}
                )
            default_pool = self.default_pool_id()
            foreign = [
                s
                for s in allowed
                if ((step := target.dag.step(s)) and (step.worker_pool_id or default_pool) != pool)
            ]
            if foreign:
                raise AgentCoreError(
                    ErrorCode.permission_denied,
                    f"steps {foreign} belong to another worker pool",
                    details={"step_ids": foreign},
                )
        return DispatchCheck(task_id=task_id, worker_pool_id=pool, allowed_step_ids=allowed)

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
        """Worker-run-end fallback (task-board.md §6), run before the dispatch result is assembled.

        Fails the step the run still holds (reason from ``ending``), unless the Task is terminal or being
        terminated. Emits ``task_step_claim_skipped`` (``code=no_step_claimed``) if the run never claimed.
        """
        await self.load()
        actor = Actor(agent_id=agent_id, run_id=run_id)
        emit_fn = emit or self._emit
        records: list[TaskWalEvent] = []
        entry = self._active.get(task_id)
        dag: TaskDag | None = entry.dag if entry is not None else None
        if entry is not None and not entry.terminating:
            async with entry.lock:
                if self._active.get(task_id) is entry and not entry.terminating:
                    try:
                        await self._reconcile(entry, actor, emit)
                        records = decide_run_end(
                            entry.dag, run_id, _END_REASONS[ending], actor=actor, now=self._clock()
                        )
                        await self._commit(entry, records, actor, emit)
                    except AgentCoreError as exc:
                        logger.warning("worker-run-end fallback for %s failed: %s", run_id, exc)
                        records = []
        if dag is None:
            tomb = self._tombstones.get(task_id)
            dag = tomb.dag if tomb is not None else None
        claimed = dag.run_claims.get(run_id) if dag is not None else None
        step = dag.step(claimed) if dag is not None and claimed is not None else None
        if claimed is None:
            await emit_fn(
                EventType.task_step_claim_skipped,
                {
                    "task_id": task_id,
                    "step_id": None,
                    "code": ErrorCode.no_step_claimed.value,
                    "worker_agent_id": worker_agent_id or agent_id,
                    "worker_run_id": run_id,
                },
                actor,
            )
        return WorkerRunEnd(
            task_id=task_id,
            claimed_step_id=claimed,
            step_status=step.status.value if step is not None else None,
            step_result_summary=step.result_summary if step is not None else None,
            no_step_claimed=claimed is None,
            wal_event_ids=[r.event_id for r in records],
        )

    async def reconcile_leases(
        self, task_id: str | None = None, *, actor: Actor = CORE, emit: EmitFn | None = None
    ) -> list[TaskWalEvent]:
        """Lease reconciliation for one or every active Task; returns the records written."""
        await self.load()
        entries = [self._active[task_id]] if task_id is not None and task_id in self._active else []
        if task_id is None:
            entries = list(self._active.values())
        written: list[TaskWalEvent] = []
        for entry in entries:
            async with entry.lock:
                if self._active.get(entry.dag.task_id) is entry:
                    written += await self._reconcile(entry, actor, emit)
        return written

    # ================================================================== inspect / board / misc

    def active_wal_paths(self) -> list[Path]:
        return [e.path for e in self._active.values()]

    def active_dags(self) -> list[TaskDag]:
        return [e.dag for e in self._active.values()]

    def inspect_views(self, *, include_events: bool = True) -> list[TaskInspectView]:
        """One view per WAL of the session (filename order) for ``replay_session`` (runtime.md §10.3)."""
        active = {e.path: e for e in self._active.values()}
        views: list[TaskInspectView] = []
        for path in wal_mod.list_wal_files(self.session_dir):
            events = wal_mod.read_timeline(path) if include_events else []
            if path in active:
                dag = active[path].dag
                views.append(
                    TaskInspectView(
                        task_id=dag.task_id,
                        wal_path=str(path),
                        status=dag.status.value,
                        task=inspect_task(dag),
                        wal_events=events,
                    )
                )
                continue
            if path in self._unavailable:
                views.append(self._error_view(path, self._unavailable[path], events))
                continue
            try:
                dag = self._replay_read_only(path)
            except WalReplayError as exc:
                views.append(self._error_view(path, exc, events))
                continue
            views.append(
                TaskInspectView(
                    task_id=dag.task_id,
                    wal_path=str(path),
                    status=dag.status.value,
                    task={**inspect_task(dag), "read_only": True},
                    wal_events=events,
                )
            )
        return views

    @staticmethod
    def _error_view(
        path: Path, err: AgentCoreError, events: list[dict[str, Any]] | None = None
    ) -> TaskInspectView:
        payload = AgentCoreError(
            ErrorCode.task_wal_unavailable, err.message, details=dict(err.details)
        ).to_payload()
        task_id = err.details.get("task_id")
        return TaskInspectView(
            task_id=task_id if isinstance(task_id, str) else None,
            wal_path=str(path),
            status=None,
            task=None,
            wal_events=events or [],
            error=payload,
        )

    def has_attention_items(self) -> bool:
        """A blocked/running Task or a ready/running/blocked step exists (context.md §13.2)."""
        for dag in self.active_dags():
            if dag.status in (TaskStatus.blocked, TaskStatus.running):
                return True
            if any(
                s.status in (StepStatus.ready, StepStatus.running, StepStatus.blocked) for s in dag.steps()
            ):
                return True
        return False

    def board_summary(
        self,
        caller: TaskCaller,
        *,
        token_budget: int = 1200,
        recent_limit: int = 20,
        recent_window_minutes: int = 30,
        estimate_tokens: Callable[[str], int] | None = None,
    ) -> str | None:
        """The Task board text (without the ``<task_board>`` wrapper) or ``None`` when nothing is active.

        Worker runs see only their dispatch Task and in-scope steps (task-board.md §13).
        """
        scope = caller.worker_scope if caller.role == AgentRole.worker else None
        dags = self.active_dags()
        if scope is not None:
            dags = [d for d in dags if d.task_id == scope.task_id]
        recent = list(self._recent)
        if scope is not None:
            steps = {s.step_id: s for d in dags for s in d.steps()}

            def visible(change: RecentChange) -> bool:
                step = steps.get(change.step_id) if change.step_id is not None else None
                return change.task_id == scope.task_id and (
                    change.step_id is None or (step is not None and self._in_scope(scope, step))
                )

            recent = [r for r in recent if visible(r)]
        return render_task_board(
            dags,
            recent,
            viewer_agent_id=caller.agent_id,
            in_scope=(lambda step: self._in_scope(scope, step)) if scope is not None else None,
            default_pool=self.default_pool_id(),
            token_budget=token_budget,
            recent_limit=recent_limit,
            recent_window_minutes=recent_window_minutes,
            now=self._clock(),
            estimate_tokens=estimate_tokens,
        )


def _lease_valid(step: TaskStep, now: datetime) -> bool:
    return step.lease_expires_at is not None and parse_ts(step.lease_expires_at) >= now

"""The read side of the Task board: ``agent.task_get`` / ``task_list`` / ``task_query_steps``, the inspect
views of ``replay_session`` and the board summary (docs/task-board.md#task-tools,
docs/task-board.md#the-board-summary; docs/runs.md#replay-and-inspect).

Reads of an active Task reconcile its leases first (under the Task lock); terminal Tasks are replayed
read-only from their WAL. Every WAL read goes through :meth:`WalWriter.offload`: JSONL files are read
right here, the PostgreSQL table on its connection thread, so a slow database never blocks the event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from agent_core._tasks.access import (
    WorkerPools,
    require_board_role,
    require_dispatch_task,
    require_orchestrator,
)
from agent_core._tasks.board import RecentChange, render_task_board
from agent_core._tasks.dag import TaskDag
from agent_core._tasks.inputs import TaskGetInput, TaskListInput, TaskQueryStepsInput
from agent_core._tasks.models import (
    CLOSED_STEP_STATUSES,
    TERMINAL_TASK_STATUSES,
    UNFINISHED_STEP_STATUSES,
    TaskStep,
)
from agent_core._tasks.scope import TaskCaller
from agent_core._tasks.store import EmitFn, TaskEntry, TaskStore, TerminalTask
from agent_core._tasks.views import inspect_task, step_view, task_summary, task_view, unavailable_view
from agent_core._tasks.wal import WalReplayError
from agent_core.errors import AgentCoreError, ErrorCode, InvalidArgumentError, PermissionDeniedError
from agent_core.types.base import parse_ts
from agent_core.types.enums import AgentRole, StepStatus, TaskStatus
from agent_core.types.runtime import TaskInspectView


class TaskReads:
    """Read operations over one session's :class:`~agent_core._tasks.store.TaskStore`."""

    def __init__(self, store: TaskStore, pools: WorkerPools) -> None:
        self._store = store
        self._pools = pools

    async def get_task(
        self, caller: TaskCaller, inp: TaskGetInput, *, emit: EmitFn | None = None
    ) -> dict[str, Any]:
        """``agent.task_get``: active Tasks after lease reconciliation; terminal ones as a read-only replay."""
        scope = require_board_role(caller)
        await self._store.load()
        target = await self._store.resolve(inp.task_id)
        require_dispatch_task(scope, inp.task_id)
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
            path = target.path
            return await self._store.writer.offload(lambda: self._store.replay_read_only(path)), True
        async with target.lock:
            if self._store.active.get(target.dag.task_id) is target:
                await self._store.reconcile(target, caller.actor, emit)
        return target.dag, target.dag.task.terminal

    async def list_tasks(self, caller: TaskCaller, inp: TaskListInput) -> dict[str, Any]:
        """``agent.task_list``: active Tasks (``updated_at`` desc), then terminal WALs (mtime desc).

        Terminal status comes from each file's last line; only terminal WALs inside the page are replayed.
        """
        require_orchestrator(caller)
        await self._store.load()
        status = inp.status
        include_terminal = inp.include_terminal or (status is not None and status in TERMINAL_TASK_STATUSES)
        items: list[tuple[str, Any]] = []
        if status is None or status not in TERMINAL_TASK_STATUSES:
            active = sorted(
                self._store.active.values(),
                key=lambda e: (e.dag.task.updated_at, e.dag.task_id),
                reverse=True,
            )
            items += [("active", e) for e in active if status is None or e.dag.status == status]
            if status is None:
                items += [("unavailable", (p, err)) for p, err in self._store.unavailable.items()]
        if include_terminal:
            taken = self._store.taken_wals()
            terminal = await self._store.writer.offload(lambda: self._terminal_wals(taken, status))
            items += [("terminal", path) for path in terminal]
        page = items[inp.offset : inp.offset + inp.limit]
        page_terminal = [value for kind, value in page if kind == "terminal"]
        replayed = await self._store.writer.offload(lambda: self._replay_all(page_terminal))
        tasks: list[dict[str, Any]] = []
        for kind, value in page:
            if kind == "active":
                tasks.append({**task_summary(value.dag, read_only=False), "wal_path": str(value.path)})
            elif kind == "unavailable":
                path, err = value
                tasks.append(self._unavailable_summary(path, err))
            else:
                dag = replayed[value]
                if isinstance(dag, WalReplayError):
                    tasks.append(self._unavailable_summary(value, dag))
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

    def _terminal_wals(self, taken: set[Path], status: TaskStatus | None) -> list[Path]:
        """Terminal WALs (with ``status`` if given), newest first; may run off the event loop."""
        terminal: list[tuple[int, str, Path]] = []
        for path in self._store.other_wals(taken):
            try:
                tail = self._store.writer.read_tail(path)
                mtime = self._store.writer.mtime_ns(path)
            except OSError:
                continue
            tstatus = tail.terminal_status
            if tstatus is not None and (status is None or tstatus == status):
                terminal.append((mtime, tail.created_at or "", path))
        terminal.sort(key=lambda t: (t[0], t[1]), reverse=True)
        return [t[2] for t in terminal]

    def _replay_all(self, paths: list[Path]) -> dict[Path, TaskDag | WalReplayError]:
        """Read-only replays of ``paths`` (a replay error in place of a WAL that does not replay)."""
        out: dict[Path, TaskDag | WalReplayError] = {}
        for path in paths:
            try:
                out[path] = self._store.replay_read_only(path)
            except WalReplayError as exc:
                out[path] = exc
        return out

    @staticmethod
    def _unavailable_summary(path: Path, err: AgentCoreError) -> dict[str, Any]:
        out: dict[str, Any] = {"wal_path": str(path), "error_code": ErrorCode.task_wal_unavailable.value}
        if err.details.get("task_id"):
            out["task_id"] = err.details["task_id"]
        return out

    async def query_steps(
        self, caller: TaskCaller, inp: TaskQueryStepsInput, *, emit: EmitFn | None = None
    ) -> dict[str, Any]:
        """``agent.task_query_steps`` (docs/task-board.md#task-tools)."""
        scope = require_board_role(caller)
        if inp.statuses and not inp.include_terminal_steps:
            closed = [s.value for s in inp.statuses if s in CLOSED_STEP_STATUSES]
            if closed:
                raise InvalidArgumentError(
                    ErrorCode.validation_error,
                    f"statuses {closed} need include_terminal_steps=true",
                    details={"statuses": closed},
                )
        await self._store.load()
        target = await self._store.resolve(inp.task_id)
        require_dispatch_task(scope, inp.task_id)
        if (
            scope is not None
            and inp.worker_pool_id is not None
            and inp.worker_pool_id != scope.worker_pool_id
        ):
            raise PermissionDeniedError(ErrorCode.permission_denied, "a worker may only query its own pool")
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
        default_pool = self._pools.default_pool_id()
        entry = target if isinstance(target, TaskEntry) else None
        no_ready = dag.status != TaskStatus.running and dag.status != TaskStatus.pending
        no_ready = no_ready or (entry is not None and entry.terminating)
        now = self._store.clock()
        steps: list[TaskStep] = []
        for step in dag.steps():
            if step.status not in wanted:
                continue
            if inp.worker_pool_id is not None and (step.worker_pool_id or default_pool) != inp.worker_pool_id:
                continue
            if inp.claimed_by_agent_id is not None and step.claimed_by_agent_id != inp.claimed_by_agent_id:
                continue
            if scope is not None:
                if not self._pools.in_scope(scope, step):
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

    async def inspect_views(self, *, include_events: bool = True) -> list[TaskInspectView]:
        """One view per WAL of the session (filename order) for ``replay_session``
        (docs/runs.md#replay-and-inspect)."""
        active = {e.path: e for e in self._store.active.values()}
        unavailable = dict(self._store.unavailable)
        reads = await self._store.writer.offload(
            lambda: self._inspect_reads(active, unavailable, include_events)
        )
        views: list[TaskInspectView] = []
        for path, events, replayed in reads:
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
            elif path in unavailable:
                views.append(unavailable_view(path, unavailable[path], events))
            elif isinstance(replayed, WalReplayError):
                views.append(unavailable_view(path, replayed, events))
            elif replayed is not None:
                views.append(
                    TaskInspectView(
                        task_id=replayed.task_id,
                        wal_path=str(path),
                        status=replayed.status.value,
                        task={**inspect_task(replayed), "read_only": True},
                        wal_events=events,
                    )
                )
        return views

    def _inspect_reads(
        self, active: dict[Path, TaskEntry], unavailable: dict[Path, AgentCoreError], include_events: bool
    ) -> list[tuple[Path, list[dict[str, Any]], TaskDag | WalReplayError | None]]:
        """Per WAL of the session: its timeline and, unless active or unavailable, its read-only replay.
        Touches no store state (it may run off the event loop)."""
        writer = self._store.writer
        out: list[tuple[Path, list[dict[str, Any]], TaskDag | WalReplayError | None]] = []
        for path in writer.list_wal_files(self._store.session_dir):
            if path not in active and writer.uncommitted_create(path):
                continue  # not a Task: a create that never committed (removed at restore)
            events = writer.read_timeline(path) if include_events else []
            replayed: TaskDag | WalReplayError | None = None
            if path not in active and path not in unavailable:
                try:
                    replayed = self._store.replay_read_only(path)
                except WalReplayError as exc:
                    replayed = exc
            out.append((path, events, replayed))
        return out

    def has_attention_items(self) -> bool:
        """A blocked/running Task or a ready/running/blocked step exists
        (docs/context.md#the-task-board-summary)."""
        for dag in self._store.active_dags():
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

        Worker runs see only their dispatch Task and in-scope steps (docs/task-board.md#the-board-summary).
        """
        scope = caller.worker_scope if caller.role == AgentRole.worker else None
        dags = self._store.active_dags()
        if scope is not None:
            dags = [d for d in dags if d.task_id == scope.task_id]
        recent = list(self._store.recent)
        if scope is not None:
            steps = {s.step_id: s for d in dags for s in d.steps()}

            def visible(change: RecentChange) -> bool:
                step = steps.get(change.step_id) if change.step_id is not None else None
                return change.task_id == scope.task_id and (
                    change.step_id is None or (step is not None and self._pools.in_scope(scope, step))
                )

            recent = [r for r in recent if visible(r)]
        return render_task_board(
            dags,
            recent,
            viewer_agent_id=caller.agent_id,
            in_scope=(lambda step: self._pools.in_scope(scope, step)) if scope is not None else None,
            default_pool=self._pools.default_pool_id(),
            token_budget=token_budget,
            recent_limit=recent_limit,
            recent_window_minutes=recent_window_minutes,
            now=self._store.clock(),
            estimate_tokens=estimate_tokens,
        )


def _lease_valid(step: TaskStep, now: datetime) -> bool:
    return step.lease_expires_at is not None and parse_ts(step.lease_expires_at) >= now

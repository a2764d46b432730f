"""Per-session Task state and durability: restore, the commit protocol and resolution.

Commit protocol (docs/task-board.md#commit-protocol): under the Task's ``asyncio.Lock`` a pure decision
(:mod:`agent_core._tasks.decide`) returns records → the :class:`WalWriter` appends them (one write, fsync) →
the live :class:`TaskDag` applies the same records → runtime events are emitted in WAL order. A failed
append leaves memory untouched, emits ``task_wal_failed`` (``phase="append"``) and raises ``storage_error``.

Events go through an :data:`EmitFn`: the tool adapter passes one bound to the calling run's sink; restore
and other out-of-call work use the store's ``emit`` with the actor passed along.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from agent_core._concurrency import run_to_end
from agent_core._ids import validate_id
from agent_core._tasks.board import RecentChange
from agent_core._tasks.dag import CORE, Actor, TaskDag
from agent_core._tasks.decide import decide_heal, decide_lease_expiry
from agent_core._tasks.inputs import dedupe
from agent_core._tasks.models import HELD_STEP_STATUSES, TaskWalEvent
from agent_core._tasks.views import inspect_task, mirror_event, unavailable_view
from agent_core._tasks.wal import ReplayOutcome, WalAppendError, WalReplayError, WalWriter
from agent_core.errors import (
    AgentCoreError,
    ErrorCode,
    InternalError,
    TaskError,
    TaskNotFoundError,
    TaskWalUnavailableError,
)
from agent_core.types import events as ev
from agent_core.types.base import utc_now
from agent_core.types.enums import TaskStatus
from agent_core.types.runtime import TaskInspectView

logger = logging.getLogger("agent_core._tasks")

EmitFn = Callable[[ev.EventPayload, Actor], Awaitable[None]]
"""Emits one runtime event on behalf of ``actor`` (``agent_id``/``run_id`` of the event)."""
CancelWorkerRuns = Callable[[list[str], str], Awaitable[None]]
"""Requests cancellation of worker runs (reason ``task_failed``/``task_cancelled``), emits the
``child_agent_cancel_*`` events and returns once they stopped or ``agents.child_cancel_timeout_ms`` passed."""
ArtifactCheck = Callable[[str], Awaitable[bool]]


async def _no_emit(event: ev.EventPayload, actor: Actor) -> None:
    return None


@dataclass(eq=False, slots=True)
class TaskEntry:
    """An active Task: its DAG, WAL file, commit lock and the in-memory *terminating* flag."""

    dag: TaskDag
    path: Path
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    terminating: bool = False


@dataclass(frozen=True, slots=True)
class TerminalTask:
    """A terminal Task (tombstone): its WAL and status; ``dag`` is kept when it ended in this process."""

    task_id: str
    path: Path
    status: TaskStatus
    dag: TaskDag | None = None


class TaskStore:
    """Active / unavailable / terminal Tasks of one session and the machinery to change them.

    The state is shared with the service's other parts (:mod:`~agent_core._tasks.reads`,
    :mod:`~agent_core._tasks.worker_runs`); every change of a Task goes through :meth:`commit`.
    """

    def __init__(
        self,
        session_id: str,
        wal_dir: Path | None,
        project: Path,
        *,
        clock: Callable[[], datetime] = utc_now,
        emit: EmitFn | None = None,
        writer: WalWriter | None = None,
        recent_capacity: int = 256,
    ) -> None:
        self.session_id = validate_id(session_id)
        self.wal_root = (wal_dir if wal_dir is not None else project / ".soong-agent" / "tasks").resolve()
        self.wal_dir_configured = wal_dir if wal_dir is not None else project / ".soong-agent" / "tasks"
        """``wal_root`` before symlink resolution (``create_task`` checks it stays inside the project)."""
        self.project = project
        self.session_dir = self.wal_root / session_id
        self.clock = clock
        self.emit: EmitFn = emit or _no_emit
        """The store's own event sink (restore and out-of-call work); tool calls pass theirs."""
        self.writer = writer or WalWriter()
        self.active: dict[str, TaskEntry] = {}
        self.unavailable: dict[Path, AgentCoreError] = {}
        """Non-terminal WALs that could not be restored (or became unreadable), with the error."""
        self.tombstones: dict[str, TerminalTask] = {}
        self.recent: deque[RecentChange] = deque(maxlen=recent_capacity)
        """The latest WAL records (the board's *recent changes*)."""
        self._first_ids: dict[Path, str | None] = {}
        self._load_lock = asyncio.Lock()
        self._loaded = False

    # ================================================================== restore

    async def load(self) -> list[TaskInspectView]:
        """Restores the session's non-terminal Tasks once per process (docs/task-board.md#restore-and-replay).

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
            for e in self.active.values()
        ]
        views += [unavailable_view(path, err) for path, err in self.unavailable.items()]
        return views

    async def _restore(self) -> None:
        for path in await self.writer.offload(lambda: self.writer.list_wal_files(self.session_dir)):
            if self.writer.uncommitted_create(path):
                # A create killed before its first commit was written: no Task, and the name is free again.
                try:
                    self.writer.remove(path)
                except OSError as exc:
                    logger.warning("cannot remove the uncommitted Task WAL %s: %s", path, exc)
                else:
                    logger.info("removed %s: a Task create that never committed", path.name)
                    continue
            try:
                outcome = await self.writer.offload(functools.partial(self._replay_active, path))
                if outcome is None:
                    continue
                task_id = outcome.dag.task_id
                if task_id in self.active or any(
                    e.details.get("task_id") == task_id for e in self.unavailable.values()
                ):
                    raise WalReplayError(
                        path, f"a second active WAL for task_id {task_id!r}", task_id=task_id
                    )
            except (WalReplayError, OSError) as exc:
                err = exc if isinstance(exc, WalReplayError) else WalReplayError(path, str(exc), task_id=None)
                self.unavailable[path] = err
                await self.emit_wal_failed(path, err, "replay", CORE, self.emit)
                continue
            entry = TaskEntry(dag=outcome.dag, path=path)
            self.active[task_id] = entry
            self.remember(outcome.recent)
            replayed = ev.TaskWalReplayed(
                task_id=task_id,
                wal_path=str(path),
                records=outcome.records,
                last_wal_seq=outcome.dag.last_wal_seq,
                torn_tail_truncated=outcome.torn_tail_truncated,
            )
            await self.emit(replayed, CORE)
            async with entry.lock:
                try:
                    await self.reconcile(entry, CORE, self.emit)
                    await self.commit(entry, decide_heal(entry.dag, now=self.clock(), actor=CORE), CORE, None)
                except AgentCoreError as exc:
                    logger.warning("restore of Task %s could not finish: %s", task_id, exc)

    def _replay_active(self, path: Path) -> ReplayOutcome | None:
        """The replayed WAL, or ``None`` when it is terminal (its tail says so)."""
        if self.writer.read_tail(path).terminal_status is not None:
            return None
        return self.writer.replay(
            path, session_id=self.session_id, repair=True, recent=self.recent.maxlen or 64
        )

    # ================================================================== commit machinery

    async def commit(
        self, entry: TaskEntry, records: list[TaskWalEvent], actor: Actor, emit: EmitFn | None
    ) -> list[TaskWalEvent]:
        """Append → apply → emit. Raises ``storage_error`` (memory unchanged) when the append fails."""
        if not records:
            return []
        emit = emit or self.emit
        try:
            cancelled = await self._append(entry.path, records)
        except WalAppendError as exc:
            if exc.unavailable:
                self.active.pop(entry.dag.task_id, None)
                self.unavailable[entry.path] = TaskWalUnavailableError(
                    ErrorCode.task_wal_unavailable,
                    f"Task {entry.dag.task_id} is unavailable: its WAL could not be restored after a failed append",
                    details={"task_id": entry.dag.task_id, "wal_path": str(entry.path)},
                )
            await self.emit_wal_failed(entry.path, exc, "append", actor, emit, task_id=entry.dag.task_id)
            raise
        try:
            for record in records:
                entry.dag.apply(record)
        except AgentCoreError as exc:  # pragma: no cover - decisions validate on a copy first
            self.active.pop(entry.dag.task_id, None)
            self.unavailable[entry.path] = TaskWalUnavailableError(
                ErrorCode.task_wal_unavailable,
                f"Task {entry.dag.task_id} is unavailable: a committed record could not be applied",
                details={"task_id": entry.dag.task_id, "wal_path": str(entry.path)},
            )
            raise InternalError(ErrorCode.internal_error, f"inconsistent Task commit: {exc.message}") from exc
        self.remember(records)
        if entry.dag.task.terminal:
            self.active.pop(entry.dag.task_id, None)
            self.tombstones[entry.dag.task_id] = TerminalTask(
                entry.dag.task_id, entry.path, entry.dag.status, entry.dag
            )
        for record in records:
            await emit(mirror_event(str(entry.path), record), actor)
        if cancelled:
            raise asyncio.CancelledError
        return records

    async def _append(self, path: Path, records: list[TaskWalEvent]) -> bool:
        """Appends one commit through :meth:`WalWriter.offload`; returns whether the caller was cancelled
        meanwhile (the append is waited for even then, so a stored commit is always applied in memory)."""
        _, cancelled = await run_to_end(self.writer.offload(lambda: self.writer.append(path, records)))
        return cancelled

    async def reconcile(self, entry: TaskEntry, actor: Actor, emit: EmitFn | None) -> list[TaskWalEvent]:
        return await self.commit(
            entry, decide_lease_expiry(entry.dag, now=self.clock(), actor=actor), actor, emit
        )

    async def emit_wal_failed(
        self,
        path: Path,
        error: AgentCoreError,
        phase: str,
        actor: Actor,
        emit: EmitFn,
        *,
        task_id: str | None = None,
    ) -> None:
        failed = ev.TaskWalFailed(
            wal_path=str(path),
            task_id=task_id if task_id is not None else error.details.get("task_id"),
            phase=phase,
            error=error.to_payload().model_dump(mode="json"),
        )
        await emit(failed, actor)

    def remember(self, records: Sequence[TaskWalEvent]) -> None:
        for r in records:
            self.recent.append(
                RecentChange(
                    created_at=r.created_at,
                    task_id=r.task_id,
                    step_id=r.step_id,
                    event_type=r.event_type,
                    actor_agent_id=r.actor_agent_id,
                )
            )

    def register_created(self, entry: TaskEntry, records: Sequence[TaskWalEvent]) -> None:
        """Adds a Task whose WAL ``create`` just committed (``agent.task_create``)."""
        task_id = entry.dag.task_id
        self.active[task_id] = entry
        self.tombstones.pop(task_id, None)
        self._first_ids.pop(entry.path, None)
        self.remember(records)

    # ================================================================== resolution

    async def resolve(self, task_id: str) -> TaskEntry | TerminalTask:
        """The active Task or the terminal one (``task_not_found``, ``task_wal_unavailable``). A Task known
        in memory answers at once; else the WALs are searched through :meth:`WalWriter.offload` (on a
        database, on its connection thread: the event loop does not wait)."""
        entry = self.active.get(task_id)
        if entry is not None:
            return entry
        for path, err in self.unavailable.items():
            if err.details.get("task_id") == task_id:
                raise TaskWalUnavailableError(
                    ErrorCode.task_wal_unavailable,
                    f"Task {task_id} is unavailable: {err.message}",
                    details={"task_id": task_id, "wal_path": str(path), "error": err.message},
                )
        tomb = self.tombstones.get(task_id)
        if tomb is not None:
            return tomb
        taken = self.taken_wals()
        known = dict(self._first_ids)
        found, first_ids = await self.writer.offload(lambda: self._find_terminal(task_id, taken, known))
        self._first_ids.update(first_ids)
        entry = self.active.get(task_id)  # the store may have changed while the WALs were read
        if entry is not None:
            return entry
        if found is not None:
            return self.tombstones.setdefault(task_id, found)
        raise TaskNotFoundError(ErrorCode.task_not_found, f"no Task {task_id!r} in this session")

    def _find_terminal(
        self, task_id: str, taken: set[Path], known: dict[Path, str | None]
    ) -> tuple[TerminalTask | None, dict[Path, str | None]]:
        """Terminal WAL of ``task_id`` without a tombstone: first lines, newest mtime wins
        (docs/task-board.md#terminal-tasks); also the first task ids read (``known`` caches them). Touches no
        store state (it may run on the writer's thread)."""
        best: tuple[int, Path, TaskStatus] | None = None
        read: dict[Path, str | None] = {}
        for path in self.other_wals(taken):
            if path in known:
                first = known[path]
            else:
                first = read[path] = self.writer.read_first_task_id(path)
            if first != task_id:
                continue
            try:
                status = self.writer.read_tail(path).terminal_status
                mtime = self.writer.mtime_ns(path)
            except OSError:
                continue
            if status is not None and (best is None or mtime > best[0]):
                best = (mtime, path, status)
        return (None if best is None else TerminalTask(task_id, best[1], best[2])), read

    def taken_wals(self) -> set[Path]:
        """WALs that are active or unavailable (read on the event loop, which changes them)."""
        return {e.path for e in self.active.values()} | set(self.unavailable)

    def other_wals(self, taken: set[Path] | None = None) -> list[Path]:
        """WAL files of the session that are neither active nor unavailable (``taken``: as
        :meth:`taken_wals` read them, when this runs off the event loop)."""
        taken = self.taken_wals() if taken is None else taken
        return [p for p in self.writer.list_wal_files(self.session_dir) if p not in taken]

    def replay_read_only(self, path: Path) -> TaskDag:
        return self.writer.replay(path, session_id=self.session_id, repair=False).dag

    async def mutable(self, task_id: str) -> TaskEntry:
        target = await self.resolve(task_id)
        if isinstance(target, TerminalTask):
            raise TaskError(
                ErrorCode.task_terminal, f"Task {task_id} is {target.status}; it accepts no further changes"
            )
        return target

    async def recheck(self, entry: TaskEntry) -> None:
        """After waiting for the Task lock: the Task may have become terminal or unavailable (and, on a
        WAL other processes append to, first catches up with their records)."""
        if self.writer.SHARED and self.active.get(entry.dag.task_id) is entry:
            path, after = entry.path, entry.dag.last_wal_seq
            self._catch_up(entry, await self.writer.offload(lambda: self.writer.records_after(path, after)))
        if self.active.get(entry.dag.task_id) is not entry:
            await self.mutable(entry.dag.task_id)
            raise TaskError(ErrorCode.task_terminal, f"Task {entry.dag.task_id} is terminal")

    def _catch_up(self, entry: TaskEntry, records: list[TaskWalEvent]) -> None:
        """Applies ``records``, which other processes committed since this process last saw ``entry``'s
        WAL (their events were emitted by them). A record that does not apply makes the Task unavailable."""
        if not records:
            return
        try:
            for record in records:
                entry.dag.apply(record)
        except AgentCoreError as exc:
            self.active.pop(entry.dag.task_id, None)
            self.unavailable[entry.path] = TaskWalUnavailableError(
                ErrorCode.task_wal_unavailable,
                f"Task {entry.dag.task_id} is unavailable: a record of another process does not apply: "
                f"{exc.message}",
                details={"task_id": entry.dag.task_id, "wal_path": str(entry.path)},
            )
            return
        self.remember(records)
        if entry.dag.task.terminal:
            self.active.pop(entry.dag.task_id, None)
            self.tombstones[entry.dag.task_id] = TerminalTask(
                entry.dag.task_id, entry.path, entry.dag.status, entry.dag
            )

    async def reconcile_leases(
        self, task_id: str | None = None, *, actor: Actor = CORE, emit: EmitFn | None = None
    ) -> list[TaskWalEvent]:
        """Lease reconciliation for one or every active Task; returns the records written."""
        await self.load()
        entries = [self.active[task_id]] if task_id is not None and task_id in self.active else []
        if task_id is None:
            entries = list(self.active.values())
        written: list[TaskWalEvent] = []
        for entry in entries:
            async with entry.lock:
                if self.active.get(entry.dag.task_id) is entry:
                    written += await self.reconcile(entry, actor, emit)
        return written

    def holder_run_ids(self, task_id: str) -> list[str]:
        """Worker runs holding a claimed/running step of an active Task (to cancel on fail/cancel)."""
        entry = self.active.get(task_id)
        if entry is None:
            return []
        return dedupe(
            [
                s.claimed_by_run_id
                for s in entry.dag.steps()
                if s.status in HELD_STEP_STATUSES and s.claimed_by_run_id
            ]
        )

    # ================================================================== state queries

    def active_wal_paths(self) -> list[Path]:
        return [e.path for e in self.active.values()]

    def active_dags(self) -> list[TaskDag]:
        return [e.dag for e in self.active.values()]

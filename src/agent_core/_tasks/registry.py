"""Per-process registry of :class:`TaskService` instances, one per session (what the runtime wires up).

``await registry.get(session_id)`` creates the session's service on first use and restores its Tasks
(docs/task-board.md#restore-and-replay timing: the first ``runtime.start`` or Task tool call of the session in
this process). All services of a project share one :class:`WalWriter` (the project's single WAL writer).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from pathlib import Path

from agent_core._tasks.dag import Actor
from agent_core._tasks.service import TaskService
from agent_core._tasks.store import CancelWorkerRuns
from agent_core._tasks.wal import WalWriter
from agent_core.types import events as ev
from agent_core.types.base import utc_now

SessionEmit = Callable[[str, ev.EventPayload, Actor], Awaitable[None]]
"""``(session_id, event_type, payload, actor)``: persists an out-of-call Task event (restore, fallback)."""
SessionArtifactCheck = Callable[[str, str], Awaitable[bool]]
"""``(session_id, artifact_id) -> exists``."""


class TaskRegistry:
    def __init__(
        self,
        *,
        project: Path,
        wal_dir: Path | None = None,
        lease_timeout_ms: int = 300_000,
        clock: Callable[[], datetime] = utc_now,
        emit: SessionEmit | None = None,
        writer: WalWriter | None = None,
        pool_ids: Callable[[], Sequence[str]] | None = None,
        artifact_exists: SessionArtifactCheck | None = None,
        cancel_worker_runs: CancelWorkerRuns | None = None,
        child_cancel_timeout_ms: int = 30_000,
    ) -> None:
        self._project = project
        self._wal_dir = wal_dir
        self._lease_timeout_ms = lease_timeout_ms
        self._clock = clock
        self._emit = emit
        self._writer = writer or WalWriter()
        self._pool_ids = pool_ids
        self._artifact_exists = artifact_exists
        self._cancel_worker_runs = cancel_worker_runs
        self._child_cancel_timeout_ms = child_cancel_timeout_ms
        self._services: dict[str, TaskService] = {}
        self._lock = asyncio.Lock()

    def peek(self, session_id: str) -> TaskService | None:
        """The session's service if it was already created in this process."""
        return self._services.get(session_id)

    async def get(self, session_id: str) -> TaskService:
        """The session's service, created and restored on first use."""
        async with self._lock:
            service = self._services.get(session_id)
            if service is None:
                service = self._build(session_id)
                self._services[session_id] = service
        await service.load()
        return service

    def reader(self, session_id: str) -> TaskService:
        """The session's service if this process has one, else a detached service that only reads the
        session's WALs through the registry's writer (the JSONL directory or the storage backend's
        table): nothing is restored, registered or emitted (``replay_session``'s Task views)."""
        service = self._services.get(session_id)
        if service is not None:
            return service
        return TaskService(
            session_id,
            self._wal_dir,
            self._project,
            self._lease_timeout_ms,
            clock=self._clock,
            writer=self._writer,
        )

    def forget(self, session_id: str) -> None:
        """Drops the in-memory service of a deleted session (its WAL files stay,
        docs/task-board.md#storage)."""
        self._services.pop(session_id, None)

    def _build(self, session_id: str) -> TaskService:
        emit = self._emit
        check = self._artifact_exists

        async def session_emit(event: ev.EventPayload, actor: Actor) -> None:
            if emit is not None:
                await emit(session_id, event, actor)

        async def session_check(artifact_id: str) -> bool:
            return check is not None and await check(session_id, artifact_id)

        return TaskService(
            session_id,
            self._wal_dir,
            self._project,
            self._lease_timeout_ms,
            clock=self._clock,
            emit=session_emit,
            writer=self._writer,
            pool_ids=self._pool_ids,
            artifact_exists=session_check if check is not None else None,
            cancel_worker_runs=self._cancel_worker_runs,
            child_cancel_timeout_ms=self._child_cancel_timeout_ms,
        )

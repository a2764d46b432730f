"""The ``background_jobs`` table (migration 3): one row per offloaded tool call
(docs/jobs-and-schedules.md#background-jobs).

``status`` is ``running``, ``completed``, ``failed`` or ``cancelled``; ``delivered`` says whether the
outcome reached the session's inbox (set in the delivery's own transaction, so it is delivered once).
Every write is one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from agent_core._storage.protocol import SessionStore
from agent_core._storage.writer import Txn
from agent_core.types.base import FrozenModel, format_ts

JobStatus = Literal["running", "completed", "failed", "cancelled"]
_COLUMNS = (
    "job_id",
    "session_id",
    "agent_id",
    "run_id",
    "tool_call_id",
    "tool_name",
    "status",
    "artifact_id",
    "summary",
    "error_json",
    "delivered",
    "created_at",
    "updated_at",
)
_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM background_jobs"


class JobRecord(FrozenModel):
    """One stored background job."""

    job_id: str
    session_id: str
    agent_id: str
    run_id: str
    tool_call_id: str
    tool_name: str
    status: JobStatus
    artifact_id: str | None = None
    summary: str | None = None
    error: dict[str, Any] | None = None
    delivered: bool = False
    created_at: str
    updated_at: str


def _record(row: Any) -> JobRecord:
    data = dict(zip(_COLUMNS, tuple(row), strict=True))
    raw = data.pop("error_json")
    data["error"] = json.loads(raw) if raw else None
    data["delivered"] = bool(data["delivered"])
    return JobRecord.model_validate(data)


class JobStore:
    def __init__(self, storage: Callable[[], Awaitable[SessionStore]] | SessionStore) -> None:
        self._storage = storage

    async def _db(self) -> SessionStore:
        if callable(self._storage):  # a store is not callable; the factory is
            return await self._storage()
        return self._storage

    async def insert(self, record: JobRecord) -> None:
        row = (
            record.job_id,
            record.session_id,
            record.agent_id,
            record.run_id,
            record.tool_call_id,
            record.tool_name,
            record.status,
            None,
            None,
            None,
            0,
            record.created_at,
            record.updated_at,
        )

        def op(txn: Txn) -> None:
            marks = ", ".join("?" for _ in _COLUMNS)
            txn.execute(f"INSERT INTO background_jobs ({', '.join(_COLUMNS)}) VALUES ({marks})", row)

        await (await self._db()).write(op)

    async def finish(
        self,
        job_id: str,
        status: JobStatus,
        *,
        artifact_id: str | None = None,
        summary: str | None = None,
        error: dict[str, Any] | None = None,
        delivered: bool = False,
    ) -> bool:
        """Moves a ``running`` job to its terminal status; False when it was no longer running."""
        db = await self._db()
        error_text = db.redactor.text(json.dumps(error, ensure_ascii=False)) if error else None
        summary_text = db.redactor.text(summary) if summary else None

        def op(txn: Txn) -> int:
            return txn.execute(
                "UPDATE background_jobs SET status = ?, artifact_id = ?, summary = ?, error_json = ?, "
                "delivered = ?, updated_at = ? WHERE job_id = ? AND status = 'running'",
                (status, artifact_id, summary_text, error_text, int(delivered), format_ts(), job_id),
            )

        return await db.write(op) > 0

    async def fail_running(self, message: str) -> list[JobRecord]:
        """Marks ``running`` jobs failed (recovery after a crash) — except those of runs another live
        process (or open store) owns: that process still runs them (several processes on one home,
        issue 40); returns the jobs marked, as they are now."""
        db = await self._db()
        rows = await db.query(f"{_SELECT} WHERE status = 'running'")
        stale = [_record(r) for r in rows]
        if stale:
            live = await db.runs_live_elsewhere(sorted({r.run_id for r in stale}))
            stale = [r for r in stale if r.run_id not in live]
        if not stale:
            return []
        error = json.dumps({"code": "internal_error", "message": message})
        ids = [r.job_id for r in stale]

        def op(txn: Txn) -> None:
            for job_id in ids:
                txn.execute(
                    "UPDATE background_jobs SET status = 'failed', error_json = ?, updated_at = ? "
                    "WHERE job_id = ? AND status = 'running'",
                    (error, format_ts(), job_id),
                )

        await db.write(op)
        return [r.model_copy(update={"status": "failed", "error": json.loads(error)}) for r in stale]

    async def undelivered(self, session_id: str) -> list[JobRecord]:
        """Terminal jobs of a session whose outcome was not delivered yet (oldest first)."""
        rows = await (await self._db()).query(
            f"{_SELECT} WHERE session_id = ? AND delivered = 0 AND status != 'running' ORDER BY updated_at, rowid",
            (session_id,),
        )
        return [_record(r) for r in rows]

    async def get(self, job_id: str) -> JobRecord | None:
        rows = await (await self._db()).query(f"{_SELECT} WHERE job_id = ?", (job_id,))
        return _record(rows[0]) if rows else None

"""The ``schedules`` table (migration 4) over the session store (docs/jobs-and-schedules.md#schedules).

A schedule belongs to one project (its resolved directory); ``session_id`` ``None`` means every firing
starts a new session. ``next_due_at`` is the one pending occurrence: firing moves it to the first
occurrence after the firing time, so any number of missed occurrences become one catch-up.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path

from agent_core._ids import new_id, validate_session_id
from agent_core._storage.protocol import SessionStore
from agent_core._storage.writer import Txn
from agent_core.errors import ErrorCode, InvalidArgumentError, NotFoundError
from agent_core.schedules._cron import next_after, validate_cron
from agent_core.types.base import FrozenModel, format_ts, parse_ts

_COLUMNS = (
    "schedule_id",
    "cron",
    "message",
    "project",
    "session_id",
    "next_due_at",
    "last_fired_at",
    "last_session_id",
    "last_run_id",
    "last_error",
    "created_at",
)
_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM schedules"


class Schedule(FrozenModel):
    """One stored cron schedule (times are aware UTC datetimes)."""

    schedule_id: str
    cron: str
    message: str
    project: str
    session_id: str | None
    next_due_at: datetime
    last_fired_at: datetime | None = None
    last_session_id: str | None = None
    last_run_id: str | None = None
    last_error: str | None = None
    created_at: datetime


def _from_row(row: tuple[object, ...]) -> Schedule:
    data = dict(zip(_COLUMNS, row, strict=True))
    for key in ("next_due_at", "last_fired_at", "created_at"):
        value = data[key]
        data[key] = parse_ts(value) if isinstance(value, str) else None
    return Schedule.model_validate(data)


class ScheduleStore:
    """Adds, lists, removes and advances schedules; every write is one transaction."""

    def __init__(self, storage: Callable[[], Awaitable[SessionStore]]) -> None:
        self._get_storage = storage

    async def add(
        self, *, cron: str, message: str, project: Path, session_id: str | None, now: datetime
    ) -> Schedule:
        """Validates and stores a schedule; its first due time is the first occurrence after ``now``."""
        expr = validate_cron(cron)
        storage = await self._get_storage()
        if not message.strip():
            raise InvalidArgumentError(ErrorCode.validation_error, "the schedule message must not be empty")
        if session_id is not None:
            validate_session_id(session_id)
        schedule = Schedule(
            schedule_id=new_id("sched_"),
            cron=expr,
            message=storage.redactor.text(message),
            project=str(project),
            session_id=session_id,
            next_due_at=next_after(expr, now),
            created_at=now,
        )
        row = (
            schedule.schedule_id,
            schedule.cron,
            schedule.message,
            schedule.project,
            schedule.session_id,
            format_ts(schedule.next_due_at),
            None,
            None,
            None,
            None,
            format_ts(schedule.created_at),
        )

        def op(txn: Txn) -> None:
            txn.execute(
                f"INSERT INTO schedules ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' for _ in _COLUMNS)})",
                row,
            )

        await storage.write(op)
        return schedule

    async def list(self, project: Path | None = None) -> list[Schedule]:
        """Oldest first; only ``project``'s schedules when given."""
        storage = await self._get_storage()
        if project is None:
            rows = await storage.query(f"{_SELECT} ORDER BY created_at, rowid")
        else:
            rows = await storage.query(
                f"{_SELECT} WHERE project = ? ORDER BY created_at, rowid", (str(project),)
            )
        return [_from_row(tuple(r)) for r in rows]

    async def get(self, schedule_id: str) -> Schedule | None:
        rows = await (await self._get_storage()).query(f"{_SELECT} WHERE schedule_id = ?", (schedule_id,))
        return _from_row(tuple(rows[0])) if rows else None

    async def remove(self, schedule_id: str) -> None:
        """Deletes a schedule; an unknown id is a ``validation_error``."""

        def op(txn: Txn) -> int:
            return txn.execute("DELETE FROM schedules WHERE schedule_id = ?", (schedule_id,))

        if await (await self._get_storage()).write(op) == 0:
            raise NotFoundError(
                ErrorCode.validation_error,
                f"unknown schedule {schedule_id!r}",
                details={"schedule_id": schedule_id},
            )

    async def claim_due(self, schedule: Schedule, now: datetime) -> Schedule | None:
        """Marks one due schedule fired at ``now`` and moves ``next_due_at`` past ``now``.

        Returns the updated schedule, or ``None`` when another process already advanced it (the update
        is conditional on the ``next_due_at`` this process saw), so a due time fires once.
        """
        following = next_after(schedule.cron, now)
        seen = format_ts(schedule.next_due_at)

        def op(txn: Txn) -> int:
            return txn.execute(
                "UPDATE schedules SET next_due_at = ?, last_fired_at = ?, last_error = NULL "
                "WHERE schedule_id = ? AND next_due_at = ?",
                (format_ts(following), format_ts(now), schedule.schedule_id, seen),
            )

        if await (await self._get_storage()).write(op) == 0:
            return None
        return schedule.model_copy(
            update={"next_due_at": following, "last_fired_at": now, "last_error": None}
        )

    async def record_outcome(
        self,
        schedule_id: str,
        *,
        session_id: str | None = None,
        run_id: str | None = None,
        error: str | None = None,
    ) -> None:
        """Stores what the last firing started (or why it could not start)."""
        storage = await self._get_storage()
        text = None if error is None else storage.redactor.text(error)

        def op(txn: Txn) -> None:
            txn.execute(
                "UPDATE schedules SET last_session_id = COALESCE(?, last_session_id), "
                "last_run_id = COALESCE(?, last_run_id), last_error = ? WHERE schedule_id = ?",
                (session_id, run_id, text, schedule_id),
            )

        await storage.write(op)

"""The ``teammates`` and ``team_requests`` tables (migration 6) over the session store, on every backend.

A teammate row names its own session and root agent, its lead's session and agent, its name (unique
among the lead's active teammates), ``state`` (``active`` / ``stopped``) and its settings (resident,
isolation, autonomy, definition, worktree). A request row is one ``plan_approval`` or ``shutdown`` request
between a lead and a teammate, answered exactly once (:func:`answer_guard` runs in the transaction that
delivers the answer, so the answer and its delivery commit together).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal

from agent_core._storage.protocol import SessionStore
from agent_core._storage.writer import Txn
from agent_core.types.base import FrozenModel, format_ts

RequestKind = Literal["plan_approval", "shutdown"]
REQUEST_KINDS: tuple[str, ...] = ("plan_approval", "shutdown")

_MATE_COLUMNS = (
    "session_id",
    "agent_id",
    "lead_session_id",
    "lead_agent_id",
    "name",
    "state",
    "settings_json",
    "created_at",
    "updated_at",
)
_REQUEST_COLUMNS = (
    "request_id",
    "kind",
    "lead_session_id",
    "from_session_id",
    "from_agent_id",
    "from_name",
    "to_session_id",
    "to_agent_id",
    "to_name",
    "content",
    "status",
    "reason",
    "created_at",
    "answered_at",
)


class TeammateRecord(FrozenModel):
    session_id: str
    agent_id: str
    lead_session_id: str
    lead_agent_id: str
    name: str
    state: Literal["active", "stopped"]
    settings: dict[str, Any]
    created_at: str
    updated_at: str

    def setting(self, key: str, default: Any = None) -> Any:
        return self.settings.get(key, default)


class RequestRecord(FrozenModel):
    request_id: str
    kind: RequestKind
    lead_session_id: str
    from_session_id: str
    from_agent_id: str
    from_name: str
    to_session_id: str
    to_agent_id: str
    to_name: str
    content: str
    status: Literal["pending", "approved", "rejected"]
    reason: str | None = None
    created_at: str
    answered_at: str | None = None


def _mate(row: Any) -> TeammateRecord:
    data = dict(zip(_MATE_COLUMNS, tuple(row), strict=True))
    data["settings"] = json.loads(data.pop("settings_json") or "{}")
    return TeammateRecord.model_validate(data)


def _request(row: Any) -> RequestRecord:
    return RequestRecord.model_validate(dict(zip(_REQUEST_COLUMNS, tuple(row), strict=True)))


def insert_request_guard(record: RequestRecord) -> Callable[[Txn], bool]:
    """Stores ``record`` inside the transaction that delivers the request to its recipient's inbox."""
    row = tuple(record.model_dump()[c] for c in _REQUEST_COLUMNS)
    marks = ", ".join("?" for _ in _REQUEST_COLUMNS)

    def guard(txn: Txn) -> bool:
        txn.execute(f"INSERT INTO team_requests ({', '.join(_REQUEST_COLUMNS)}) VALUES ({marks})", row)
        return True

    return guard


def answer_guard(request_id: str, approve: bool, reason: str | None) -> Callable[[Txn], bool]:
    """Answers a pending request inside the transaction that delivers the answer (``False``: it was
    answered already, nothing is delivered)."""
    status = "approved" if approve else "rejected"

    def guard(txn: Txn) -> bool:
        return (
            txn.execute(
                "UPDATE team_requests SET status = ?, reason = ?, answered_at = ? "
                "WHERE request_id = ? AND status = 'pending'",
                (status, reason, format_ts(), request_id),
            )
            > 0
        )

    return guard


class TeamStore:
    """The team tables of one open :class:`SessionStore`."""

    def __init__(self, storage: SessionStore) -> None:
        self._storage = storage

    async def insert(self, record: TeammateRecord) -> None:
        values = {**record.model_dump(), "settings_json": json.dumps(record.settings, ensure_ascii=False)}
        row = tuple(values[c] for c in _MATE_COLUMNS)
        marks = ", ".join("?" for _ in _MATE_COLUMNS)

        def op(txn: Txn) -> None:
            txn.execute(f"INSERT INTO teammates ({', '.join(_MATE_COLUMNS)}) VALUES ({marks})", row)

        await self._storage.write(op)

    async def stop(self, session_id: str, reason: str) -> bool:
        """Marks an active teammate stopped (``False``: it was stopped already)."""

        def op(txn: Txn) -> bool:
            found = txn.fetchall(
                f"SELECT settings_json FROM teammates WHERE session_id = ? AND state = 'active'"
                f"{self._storage.ROW_LOCK}",
                (session_id,),
            )
            if not found:
                return False
            settings = {**json.loads(found[0][0] or "{}"), "stopped_reason": reason}
            txn.execute(
                "UPDATE teammates SET state = 'stopped', settings_json = ?, updated_at = ? WHERE session_id = ?",
                (json.dumps(settings, ensure_ascii=False), format_ts(), session_id),
            )
            return True

        return bool(await self._storage.write(op))

    async def get(self, session_id: str) -> TeammateRecord | None:
        rows = await self._storage.query(
            f"SELECT {', '.join(_MATE_COLUMNS)} FROM teammates WHERE session_id = ?", (session_id,)
        )
        return _mate(rows[0]) if rows else None

    async def of_lead(self, lead_session_id: str) -> list[TeammateRecord]:
        """The lead's teammates, oldest first (stopped ones included)."""
        rows = await self._storage.query(
            f"SELECT {', '.join(_MATE_COLUMNS)} FROM teammates WHERE lead_session_id = ? ORDER BY rowid",
            (lead_session_id,),
        )
        return [_mate(r) for r in rows]

    async def request(self, request_id: str) -> RequestRecord | None:
        rows = await self._storage.query(
            f"SELECT {', '.join(_REQUEST_COLUMNS)} FROM team_requests WHERE request_id = ?", (request_id,)
        )
        return _request(rows[0]) if rows else None

    async def requests_of(self, lead_session_id: str) -> list[RequestRecord]:
        rows = await self._storage.query(
            f"SELECT {', '.join(_REQUEST_COLUMNS)} FROM team_requests WHERE lead_session_id = ? ORDER BY rowid",
            (lead_session_id,),
        )
        return [_request(r) for r in rows]

"""Durable pending permission requests (surfaces.md §2 "Durable approvals"; migration 2).

One row per request shown to a client of ``soong-agent serve``: written (``pending``) before the request
is shown, turned ``answered`` by exactly one conditional update (the first answer wins; the answer is
committed before the waiting run continues), or ``expired`` when its run stopped waiting or the server
restarted. An ``expired`` request is never allowed.

Writes go through the storage manager's single writer queue; reads through its read connection.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

from agent_core._storage.writer import Txn
from agent_core.types.base import format_ts
from agent_core.types.permissions import PermissionDecision, PermissionRequest

if TYPE_CHECKING:
    from agent_core._storage.protocol import SessionStore

ApprovalStatus = Literal["pending", "answered", "expired"]
AnswerOutcome = Literal["won", "answered", "expired", "missing"]

_COLUMNS = "request_id, run_id, session_id, request_json, status, answer_json, created_at, answered_at"


class ApprovalRow:
    """One stored request (plain values; the request is validated on read)."""

    __slots__ = ("answer", "answered_at", "created_at", "request", "run_id", "session_id", "status")

    def __init__(self, row: tuple[Any, ...]) -> None:
        _, self.run_id, self.session_id, request_json, status, answer_json, created, answered = row
        self.request = PermissionRequest.model_validate_json(request_json)
        self.status: ApprovalStatus = status
        self.answer = PermissionDecision.model_validate_json(answer_json) if answer_json else None
        self.created_at: str = created
        self.answered_at: str | None = answered

    @property
    def request_id(self) -> str:
        return self.request.request_id


class ApprovalStore:
    """The ``pending_approvals`` table of one open :class:`SessionStore`."""

    def __init__(self, storage: SessionStore) -> None:
        self._storage = storage

    async def insert(self, request: PermissionRequest) -> None:
        """Persists ``request`` as ``pending`` (committed when this returns)."""
        now = format_ts()
        values = (
            request.request_id,
            request.run_id,
            request.session_id,
            request.model_dump_json(),
            "pending",
            None,
            now,
            None,
            now,
        )

        def op(txn: Txn) -> None:
            txn.execute(
                f"INSERT INTO pending_approvals ({_COLUMNS}, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                values,
            )

        await self._storage.write(op)

    async def answer(self, request_id: str, decision: PermissionDecision) -> AnswerOutcome:
        """Records the first answer: ``"won"``, else why not (``"answered"``, ``"expired"``, ``"missing"``)."""
        now = format_ts()
        answer_json = decision.model_dump_json()

        def op(txn: Txn) -> AnswerOutcome:
            changed = txn.execute(
                "UPDATE pending_approvals SET status = 'answered', answer_json = ?, answered_at = ?, "
                "updated_at = ? WHERE request_id = ? AND status = 'pending'",
                (answer_json, now, now, request_id),
            )
            if changed == 1:
                return "won"
            status = txn.scalar("SELECT status FROM pending_approvals WHERE request_id = ?", (request_id,))
            return "missing" if status is None else ("expired" if status == "expired" else "answered")

        return await self._storage.write(op)

    async def expire(self, *, request_id: str | None = None, run_id: str | None = None) -> int:
        """Marks pending rows ``expired`` (one request, one run's, or every one); returns how many."""
        now = format_ts()
        where, params = "status = 'pending'", [now, now]
        if request_id is not None:
            where, params = where + " AND request_id = ?", [*params, request_id]
        if run_id is not None:
            where, params = where + " AND run_id = ?", [*params, run_id]

        def op(txn: Txn) -> int:
            return txn.execute(
                f"UPDATE pending_approvals SET status = 'expired', answered_at = ?, updated_at = ? WHERE {where}",
                params,
            )

        return await self._storage.write(op)

    async def delete_session(self, session_id: str) -> int:
        def op(txn: Txn) -> int:
            return txn.execute("DELETE FROM pending_approvals WHERE session_id = ?", (session_id,))

        return await self._storage.write(op)

    async def get(self, request_id: str) -> ApprovalRow | None:
        rows = await self._storage.query(
            f"SELECT {_COLUMNS} FROM pending_approvals WHERE request_id = ?", (request_id,)
        )
        return ApprovalRow(tuple(rows[0])) if rows else None

    async def list(self, statuses: tuple[ApprovalStatus, ...] = ("pending",)) -> list[ApprovalRow]:
        """Rows with one of ``statuses``, oldest first."""
        marks = ", ".join("?" for _ in statuses)
        rows = await self._storage.query(
            f"SELECT {_COLUMNS} FROM pending_approvals WHERE status IN ({marks}) ORDER BY created_at, rowid",
            statuses,
        )
        return [ApprovalRow(tuple(row)) for row in rows]


def request_json(row: ApprovalRow) -> dict[str, Any]:
    """The API view of a row: the ``PermissionRequest`` plus ``status``, ``created_at`` and the answer."""
    out: dict[str, Any] = json.loads(row.request.model_dump_json())
    out.update(
        status=row.status,
        created_at=row.created_at,
        answered_at=row.answered_at,
        answer=row.answer.decision if row.answer else None,
    )
    return out

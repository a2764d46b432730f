"""Durable pending requests of ``soong-agent serve``: permission requests (docs/serve.md#approvals "Durable
approvals"; migration 2) and the model's questions to the user (``internal.ask_user``; migration 7).

One row per request shown to a client: written (``pending``) before the request is shown, turned
``answered`` by exactly one conditional update (the first answer wins; the answer is committed before the
waiting run continues), or ``expired`` when its run stopped waiting or the server restarted. An ``expired``
request is never answered (a permission never allowed, a question never answered).

:class:`PendingStore` is the table logic for both; :class:`ApprovalStore` (``pending_approvals``) and
:class:`QuestionStore` (``pending_questions``) name the table and the request and answer models. Writes go
through the storage manager's single writer queue; reads through its read connection.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypeVar

from pydantic import BaseModel

from agent_core._storage.writer import Txn
from agent_core.types.base import StrictModel, format_ts
from agent_core.types.permissions import PermissionDecision, PermissionRequest, UserQuestion

if TYPE_CHECKING:
    from agent_core._storage.protocol import SessionStore

ApprovalStatus = Literal["pending", "answered", "expired"]
AnswerOutcome = Literal["won", "answered", "expired", "missing"]
Req = TypeVar("Req", bound=BaseModel)
Ans = TypeVar("Ans", bound=BaseModel)

_COLUMNS = "request_id, run_id, session_id, request_json, status, answer_json, created_at, answered_at"


class QuestionAnswer(StrictModel):
    """The stored answer to a :class:`UserQuestion`."""

    answer: str


class PendingRow(Generic[Req, Ans]):
    """One stored request (plain values; the request is validated on read)."""

    __slots__ = (
        "answer",
        "answered_at",
        "created_at",
        "request",
        "request_id",
        "run_id",
        "session_id",
        "status",
    )

    def __init__(self, row: tuple[Any, ...], request_model: type[Req], answer_model: type[Ans]) -> None:
        self.request_id: str = row[0]
        _, self.run_id, self.session_id, request_json, status, answer_json, created, answered = row
        self.request: Req = request_model.model_validate_json(request_json)
        self.status: ApprovalStatus = status
        self.answer: Ans | None = answer_model.model_validate_json(answer_json) if answer_json else None
        self.created_at: str = created
        self.answered_at: str | None = answered


ApprovalRow = PendingRow[PermissionRequest, PermissionDecision]
QuestionRow = PendingRow[UserQuestion, QuestionAnswer]


class PendingStore(Generic[Req, Ans]):
    """The pending-request table of one open :class:`SessionStore` (see the subclasses)."""

    TABLE: ClassVar[str]
    REQUEST: type[Req]
    ANSWER: type[Ans]

    def __init__(self, storage: SessionStore) -> None:
        self._storage = storage

    def _row(self, row: Any) -> PendingRow[Req, Ans]:
        return PendingRow(tuple(row), self.REQUEST, self.ANSWER)

    def ids(self, request: Req) -> tuple[str, str, str]:
        """``(request_id, run_id, session_id)`` of ``request``."""
        raise NotImplementedError

    async def insert(self, request: Req) -> None:
        """Persists ``request`` as ``pending`` (committed when this returns)."""
        request_id, run_id, session_id = self.ids(request)
        now = format_ts()
        values = (request_id, run_id, session_id, request.model_dump_json(), "pending", None, now, None, now)
        table = self.TABLE

        def op(txn: Txn) -> None:
            txn.execute(
                f"INSERT INTO {table} ({_COLUMNS}, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", values
            )

        await self._storage.write(op)

    async def answer(self, request_id: str, answer: Ans) -> AnswerOutcome:
        """Records the first answer: ``"won"``, else why not (``"answered"``, ``"expired"``, ``"missing"``)."""
        now = format_ts()
        answer_json = answer.model_dump_json()
        table = self.TABLE

        def op(txn: Txn) -> AnswerOutcome:
            changed = txn.execute(
                f"UPDATE {table} SET status = 'answered', answer_json = ?, answered_at = ?, "
                "updated_at = ? WHERE request_id = ? AND status = 'pending'",
                (answer_json, now, now, request_id),
            )
            if changed == 1:
                return "won"
            status = txn.scalar(f"SELECT status FROM {table} WHERE request_id = ?", (request_id,))
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
        table = self.TABLE

        def op(txn: Txn) -> int:
            return txn.execute(
                f"UPDATE {table} SET status = 'expired', answered_at = ?, updated_at = ? WHERE {where}",
                params,
            )

        return await self._storage.write(op)

    async def delete_session(self, session_id: str) -> int:
        table = self.TABLE

        def op(txn: Txn) -> int:
            return txn.execute(f"DELETE FROM {table} WHERE session_id = ?", (session_id,))

        return await self._storage.write(op)

    async def get(self, request_id: str) -> PendingRow[Req, Ans] | None:
        rows = await self._storage.query(
            f"SELECT {_COLUMNS} FROM {self.TABLE} WHERE request_id = ?", (request_id,)
        )
        return self._row(rows[0]) if rows else None

    async def list(self, statuses: tuple[ApprovalStatus, ...] = ("pending",)) -> list[PendingRow[Req, Ans]]:
        """Rows with one of ``statuses``, oldest first."""
        marks = ", ".join("?" for _ in statuses)
        rows = await self._storage.query(
            f"SELECT {_COLUMNS} FROM {self.TABLE} WHERE status IN ({marks}) ORDER BY created_at, rowid",
            statuses,
        )
        return [self._row(row) for row in rows]

    def view(self, row: PendingRow[Req, Ans]) -> dict[str, Any]:
        """The API view of a row: the request plus ``status``, ``created_at``, ``answered_at``, ``answer``."""
        out: dict[str, Any] = json.loads(row.request.model_dump_json())
        out.update(
            status=row.status,
            created_at=row.created_at,
            answered_at=row.answered_at,
            answer=self.answer_value(row.answer) if row.answer is not None else None,
        )
        return out

    def answer_value(self, answer: Ans) -> Any:
        raise NotImplementedError


class ApprovalStore(PendingStore[PermissionRequest, PermissionDecision]):
    """``pending_approvals``: permission requests (answer: the decision)."""

    TABLE = "pending_approvals"
    REQUEST = PermissionRequest
    ANSWER = PermissionDecision

    def ids(self, request: PermissionRequest) -> tuple[str, str, str]:
        return request.request_id, request.run_id, request.session_id

    def answer_value(self, answer: PermissionDecision) -> Any:
        return answer.decision


class QuestionStore(PendingStore[UserQuestion, QuestionAnswer]):
    """``pending_questions``: questions of ``internal.ask_user`` (answer: the text)."""

    TABLE = "pending_questions"
    REQUEST = UserQuestion
    ANSWER = QuestionAnswer

    def ids(self, request: UserQuestion) -> tuple[str, str, str]:
        return request.request_id, request.run_id, request.session_id

    def answer_value(self, answer: QuestionAnswer) -> Any:
        return answer.answer

"""Durable approvals and questions of ``soong-agent serve`` (docs/serve.md#approvals), pushed to every client.

The server's permission callback and question callback persist each request (``pending``) and return
``DEFER``; any client answers through :meth:`PendingBroker.answer`, which commits the first answer before
it resolves the waiting run (``AgentRuntime.answer_permission`` / ``answer_question``). A pending row nobody
waits for any more (its run was cancelled, or it belongs to a previous server process) is turned
``expired`` — never allowed, never answered.

Every change of a row is pushed, after it committed, to the subscribers of :meth:`PendingBroker.subscribe`
(``GET /api/approvals/events`` and ``GET /api/questions/events``): ``<kind>_pending`` when a request is
persisted, ``<kind>_answered`` when the first answer committed, ``<kind>_expired`` when its run stopped
waiting (watched on the runtime's deferred request, so no client has to poll for it); ``kind`` is
``approval`` or ``question``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from pydantic import BaseModel

from agent_core._concurrency import TaskOwner
from agent_core.errors import AgentCoreError
from agent_core.permissions import DEFER, PermissionDeferral
from agent_core.store import (
    ApprovalStatus,
    ApprovalStore,
    PendingRow,
    PendingStore,
    QuestionAnswer,
    QuestionStore,
)
from agent_core.types.permissions import PermissionDecision, PermissionRequest, UserQuestion

if TYPE_CHECKING:
    from agent_core import AgentRuntime

log = logging.getLogger("agent_core.server")

AnswerResult = Literal["answered", "conflict_answered", "conflict_expired", "missing"]
ApprovalChange = tuple[str, dict[str, Any]]
"""``(event name, the row's API view)``: ``<kind>_pending`` / ``<kind>_answered`` / ``<kind>_expired``."""

SUBSCRIBER_BACKLOG = 1000
"""Changes a slow subscriber may lag behind before its stream is ended (the client reconnects and
re-reads the snapshot)."""

Req = TypeVar("Req", bound=BaseModel)
Ans = TypeVar("Ans", bound=BaseModel)


class PendingBroker(Generic[Req, Ans]):
    """Bridges the runtime's deferred requests of one kind, their table and clients."""

    KIND = "approval"
    """Prefix of the pushed event names; the snapshot event is ``<KIND>s``."""

    def __init__(self) -> None:
        self._runtime: AgentRuntime | None = None
        self._store: PendingStore[Req, Ans] | None = None
        self._subscribers: set[asyncio.Queue[ApprovalChange | None]] = set()
        self._tasks = TaskOwner("approval expiries")

    def attach(self, runtime: AgentRuntime, store: PendingStore[Req, Ans]) -> None:
        self._runtime, self._store = runtime, store

    @property
    def store(self) -> PendingStore[Req, Ans]:
        if self._store is None:
            raise RuntimeError("the broker is not attached to an open runtime")
        return self._store

    def _pending_ids(self, runtime: AgentRuntime) -> list[str]:
        """Ids of the requests of this kind the runtime's runs wait for."""
        raise NotImplementedError

    def _watch(self, runtime: AgentRuntime, request_id: str, callback: Callable[[bool], None]) -> bool:
        """Calls ``callback(answered)`` once the deferred request settles (``False``: not pending)."""
        raise NotImplementedError

    async def _resolve(self, runtime: AgentRuntime, request_id: str, answer: Ans) -> None:
        """Answers the waiting run (``AgentCoreError`` when it stopped waiting)."""
        raise NotImplementedError

    def _waiting(self) -> set[str]:
        runtime = self._runtime
        return set(self._pending_ids(runtime)) if runtime is not None else set()

    # ---- push ----------------------------------------------------------------------------------------

    async def _publish(self, request_id: str) -> None:
        """Pushes the row of ``request_id`` as it is now committed."""
        row = await self.store.get(request_id)
        if row is not None:
            self._push((f"{self.KIND}_{row.status}", self.store.view(row)))

    def _push(self, change: ApprovalChange | None) -> None:
        for queue in list(self._subscribers):
            if change is not None and queue.qsize() >= SUBSCRIBER_BACKLOG:
                self._subscribers.discard(queue)
                queue.put_nowait(None)
            else:
                queue.put_nowait(change)

    async def subscribe(self) -> AsyncIterator[ApprovalChange]:
        """``("<kind>s", {"<kind>s": [...]})`` with the pending requests, then every change as it commits;
        ends when the broker closes (server shutdown) or the subscriber lags too far behind."""
        queue: asyncio.Queue[ApprovalChange | None] = asyncio.Queue()
        self._subscribers.add(queue)  # before the snapshot: a change committed meanwhile is not lost
        try:
            rows = await self.list(("pending",))
            yield f"{self.KIND}s", {f"{self.KIND}s": [self.store.view(r) for r in rows]}
            while True:
                change = await queue.get()
                if change is None:
                    return
                yield change
        finally:
            self._subscribers.discard(queue)

    def _on_settled(self, request_id: str, answered: bool) -> None:
        if answered:
            return  # :meth:`answer` pushes once the answer committed
        if self._tasks.closed:
            return  # the server is gone: the row expires at the next start
        self._tasks.spawn(self._expire_abandoned(request_id), name=f"expire {request_id}")

    async def _expire_abandoned(self, request_id: str) -> None:
        try:
            if await self.store.expire(request_id=request_id):
                await self._publish(request_id)
        except Exception:  # storage closing at shutdown: the row expires at the next start
            log.debug("could not expire abandoned %s %s", self.KIND, request_id, exc_info=True)

    def end_streams(self) -> None:
        """Ends every subscriber stream (server shutdown: open streams would hold it up)."""
        self._push(None)
        self._subscribers.clear()

    async def close(self) -> None:
        """Ends every subscriber stream and waits for pending expiry writes."""
        self.end_streams()
        await self._tasks.wait()  # each expiry is one write, which ends (or fails) by itself
        await self._tasks.aclose()

    # ---- requests and answers ------------------------------------------------------------------------

    async def _persist_and_defer(self, request: Req) -> PermissionDeferral:
        """The callback's work: persisted first, then shown (pushed) to clients; ``DEFER``."""
        await self.store.insert(request)
        request_id = self.store.ids(request)[0]
        if self._runtime is not None:
            self._watch(self._runtime, request_id, lambda answered: self._on_settled(request_id, answered))
        await self._publish(request_id)
        return DEFER

    async def list(self, statuses: tuple[ApprovalStatus, ...]) -> list[PendingRow[Req, Ans]]:
        """Rows with ``statuses``; pending rows nobody waits for are expired first."""
        waiting = self._waiting()
        for row in await self.store.list(("pending",)):
            if row.request_id not in waiting and await self.store.expire(request_id=row.request_id):
                await self._publish(row.request_id)
        return await self.store.list(statuses)

    async def answer(self, request_id: str, answer: Ans) -> AnswerResult:
        """First answer wins; it is committed (and pushed) before the run continues."""
        if request_id not in self._waiting() and await self.store.expire(request_id=request_id):
            await self._publish(request_id)
        outcome = await self.store.answer(request_id, answer)
        if outcome == "missing":
            return "missing"
        if outcome != "won":
            return "conflict_expired" if outcome == "expired" else "conflict_answered"
        await self._publish(request_id)
        assert self._runtime is not None
        try:
            await self._resolve(self._runtime, request_id, answer)
        except AgentCoreError:  # its run stopped waiting between the check and the answer
            return "conflict_expired"
        return "answered"

    async def expire_all(self) -> int:
        """Startup/shutdown: no request of this process (or an earlier one) can be answered any more."""
        return await self.store.expire()


class ApprovalBroker(PendingBroker[PermissionRequest, PermissionDecision]):
    """Permission requests (``/api/approvals``)."""

    KIND = "approval"

    def _pending_ids(self, runtime: AgentRuntime) -> list[str]:
        return runtime.pending_permission_requests()

    def _watch(self, runtime: AgentRuntime, request_id: str, callback: Callable[[bool], None]) -> bool:
        return runtime.watch_permission_request(request_id, callback)

    async def _resolve(self, runtime: AgentRuntime, request_id: str, answer: PermissionDecision) -> None:
        await runtime.answer_permission(request_id, answer)

    async def callback(self, request: PermissionRequest) -> PermissionDecision | PermissionDeferral:
        """The runtime's permission callback."""
        return await self._persist_and_defer(request)


class QuestionBroker(PendingBroker[UserQuestion, QuestionAnswer]):
    """Questions of ``internal.ask_user`` (``/api/questions``)."""

    KIND = "question"

    def _pending_ids(self, runtime: AgentRuntime) -> list[str]:
        return runtime.pending_questions()

    def _watch(self, runtime: AgentRuntime, request_id: str, callback: Callable[[bool], None]) -> bool:
        return runtime.watch_question(request_id, callback)

    async def _resolve(self, runtime: AgentRuntime, request_id: str, answer: QuestionAnswer) -> None:
        await runtime.answer_question(request_id, answer.answer)

    async def callback(self, question: UserQuestion) -> str | PermissionDeferral:
        """The runtime's question callback."""
        return await self._persist_and_defer(question)


__all__ = ["ApprovalBroker", "ApprovalStore", "PendingBroker", "QuestionBroker", "QuestionStore"]

"""Durable approvals of ``soong-agent serve`` (surfaces.md §2), pushed to every client.

The server's permission callback persists each request (``pending``) and returns ``DEFER``; any client
answers through :meth:`ApprovalBroker.answer`, which commits the first answer before it resolves the
waiting run (``AgentRuntime.answer_permission``). A pending row nobody waits for any more (its run was
cancelled, or it belongs to a previous server process) is turned ``expired`` — never allowed.

Every change of a row is pushed, after it committed, to the subscribers of :meth:`subscribe` (the
``GET /api/approvals/events`` streams): ``approval_pending`` when a request is persisted,
``approval_answered`` when the first answer committed, ``approval_expired`` when its run stopped waiting
(watched on the runtime's deferred request, so no client has to poll for it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Literal

from agent_core._concurrency import TaskOwner
from agent_core._storage.approvals import ApprovalRow, ApprovalStatus, ApprovalStore, request_json
from agent_core.errors import AgentCoreError
from agent_core.permissions._deferred import DEFER, DeferredAnswers, PermissionDeferral
from agent_core.types.permissions import PermissionDecision, PermissionRequest

if TYPE_CHECKING:
    from agent_core._api.runtime import AgentRuntime

log = logging.getLogger("agent_core.server")

AnswerResult = Literal["answered", "conflict_answered", "conflict_expired", "missing"]
ApprovalChange = tuple[str, dict[str, Any]]
"""``(event name, the row's API view)``: ``approval_pending`` / ``approval_answered`` / ``approval_expired``."""

_CHANGE_FOR: dict[ApprovalStatus, str] = {
    "pending": "approval_pending",
    "answered": "approval_answered",
    "expired": "approval_expired",
}
SUBSCRIBER_BACKLOG = 1000
"""Changes a slow subscriber may lag behind before its stream is ended (the client reconnects and
re-reads the snapshot)."""


class ApprovalBroker:
    """Bridges the runtime's deferred permission requests, the ``pending_approvals`` table and clients."""

    def __init__(self) -> None:
        self._runtime: AgentRuntime | None = None
        self._store: ApprovalStore | None = None
        self._subscribers: set[asyncio.Queue[ApprovalChange | None]] = set()
        self._tasks = TaskOwner("approval expiries")

    def attach(self, runtime: AgentRuntime, store: ApprovalStore) -> None:
        self._runtime, self._store = runtime, store

    @property
    def store(self) -> ApprovalStore:
        if self._store is None:
            raise RuntimeError("the approval broker is not attached to an open runtime")
        return self._store

    def _deferred(self) -> DeferredAnswers | None:
        runtime = self._runtime
        manager = runtime._manager if runtime is not None else None
        return manager.services.gate.deferred if manager is not None else None

    def _waiting(self) -> set[str]:
        deferred = self._deferred()
        return set(deferred.pending_ids()) if deferred is not None else set()

    # ---- push ----------------------------------------------------------------------------------------

    async def _publish(self, request_id: str) -> None:
        """Pushes the row of ``request_id`` as it is now committed."""
        row = await self.store.get(request_id)
        if row is not None:
            self._push((_CHANGE_FOR[row.status], request_json(row)))

    def _push(self, change: ApprovalChange | None) -> None:
        for queue in list(self._subscribers):
            if change is not None and queue.qsize() >= SUBSCRIBER_BACKLOG:
                self._subscribers.discard(queue)
                queue.put_nowait(None)
            else:
                queue.put_nowait(change)

    async def subscribe(self) -> AsyncIterator[ApprovalChange]:
        """``("approvals", {"approvals": [...]})`` with the pending requests, then every change as it
        commits; ends when the broker closes (server shutdown) or the subscriber lags too far behind."""
        queue: asyncio.Queue[ApprovalChange | None] = asyncio.Queue()
        self._subscribers.add(queue)  # before the snapshot: a change committed meanwhile is not lost
        try:
            rows = await self.list(("pending",))
            yield "approvals", {"approvals": [request_json(r) for r in rows]}
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
            log.debug("could not expire abandoned permission request %s", request_id, exc_info=True)

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

    async def callback(self, request: PermissionRequest) -> PermissionDecision | PermissionDeferral:
        """The runtime's permission callback: persisted first, then shown (pushed) to clients."""
        await self.store.insert(request)
        deferred = self._deferred()
        if deferred is not None:
            deferred.watch(
                request.request_id, lambda answered: self._on_settled(request.request_id, answered)
            )
        await self._publish(request.request_id)
        return DEFER

    async def list(self, statuses: tuple[ApprovalStatus, ...]) -> list[ApprovalRow]:
        """Rows with ``statuses``; pending rows nobody waits for are expired first."""
        waiting = self._waiting()
        for row in await self.store.list(("pending",)):
            if row.request_id not in waiting and await self.store.expire(request_id=row.request_id):
                await self._publish(row.request_id)
        return await self.store.list(statuses)

    async def answer(self, request_id: str, decision: PermissionDecision) -> AnswerResult:
        """First answer wins; it is committed (and pushed) before the run continues."""
        if request_id not in self._waiting() and await self.store.expire(request_id=request_id):
            await self._publish(request_id)
        outcome = await self.store.answer(request_id, decision)
        if outcome == "missing":
            return "missing"
        if outcome != "won":
            return "conflict_expired" if outcome == "expired" else "conflict_answered"
        await self._publish(request_id)
        assert self._runtime is not None
        try:
            await self._runtime.answer_permission(request_id, decision)
        except AgentCoreError:  # its run stopped waiting between the check and the answer
            return "conflict_expired"
        return "answered"

    async def expire_all(self) -> int:
        """Startup/shutdown: no request of this process (or an earlier one) can be answered any more."""
        return await self.store.expire()

"""Durable approvals of ``soong-agent serve`` (surfaces.md §2).

The server's permission callback persists each request (``pending``) and returns ``DEFER``; any client
answers through :meth:`ApprovalBroker.answer`, which commits the first answer before it resolves the
waiting run (``AgentRuntime.answer_permission``). A pending row nobody waits for any more (its run was
cancelled, or it belongs to a previous server process) is turned ``expired`` — never allowed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from agent_core.errors import AgentCoreError
from agent_core.permissions.deferred import DEFER, PermissionDeferral
from agent_core.storage.approvals import ApprovalRow, ApprovalStatus, ApprovalStore
from agent_core.types.permissions import PermissionDecision, PermissionRequest

if TYPE_CHECKING:
    from agent_core.api.runtime import AgentRuntime

AnswerResult = Literal["answered", "conflict_answered", "conflict_expired", "missing"]


class ApprovalBroker:
    """Bridges the runtime's deferred permission requests and the ``pending_approvals`` table."""

    def __init__(self) -> None:
        self._runtime: AgentRuntime | None = None
        self._store: ApprovalStore | None = None

    def attach(self, runtime: AgentRuntime, store: ApprovalStore) -> None:
        self._runtime, self._store = runtime, store

    @property
    def store(self) -> ApprovalStore:
        if self._store is None:
            raise RuntimeError("the approval broker is not attached to an open runtime")
        return self._store

    def _waiting(self) -> set[str]:
        runtime = self._runtime
        manager = runtime._manager if runtime is not None else None
        return set(manager.services.gate.deferred.pending_ids()) if manager is not None else set()

    async def callback(self, request: PermissionRequest) -> PermissionDecision | PermissionDeferral:
        """The runtime's permission callback: persisted first, then shown (listed) to clients."""
        await self.store.insert(request)
        return DEFER

    async def list(self, statuses: tuple[ApprovalStatus, ...]) -> list[ApprovalRow]:
        """Rows with ``statuses``; pending rows nobody waits for are expired first."""
        waiting = self._waiting()
        for row in await self.store.list(("pending",)):
            if row.request_id not in waiting:
                await self.store.expire(request_id=row.request_id)
        return await self.store.list(statuses)

    async def answer(self, request_id: str, decision: PermissionDecision) -> AnswerResult:
        """First answer wins; it is committed before the run continues."""
        if request_id not in self._waiting():
            await self.store.expire(request_id=request_id)
        outcome = await self.store.answer(request_id, decision)
        if outcome == "missing":
            return "missing"
        if outcome != "won":
            return "conflict_expired" if outcome == "expired" else "conflict_answered"
        assert self._runtime is not None
        try:
            await self._runtime.answer_permission(request_id, decision)
        except AgentCoreError:  # its run stopped waiting between the check and the answer
            return "conflict_expired"
        return "answered"

    async def expire_all(self) -> int:
        """Startup/shutdown: no request of this process (or an earlier one) can be answered any more."""
        return await self.store.expire()

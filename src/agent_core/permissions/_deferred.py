"""Deferred permission answers (docs/serve.md#approvals, SDK side).

A permission callback may return :data:`DEFER` instead of a :class:`PermissionDecision`: the request then
stays pending until some task calls ``AgentRuntime.answer_permission(request_id, decision)`` (public
names: ``agent_core.permissions.DEFER``, ``PermissionDeferral``, ``AgentRuntime.answer_permission``).

Contract:

* a deferred request waits without the 300 s callback timeout (the callback itself still has it) until it
  is answered or the waiting run is cancelled; the gate keeps serialising requests, so while one request is
  deferred the runtime's other permission requests wait behind it;
* the first answer wins: answering a request that is not pending (unknown, already answered, or abandoned
  because its run ended) raises ``AgentCoreError(validation_error)``;
* ``allow_for_session`` downgrades to ``allow_once`` under the same rules as a direct answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Final, Generic, TypeVar

from agent_core.errors import ErrorCode, NotFoundError


class PermissionDeferral:
    """The type of :data:`DEFER` (a singleton): "leave this request pending, it is answered later"."""

    _instance: PermissionDeferral | None = None

    def __new__(cls) -> PermissionDeferral:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "DEFER"


DEFER: Final = PermissionDeferral()
"""Returned by a permission callback to defer the request to ``AgentRuntime.answer_permission`` (and by a
question callback to defer a question to ``AgentRuntime.answer_question``)."""

T = TypeVar("T")


class DeferredAnswers(Generic[T]):
    """Pending deferred requests of one runtime, keyed by ``request_id`` (single event loop); ``what``
    names them in errors (``permission request``, ``question``)."""

    def __init__(self, what: str = "permission request") -> None:
        self._what = what
        self._pending: dict[str, asyncio.Future[T]] = {}

    def open(self, request_id: str) -> asyncio.Future[T]:
        """Registers ``request_id`` before the callback runs (an answer may arrive as soon as it returns)."""
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        return future

    def discard(self, request_id: str) -> None:
        """Forgets ``request_id`` (answered, not deferred, or its run stopped waiting)."""
        future = self._pending.pop(request_id, None)
        if future is not None and not future.done():
            future.cancel()

    def watch(self, request_id: str, callback: Callable[[bool], None]) -> bool:
        """Calls ``callback(answered)`` once the pending request settles: ``True`` when answered, ``False``
        when abandoned (its run stopped waiting). ``False`` (and no call) when it is not pending."""
        future = self._pending.get(request_id)
        if future is None or future.done():
            return False
        future.add_done_callback(lambda settled: callback(not settled.cancelled()))
        return True

    def pending_ids(self) -> list[str]:
        return [rid for rid, future in self._pending.items() if not future.done()]

    def answer(self, request_id: str, answer: T) -> None:
        """Resolves a pending request; ``validation_error`` when it is not pending."""
        future = self._pending.get(request_id)
        if future is None or future.done():
            raise NotFoundError(
                ErrorCode.validation_error,
                f"{self._what} {request_id!r} is not pending (unknown, already answered or abandoned)",
                details={"request_id": request_id},
            )
        future.set_result(answer)

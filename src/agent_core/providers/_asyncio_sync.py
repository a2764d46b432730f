"""httpcore's synchronization primitives on asyncio itself, without anyio's asyncio backend (issue 16).

Under asyncio, httpcore's ``_synchronization`` module builds the lock, event and shield of every request from
anyio; creating the first of them imports anyio's asyncio backend (sockets, streams, TLS, task groups: ~5 %
of the instructions to the first model request) although :mod:`agent_core.providers._asyncio_net` already
does the I/O without anyio. :func:`install` puts :data:`PRIMITIVES` in that module's ``anyio`` global:

- ``Lock``, ``Event`` and ``Semaphore`` are asyncio's (FIFO, cancellable), as anyio's are on asyncio;
- ``fail_after(delay)`` cancels the current task after ``delay`` s and raises ``TimeoutError`` out of the
  block (httpcore maps it to ``PoolTimeout``), as anyio's does; ``None`` never expires;
- ``CancelScope(shield=True)`` is anyio's own scope once anyio's asyncio backend is loaded. Before that no
  anyio cancel scope exists in the process, and anyio's shield never holds off a native ``Task.cancel()``,
  so there is nothing to shield from: the scope is a no-op. Any other scope is anyio's.

The replacement is process-wide (every httpcore client, MCP's included), hence anyio's contract for each
primitive. Under trio httpcore uses trio, which this does not touch. :func:`install` is idempotent.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import sys
from contextlib import AbstractContextManager
from types import ModuleType, TracebackType
from typing import Any

ANYIO_ASYNCIO_BACKEND = "anyio._backends._asyncio"


class FailAfter:
    """``with FailAfter(delay):`` — a synchronous-entry ``asyncio.timeout`` raising ``TimeoutError``."""

    __slots__ = ("_cancelling", "_delay", "_expired", "_handle", "_task")

    def __init__(self, delay: float | None) -> None:
        self._delay = delay
        self._task: asyncio.Task[Any] | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._expired = False
        self._cancelling = 0

    def __enter__(self) -> FailAfter:
        if self._delay is not None:
            task = asyncio.current_task()
            if task is None:
                raise RuntimeError("fail_after() needs a running asyncio task")
            self._task = task
            self._cancelling = task.cancelling()
            self._handle = asyncio.get_running_loop().call_later(self._delay, self._expire)
        return self

    def _expire(self) -> None:
        if self._task is not None:
            self._expired = True
            self._task.cancel()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._handle is not None:
            self._handle.cancel()
        # our cancellation is taken back; one requested by someone else still propagates
        expired = self._expired and self._task is not None and self._task.uncancel() <= self._cancelling
        if expired and exc_type is asyncio.CancelledError:
            raise TimeoutError from exc


class _Primitives:
    """The part of anyio's namespace httpcore's ``_synchronization`` uses."""

    Lock = asyncio.Lock
    Event = asyncio.Event

    @staticmethod
    def Semaphore(initial_value: int, *, max_value: int | None = None) -> asyncio.Semaphore:
        """Bounded at ``initial_value`` when ``max_value`` is given (httpcore passes the same value)."""
        if max_value is None:
            return asyncio.Semaphore(initial_value)
        return asyncio.BoundedSemaphore(initial_value)

    @staticmethod
    def fail_after(delay: float | None) -> FailAfter:
        return FailAfter(delay)

    @staticmethod
    def CancelScope(*, deadline: float = math.inf, shield: bool = False) -> AbstractContextManager[Any]:
        if shield and deadline == math.inf and ANYIO_ASYNCIO_BACKEND not in sys.modules:
            return contextlib.nullcontext()
        import anyio

        scope: AbstractContextManager[Any] = anyio.CancelScope(deadline=deadline, shield=shield)
        return scope


PRIMITIVES = _Primitives()


def install() -> bool:
    """Gives httpcore's ``_synchronization`` module :data:`PRIMITIVES` in place of anyio; ``False`` (nothing
    changed) when httpcore is not imported or is shaped differently than expected."""
    module = sys.modules.get("httpcore._synchronization")
    if module is None:
        return False
    current = getattr(module, "anyio", None)
    if current is PRIMITIVES:
        return True
    if not isinstance(current, ModuleType) or current.__name__ != "anyio":
        return False
    setattr(module, "anyio", PRIMITIVES)  # noqa: B010
    return True

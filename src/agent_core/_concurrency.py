"""Tasks and cancellation: every task has an owner that awaits or cancels it (a bottom-layer module).

This is the one module that creates asyncio tasks (``scripts/architecture_report.py`` counts the others).

- :class:`TaskOwner` spawns tasks and keeps them until they finish; :meth:`TaskOwner.aclose` cancels every
  task still running and waits for all of them. Long-lived owners (the run manager, a job manager, a
  server's stream pumps) close it when they close; ``async with TaskOwner() as tasks:`` scopes tasks to a
  block (like :class:`asyncio.TaskGroup`, but a failing task neither cancels its siblings nor turns into
  an ``ExceptionGroup``: the code that awaits a task sees its outcome).
- :func:`cancel_and_wait` is the one way a task is cancelled: request it, then wait until the task has
  finished. The caller's own cancellation still propagates (the task is cancelled already). Synchronous
  code (a signal handler, an event-loop callback) can only request it (``task.cancel()``); the task's
  owner then awaits it.
- :func:`wait_uninterrupted` waits for work that must not be abandoned halfway (a commit): a
  cancellation of the waiter is held back until the work finished, then re-raised. It replaces
  ``asyncio.shield``, which returns at once and leaves the work running without anyone awaiting it.
  :func:`run_to_end` is the same for a caller that has more to finish before it re-raises.
- :func:`race` runs work until it ends, an event is set or a timeout passes, then cancels and awaits it.
- :func:`first_of` races a future against a run's cancel event and a timeout without cancelling either;
  :class:`CancelEvent` lets it do that without a waiter task (the loop races every model call and up to
  four stages of every tool call).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from types import TracebackType
from typing import Any, TypeVar

T = TypeVar("T")

log = logging.getLogger("agent_core.tasks")


class CancelEvent(asyncio.Event):
    """An ``asyncio.Event`` that also runs the callbacks registered with :meth:`on_set` when it is set."""

    def __init__(self) -> None:
        super().__init__()
        self._callbacks: list[Callable[[], None]] = []

    def set(self) -> None:
        if self.is_set():
            return
        super().set()
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def on_set(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Runs ``callback`` (on the event loop, inside :meth:`set`) once the event is set; returns its
        remover. Not called if the event is already set."""
        self._callbacks.append(callback)

        def remove() -> None:
            try:
                self._callbacks.remove(callback)
            except ValueError:
                pass

        return remove


class TaskOwner:
    """Owns the tasks it spawns until they finish; :meth:`aclose` cancels and awaits the rest.

    A task's exception is its awaiter's to see: the owner does not consume it (an exception nobody awaits
    is logged by asyncio as usual). After :meth:`aclose` has begun, :meth:`spawn` refuses new work
    (``RuntimeError``), so nothing outlives the owner.
    """

    __slots__ = ("_closed", "_name", "_tasks")

    def __init__(self, name: str = "") -> None:
        self._name = name
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False

    def spawn(self, work: Awaitable[T], *, name: str | None = None) -> asyncio.Task[T]:
        """Starts ``work`` (a coroutine, or any awaitable) as a task this owner awaits or cancels."""
        if self._closed:
            if asyncio.iscoroutine(work):
                work.close()
            raise RuntimeError(f"task owner {self._name or id(self)} is closed")
        task = asyncio.get_running_loop().create_task(_coroutine(work), name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    @property
    def tasks(self) -> frozenset[asyncio.Task[Any]]:
        """The tasks still running."""
        return frozenset(self._tasks)

    @property
    def closed(self) -> bool:
        return self._closed

    def __len__(self) -> int:
        return len(self._tasks)

    async def wait(self, timeout: float | None = None) -> bool:
        """Waits until every task has finished (also those spawned meanwhile) or ``timeout`` seconds
        passed; whether all finished. Cancels nothing."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while self._tasks:
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return False
            await asyncio.wait(set(self._tasks), timeout=remaining)
        return True

    async def aclose(self, *, grace: float | None = None, bound: float | None = None) -> None:
        """Refuses new tasks, gives the running ones ``grace`` seconds to finish (``None``: none), then
        cancels what is left and waits until everything has finished, or at most ``bound`` seconds: a task
        that ignores its cancellation that long is logged and left (``None``: waits)."""
        self._closed = True
        if grace is not None and grace > 0:
            await self.wait(grace)
        for task in self._tasks:
            task.cancel()
        if not await self.wait(bound):
            for task in self._tasks:
                log.warning("task %r ignored its cancellation for %.1f s", task, bound)

    async def __aenter__(self) -> TaskOwner:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


async def cancel_and_wait(*tasks: asyncio.Future[Any]) -> None:
    """Cancels each of ``tasks`` that is still running and waits until all have finished.

    The tasks' own outcomes (result, exception, cancellation) are left for whoever awaits them; an
    exception is marked retrieved only for a task this call cancelled, whose outcome nobody else wants.
    A cancellation of the caller propagates at once (the tasks were cancelled already)."""
    pending = {task for task in tasks if not task.done()}
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.wait(pending)
    for task in pending:
        if not task.cancelled() and task.exception() is not None:
            log.debug("task %r failed while being cancelled", task, exc_info=task.exception())


async def wait_uninterrupted(work: Awaitable[T], owner: TaskOwner | None = None) -> T:
    """The result of ``work``, which runs to its end even if the caller is cancelled meanwhile: the
    caller's cancellation is re-raised once ``work`` finished (so its outcome is never lost and never
    half-done). A coroutine runs in a task of ``owner`` (of this call when ``None``)."""
    async with TaskOwner() as scope:
        future = work if isinstance(work, asyncio.Future) else (owner or scope).spawn(work)
        if await _to_the_end(future):
            if not future.cancelled():
                future.exception()  # retrieved: the work reports its own failure; the caller is cancelled
            raise asyncio.CancelledError()
        return future.result()


async def run_to_end(work: Awaitable[T], owner: TaskOwner | None = None) -> tuple[T, bool]:
    """``(result, interrupted)``: like :func:`wait_uninterrupted`, for a caller that has more to finish
    before it re-raises the cancellation it was sent meanwhile (``interrupted``). An error of ``work`` is
    raised (its cancellation too), whether or not the caller was interrupted."""
    async with TaskOwner() as scope:
        future = work if isinstance(work, asyncio.Future) else (owner or scope).spawn(work)
        interrupted = await _to_the_end(future)
        return future.result(), interrupted


async def _to_the_end(future: asyncio.Future[Any]) -> bool:
    """Waits until ``future`` is done, whatever happens to the caller; whether the caller was cancelled."""
    interrupted = False
    while not future.done():
        try:
            await asyncio.wait({future})
        except asyncio.CancelledError:
            interrupted = True
    return interrupted


async def first_of(task: asyncio.Future[Any], event: asyncio.Event, timeout: float | None = None) -> None:
    """Returns once ``task`` is done, ``event`` is set or ``timeout`` seconds passed (like
    ``asyncio.wait({task, event.wait()}, timeout, FIRST_COMPLETED)``; the caller checks which). Cancelling
    the caller cancels neither ``task`` nor anything else."""
    if task.done() or event.is_set():
        return
    if not isinstance(event, CancelEvent):
        async with TaskOwner() as waiters:
            waiter = waiters.spawn(event.wait())
            await asyncio.wait({task, waiter}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        return
    loop = asyncio.get_running_loop()
    woken: asyncio.Future[None] = loop.create_future()

    def wake(_: object = None) -> None:
        if not woken.done():
            woken.set_result(None)

    task.add_done_callback(wake)
    remove = event.on_set(wake)
    timer = loop.call_later(timeout, wake) if timeout is not None else None
    try:
        await woken
    finally:
        remove()
        task.remove_done_callback(wake)
        if timer is not None:
            timer.cancel()


async def race(
    work: Awaitable[T], event: asyncio.Event, timeout: float | None = None, *, grace: float = 0.0
) -> asyncio.Future[T]:
    """Runs ``work`` until it finishes, ``event`` is set or ``timeout`` seconds passed. When it did not
    finish by then it first gets ``grace`` more seconds (only after ``event``: a cooperative task sees the
    event and returns), then it is cancelled and awaited (:func:`cancel_and_wait`). Returns the finished
    task: its result, exception or cancellation tells what happened. A cancellation of the caller cancels
    ``work`` too (and waits for it) before it propagates."""
    async with TaskOwner() as owner:
        task = owner.spawn(work)
        await first_of(task, event, timeout)
        if not task.done() and event.is_set() and grace > 0:
            await asyncio.wait({task}, timeout=grace)
        if not task.done():
            await cancel_and_wait(task)
    return task


def _coroutine(work: Awaitable[T]) -> Coroutine[Any, Any, T]:
    if asyncio.iscoroutine(work):
        return work

    async def wrapped() -> T:
        return await work

    return wrapped()


__all__ = [
    "CancelEvent",
    "TaskOwner",
    "cancel_and_wait",
    "first_of",
    "race",
    "run_to_end",
    "wait_uninterrupted",
]

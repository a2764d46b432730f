"""A run's cancel event that can be raced without a waiter task (a bottom-layer module).

Racing work against ``asyncio.Event.wait()`` needs a waiter task per race (created, stepped, cancelled:
several event-loop iterations), and the loop races every model call and up to four steps of every tool
call. :class:`CancelEvent` calls registered callbacks when it is set, so :func:`first_of` waits on one
future woken by whichever comes first. Any other ``asyncio.Event`` still works (through a waiter task).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


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


async def first_of(task: asyncio.Future[Any], event: asyncio.Event, timeout: float | None = None) -> None:
    """Returns once ``task`` is done, ``event`` is set or ``timeout`` seconds passed (like
    ``asyncio.wait({task, event.wait()}, timeout, FIRST_COMPLETED)``; the caller checks which). Cancelling
    the caller cancels neither ``task`` nor anything else."""
    if task.done() or event.is_set():
        return
    if not isinstance(event, CancelEvent):
        waiter = asyncio.ensure_future(event.wait())
        try:
            await asyncio.wait({task, waiter}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
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

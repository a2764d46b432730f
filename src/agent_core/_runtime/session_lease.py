"""Holding a session's lease for a root run: one running root run per session across every process (and
runtime) that opens the session store, waiting runs in FIFO order (issue 40).

SQLite: a file lock beside the database, taken without a wait (and without a task) when the session is
free; PostgreSQL: an advisory lock on a connection of its own. A run that has to wait for another
process's run is announced first (``on_wait``: the run is queued), so its stream says why it waits.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from agent_core._concurrency import race
from agent_core._storage.protocol import SessionStore


async def hold_session_lease(
    stack: contextlib.AsyncExitStack,
    storage: SessionStore,
    session_id: str,
    cancel: asyncio.Event,
    on_wait: Callable[[int], Awaitable[None]] | None = None,
) -> None:
    """Enters ``session_id``'s lease on ``stack`` (released when the stack closes); returns without it
    when ``cancel`` is set first (the run is then cancelled before its loop starts). ``on_wait(position)``
    runs first when another run (of another process) holds the lease or waits for it."""
    lease = storage.session_lease(session_id)
    entered = lease.try_enter()
    if entered:
        stack.push_async_exit(lease)
        return
    if entered is False and on_wait is not None:
        await on_wait(lease.queue_position)
    entering = await race(stack.enter_async_context(lease), cancel)
    if not entering.cancelled():
        entering.result()  # a failure to get the lease fails the run

"""Holding a session's cluster-wide lease for a root run (surfaces.md §3).

With a store shared by several processes (``postgres``), a root run holds its session's lease while it
runs, so one root run runs per session cluster-wide and waiting runs start in FIFO order. With SQLite
(one process per database) the runtime's own session queue is the whole guarantee: nothing is held.
"""

from __future__ import annotations

import asyncio
import contextlib

from agent_core._concurrency import race
from agent_core._storage.protocol import SessionStore


async def hold_session_lease(
    stack: contextlib.AsyncExitStack, storage: SessionStore, session_id: str, cancel: asyncio.Event
) -> None:
    """Enters ``session_id``'s lease on ``stack`` (released when the stack closes); returns without it
    when ``cancel`` is set first (the run is then cancelled before its loop starts)."""
    if not storage.SHARED:
        return
    entering = await race(stack.enter_async_context(storage.session_lease(session_id)), cancel)
    if not entering.cancelled():
        entering.result()  # a failure to get the lease fails the run

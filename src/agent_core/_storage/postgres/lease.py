"""The cluster-wide session lease (surfaces.md §3): one running root run per session across processes.

A lease is a PostgreSQL session-level advisory lock keyed by the session id, held on a connection of its
own for as long as the root run runs. Waiters queue on the server in arrival order, so the session's
FIFO holds across processes: each process keeps its local FIFO queue and its head waits here until the
runs of other processes that asked earlier have ended. A waiter that is cancelled cancels its lock
request; a process that dies releases its leases with its connections.
"""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType
from typing import Any

import psycopg

from agent_core._storage.postgres.connection import PgConnection, ReconnectPolicy, connect

LEASE_NAMESPACE = 0x50A6
"""First key of the two-key advisory locks of session leases (the second is ``hashtext(session_id)``)."""
_LOCK = "SELECT pg_advisory_lock(%s, hashtext(%s))"
_UNLOCK = "SELECT pg_advisory_unlock(%s, hashtext(%s))"


class SessionLease:
    """``async with`` holds the session's lease (waits for it first)."""

    def __init__(
        self, dsn: str, *, dsn_env: str, session_id: str, policy: ReconnectPolicy | None = None
    ) -> None:
        self._dsn = dsn
        self._policy = policy
        self._dsn_env = dsn_env
        self._session_id = session_id
        self._conn: PgConnection | None = None

    async def __aenter__(self) -> SessionLease:
        conn = await connect(
            self._dsn, dsn_env=self._dsn_env, name="agent_core-pg-lease", policy=self._policy
        )
        params = (LEASE_NAMESPACE, self._session_id)

        def lock(c: psycopg.Connection[Any]) -> None:
            c.execute(_LOCK, params)

        # a connection lost while waiting held no lock: reconnect and queue again
        waiting = asyncio.ensure_future(conn.run_idempotent("waiting for a session lease", lock))
        try:
            await asyncio.shield(waiting)
        except BaseException:
            # cancelled (or failed) while waiting: withdraw the request, then drop the connection, which
            # releases the lock should it have been granted meanwhile
            with contextlib.suppress(Exception):
                await asyncio.get_running_loop().run_in_executor(None, conn.cancel_request)
            with contextlib.suppress(BaseException):
                await waiting
            await conn.close()
            raise
        self._conn = conn
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        params = (LEASE_NAMESPACE, self._session_id)
        if conn.lost:  # the server dropped the connection (a restart): the lock went with it
            await conn.close()
            return
        try:
            await conn.run(lambda c: c.execute(_UNLOCK, params))
        except Exception:
            pass  # closing the connection releases it too
        finally:
            await conn.close()

"""The cluster-wide session lease (docs/scale-out.md#2-production-postgresql-and-a-temporal-cluster): one
running root run per session across processes.

A lease is a PostgreSQL session-level advisory lock keyed by the session id, held on a connection of its
own for as long as the root run runs. Waiters queue on the server in arrival order, so the session's
FIFO holds across processes: each process keeps its local FIFO queue and its head waits here until the
runs of other processes that asked earlier have ended. A waiter that is cancelled cancels its lock
request; a process that dies releases its leases with its connections.

Each time a lease is granted, its holder bumps the session's row in ``session_leases`` (``epoch`` + 1,
``owner``): the epoch is the lease's *fencing token*. Every write of a session whose lease this store
holds — nodes and events, ``update_run``, Task WAL appends and creates — reads that row ``FOR SHARE`` in
its own transaction and is refused (``session_active``) when the epoch is no longer the lease's. A
takeover's bump waits for such a transaction to commit, so no write of a process whose lease was taken
over commits after the takeover, even when it never noticed losing its connection.

A server restart drops the lease's connection and with it the lock, while the run goes on. So the
store's writer, each time it reconnects (before any further write), has every lease it holds taken again
(:meth:`HeldLeases.regain`): on the lease's connection, reconnected, with ``pg_try_advisory_lock`` (and
only if the epoch is still its own). A lease another process took meanwhile is *lost*: from then on the
store refuses every write of that session but the run's terminal one (``session_active``), so the run
ends ``failed`` and never writes beside the other process's run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

import psycopg

from agent_core._concurrency import TaskOwner
from agent_core._storage.postgres.connection import (
    RECONNECT_CONFIG_KEY,
    PgConnection,
    ReconnectPolicy,
    connect,
)
from agent_core.errors import ErrorCode, SessionBusyError
from agent_core.types.base import format_ts

log = logging.getLogger(__name__)

LEASE_NAMESPACE = 0x50A6
"""First key of the two-key advisory locks of session leases (the second is ``hashtext(session_id)``)."""
_LOCK = "SELECT pg_advisory_lock(%s, hashtext(%s))"
_UNLOCK = "SELECT pg_advisory_unlock(%s, hashtext(%s))"
_TRY_LOCK = "SELECT pg_try_advisory_lock(%s, hashtext(%s))"
_HELD_HERE = (
    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted"
    " AND pid = pg_backend_pid() AND classid::bigint = %s AND objid = hashtext(%s)::oid AND objsubid = 2)"
)
_TAKE = (
    "INSERT INTO session_leases (session_id, epoch, owner, taken_at) VALUES (%s, 1, %s, %s)"
    " ON CONFLICT (session_id) DO UPDATE SET epoch = session_leases.epoch + 1, owner = EXCLUDED.owner,"
    " taken_at = EXCLUDED.taken_at RETURNING epoch"
)
_EPOCH = "SELECT epoch FROM session_leases WHERE session_id = %s"
FENCE_SQL = "SELECT epoch, owner FROM session_leases WHERE session_id = ? FOR SHARE"
"""Read in a write's own transaction: the lease row, share-locked until that transaction ends."""
Fetch = Callable[[str, Sequence[Any]], Sequence[Any] | None]
"""Runs one ``?``-placeholder query in the caller's open transaction and returns its first row."""


class HeldLeases:
    """The leases one store holds, by session id (one at a time per session: the runtime's FIFO)."""

    def __init__(self) -> None:
        self._held: dict[str, SessionLease] = {}

    def add(self, lease: SessionLease) -> None:
        self._held[lease.session_id] = lease

    def discard(self, lease: SessionLease) -> None:
        if self._held.get(lease.session_id) is lease:
            del self._held[lease.session_id]

    def regain(self) -> None:
        """After the writer reconnected (on its thread, before its next write): every held lease is taken
        again; one that cannot be is marked lost (never raises)."""
        for lease in list(self._held.values()):
            if not lease.lost:
                lease.regain_blocking()

    def __bool__(self) -> bool:
        return bool(self._held)

    def fence(self, session_id: str, fetch: Fetch, *, ending_run: bool = False, sql: str = FENCE_SQL) -> bool:
        """In a write's own transaction (before it writes): when this store holds ``session_id``'s lease,
        ``fetch(sql)`` share-locks the lease row and its ``(epoch, owner)`` must still be the lease's,
        else ``session_active`` (the lease is marked lost). A write ending a run is let through (the run
        ends ``failed``); sessions whose lease this store does not hold are not checked. Returns whether
        ``sql`` was run."""
        lease = self._held.get(session_id)
        if lease is None or ending_run:
            return False
        if lease.lost:
            raise lease.lost_error(None)
        row = fetch(sql, (session_id,))
        if row is None or int(row[0]) != lease.epoch:
            lease.lost = True
            raise lease.lost_error(row)
        return True


class SessionLease:
    """``async with`` holds the session's lease (waits for it first)."""

    def __init__(
        self,
        dsn: str,
        *,
        dsn_env: str,
        session_id: str,
        policy: ReconnectPolicy | None = None,
        held: HeldLeases | None = None,
        owner: str = "",
    ) -> None:
        self._dsn = dsn
        self._owner = owner
        self.epoch = 0
        """The fencing token this lease got when granted (``session_leases.epoch``)."""
        self._policy = policy
        self._dsn_env = dsn_env
        self._session_id = session_id
        self._conn: PgConnection | None = None
        self._held = held
        self.lost = False
        """Another process took the lock after this lease's connection was lost (see :class:`HeldLeases`)."""
        self.queue_position = 0

    def try_enter(self) -> None:
        """Taking the lease is a server round trip: cannot tell without waiting (``async with`` does)."""
        return None

    @property
    def session_id(self) -> str:
        return self._session_id

    @property
    def owner(self) -> str:
        return self._owner

    def lost_error(self, current: Sequence[Any] | None) -> SessionBusyError:
        """``session_active`` for a write under this lost lease; ``current``: the lease row now, if read."""
        details: dict[str, Any] = {
            "session_id": self._session_id,
            "lease_owner": self._owner,
            "lease_epoch": self.epoch,
            "config_key": RECONNECT_CONFIG_KEY,
        }
        now = ""
        if current is not None:
            details.update(current_owner=str(current[1]), current_epoch=int(current[0]))
            now = f" (now epoch {int(current[0])}, owner {current[1]})"
        return SessionBusyError(
            ErrorCode.session_active,
            f"session {self._session_id!r}: this process (owner {self._owner}) lost the session's lease "
            f"(epoch {self.epoch}) and another process took it over{now}; nothing was written, this run "
            f"stopped writing and ends failed (a lease is lost when its PostgreSQL connection stays away: "
            f"{RECONNECT_CONFIG_KEY})",
            details=details,
        )

    def regain_blocking(self) -> bool:
        """Holds the lock again on the lease's (reconnected) connection; marks the lease lost when another
        process has it or the server cannot be reached. Any thread but the lease's own."""
        conn = self._conn
        params = (LEASE_NAMESPACE, self._session_id)

        epoch = self.epoch

        def regain(c: psycopg.Connection[Any]) -> bool:
            row = c.execute(_HELD_HERE, params).fetchone()
            if not (row is not None and row[0]):
                row = c.execute(_TRY_LOCK, params).fetchone()
                if not (row is not None and row[0]):
                    return False
            # held again, but another process may have held it in between: only our epoch is ours
            row = c.execute(_EPOCH, (self._session_id,)).fetchone()
            if row is not None and int(row[0]) == epoch:
                return True
            c.execute(_UNLOCK, params)
            return False

        held = False
        if conn is not None:
            try:
                held = conn.call_blocking(lambda: conn.idempotent("taking a session lease again", regain))
            except Exception:
                log.warning("could not take the lease of session %s again", self._session_id, exc_info=True)
        if not held:
            log.warning(
                "the lease of session %s was lost with its PostgreSQL connection and another process "
                "holds it now: the run holding it stops writing",
                self._session_id,
            )
            self.lost = True
        return held

    async def __aenter__(self) -> SessionLease:
        conn = await connect(
            self._dsn, dsn_env=self._dsn_env, name="agent_core-pg-lease", policy=self._policy
        )
        params = (LEASE_NAMESPACE, self._session_id)
        take = (self._session_id, self._owner)

        def lock(c: psycopg.Connection[Any]) -> int:
            c.execute(_LOCK, params)
            row = c.execute(_TAKE, (*take, format_ts())).fetchone()  # the new fencing token
            return int(row[0]) if row is not None else 0

        # a connection lost while waiting held no lock: reconnect and queue again
        async with TaskOwner("session lease") as owner:
            waiting = owner.spawn(conn.run_idempotent("waiting for a session lease", lock))
            try:
                await asyncio.wait({waiting})  # a cancellation of this wait leaves the request queued
                self.epoch = waiting.result()
            except BaseException:
                # cancelled (or failed) while waiting: withdraw the request, wait until it has ended, then
                # drop the connection, which releases the lock should it have been granted meanwhile
                with contextlib.suppress(Exception):
                    await asyncio.get_running_loop().run_in_executor(None, conn.cancel_request)
                with contextlib.suppress(BaseException):
                    await asyncio.wait({waiting})
                    if not waiting.cancelled():
                        waiting.exception()  # retrieved: its outcome no longer matters
                await conn.close()
                raise
        self._conn = conn
        if self._held is not None:
            self._held.add(self)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._held is not None:
            self._held.discard(self)
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

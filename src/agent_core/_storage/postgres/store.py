"""The PostgreSQL session store (docs/storage.md#backends): the portable store on a shared database.

:class:`PostgresStorage` is the sibling of the SQLite store: both are a
:class:`~agent_core._storage.sql_store.SqlSessionStore` (the portable SQL of every write and read);
here the writer and reader are psycopg connections (``storage/postgres/connection.py``, reconnecting
after a lost connection). What changes because several processes may write one database:

- every write touching a session locks its ``sessions`` row (``SELECT … FOR UPDATE``) first, and the
  ``node_seq`` / ``seq`` / ``run_seq`` counters are read inside that transaction instead of being
  cached: sequences stay contiguous across processes, and appends of one session are serialised
  cluster-wide (a process's own writes stay FIFO behind its writer queue);
- compact context reports are not used (a cached node index would miss other processes' nodes): a
  ``context_built`` payload is stored with its full node-id lists;
- per-session tables are named by the session id, or by a digest of it when ``nodes_<id>`` would exceed
  PostgreSQL's 63-byte identifiers.

The DSN is read from the environment variable ``[storage.postgres] dsn_env`` names, at :meth:`open`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import secrets
import socket
from collections.abc import Callable, Sequence
from typing import Any

import psycopg

from agent_core._redaction import Redactor
from agent_core._storage import schema as S
from agent_core._storage.caches import SESSION_SQL_CACHE, StoreCaches
from agent_core._storage.columns import update_statement
from agent_core._storage.migrations import MIGRATIONS, Migration
from agent_core._storage.owners import local_alive, pg_owner, pg_owner_keys
from agent_core._storage.postgres.connection import (
    DEFAULT_RECONNECT_TIMEOUT_MS,
    PgConnection,
    PgTransactions,
    ReconnectPolicy,
    connect,
    dsn_from_env,
)
from agent_core._storage.postgres.lease import LEASE_NAMESPACE, HeldLeases, SessionLease
from agent_core._storage.postgres.migrate import apply_pg_migrations, pg_ddl
from agent_core._storage.postgres.task_wal import PgTaskWal
from agent_core._storage.protocol import SessionStore
from agent_core._storage.sql_store import SqlSessionStore, _ends_run
from agent_core._storage.writer import Txn, TxnQueue, wrap_storage_error
from agent_core.errors import AgentCoreError, ErrorCode, NotFoundError, SessionNotFoundError, StorageError
from agent_core.types.storage import RunRecord

MAX_TABLE_KEY = 40
"""Longest session id used verbatim in table names (``ux_events_<key>_seq`` stays under 63 bytes)."""


def table_key(session_id: str) -> str:
    """The per-session table suffix: the id itself, or ``h`` + 32 hex digits of its SHA-256."""
    if len(session_id) <= MAX_TABLE_KEY:
        return session_id
    return "h" + hashlib.sha256(session_id.encode()).hexdigest()[:32]


class SharedStoreCaches(StoreCaches):
    """The caches of a store other processes write too: counters are never trusted from memory, node
    indexes are not kept, and per-session SQL is PostgreSQL's."""

    KEEP_NODE_INDEX = False

    def session_sql(self, session_id: str) -> S.SessionSql:
        sql = self.sql.get(session_id)
        if sql is None:
            built = S.SessionSql.build(session_id, table_key(session_id))
            sql = dataclasses.replace(built, create=tuple(pg_ddl(s, rowid=False) for s in built.create))
            if len(self.sql) >= SESSION_SQL_CACHE:
                self.sql.clear()
            self.sql[session_id] = sql
        return sql

    @staticmethod
    def counter(txn: Txn, cache: dict[str, int], key: str, sql: str, *params: Any) -> int:
        """Always the committed maximum, read under the session row lock (other processes append too)."""
        return int(txn.scalar(sql, params) or 0)


_FENCED_SESSION = (
    "SELECT l.epoch, l.owner FROM sessions s JOIN session_leases l ON l.session_id = s.session_id"
    " WHERE s.session_id = ? FOR UPDATE OF s FOR SHARE OF l"
)
"""A write's session row lock and its lease's fencing token in one round trip (see ``lease.py``)."""

OWNER_NAMESPACE = 0x50A7
"""First key of the advisory lock each open store holds on its writer connection (second: its owner key)."""


def _take_owner_key(conn: psycopg.Connection[Any]) -> int:
    """Holds a fresh ``(OWNER_NAMESPACE, key)`` advisory lock for the connection's life; returns ``key``."""
    while True:
        key = secrets.randbelow(2**31 - 1) + 1
        row = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (OWNER_NAMESPACE, key)).fetchone()
        if row is not None and row[0]:
            return key


def _retake_owner_key(conn: psycopg.Connection[Any], key: int) -> None:
    """After a reconnect: holds ``key`` again (the old server process may not have released it yet)."""
    row = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (OWNER_NAMESPACE, key)).fetchone()
    if row is None or not row[0]:
        conn.close()
        raise psycopg.OperationalError("the store's owner lock is still held by the lost connection")


class PostgresStorage(SqlSessionStore):
    """The session store on PostgreSQL; the DSN comes from the environment variable ``dsn_env``."""

    BACKEND = "postgres"
    SHARED = True
    ROW_LOCK = " FOR UPDATE"

    def __init__(
        self,
        *,
        dsn_env: str,
        redactor: Redactor,
        migrations: Sequence[Migration] = MIGRATIONS,
        environ: dict[str, str] | None = None,
        reconnect_timeout_ms: int = DEFAULT_RECONNECT_TIMEOUT_MS,
    ) -> None:
        super().__init__(redactor=redactor, migrations=migrations, caches=SharedStoreCaches())
        self._dsn_env = dsn_env
        self._environ = environ
        self._pg_writer: PgConnection | None = None
        self._pg_reader: PgConnection | None = None
        self._task_wal: PgTaskWal | None = None
        self._dsn: str | None = None
        self._owner_key = 0
        self._leases = HeldLeases()
        self._elsewhere = 0
        self._policy = ReconnectPolicy(timeout_s=reconnect_timeout_ms / 1000)

    @property
    def dsn_env(self) -> str:
        return self._dsn_env

    async def open(self) -> None:
        """Idempotent: connects the writer and reader, applies the missing migrations."""
        async with self._open_lock:
            if self._writer is not None and not self._writer.closing:
                return
            dsn = dsn_from_env(self._environ if self._environ is not None else os.environ, self._dsn_env)
            writer: PgConnection | None = None
            reader: PgConnection | None = None
            try:
                writer = await connect(
                    dsn,
                    dsn_env=self._dsn_env,
                    name="agent_core-pg-writer",
                    policy=self._policy,
                    on_connect=self._hold_owner_key,
                )
                migrations = self._migrations
                await writer.run(lambda conn: apply_pg_migrations(conn, migrations))
                reader = await connect(
                    dsn, dsn_env=self._dsn_env, name="agent_core-pg-reader", policy=self._policy
                )
            except BaseException as exc:
                for conn in (reader, writer):
                    if conn is not None:
                        await conn.close()
                if isinstance(exc, Exception) and not isinstance(exc, AgentCoreError):
                    raise wrap_storage_error(exc, f"opening PostgreSQL (${self._dsn_env})") from exc
                raise
            self._pg_writer, self._pg_reader, self._dsn = writer, reader, dsn
            self._writer = TxnQueue(PgTransactions(writer))
            self._writer.start()

    def _hold_owner_key(self, conn: psycopg.Connection[Any]) -> None:
        """On each new writer connection: the owner lock marking this store's runs as live (the same
        key again after a reconnect, so ``run_owners`` rows stay valid); after a reconnect, the session
        leases this store holds are taken again before the next write (see ``lease.py``)."""
        if self._owner_key == 0:
            self._owner_key = _take_owner_key(conn)
        else:
            _retake_owner_key(conn, self._owner_key)
            self._leases.regain()

    async def close(self) -> None:
        """Drains the writer queue, then closes both connections. Idempotent."""
        async with self._open_lock:
            await self._stop_writer()
            for conn in (self._pg_reader, self._pg_writer):
                if conn is not None:
                    await conn.close()
            self._pg_reader = self._pg_writer = None
            if self._task_wal is not None:
                self._task_wal.close()

    def _record_run_owner(self, txn: Txn, record: RunRecord) -> None:
        """A run row is written with its owner (this store's owner lock) in the same transaction."""
        txn.execute(
            "INSERT INTO run_owners (run_id, owner_key) VALUES (?, ?)", (record.run_id, self._owner_key)
        )

    def _forget_session_extras(self, txn: Txn, session_id: str) -> None:
        """Forgets the owners of runs that no longer exist (the session's runs rows are gone)."""
        txn.execute(
            "DELETE FROM run_owners o WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.run_id = o.run_id)"
        )

    async def runs_live_elsewhere(self, run_ids: Sequence[str]) -> set[str]:
        """Which of ``run_ids`` another open store owns (its owner lock is held): not orphans."""
        if not run_ids:
            return set()
        marks = ", ".join("?" for _ in run_ids)
        rows = await self._read(
            "SELECT o.run_id FROM run_owners o JOIN pg_locks l ON l.locktype = 'advisory' AND l.granted"
            f" AND l.classid::bigint = {OWNER_NAMESPACE} AND l.objid::bigint = o.owner_key AND l.objsubid = 2"
            f" WHERE o.owner_key <> ? AND o.run_id IN ({marks})",
            (self._owner_key, *run_ids),
        )
        return {str(r[0]) for r in rows}

    @property
    def claim_owner(self) -> str:
        """This store's owner lock (held while it is open, also while its process is frozen)."""
        return pg_owner(self._owner_key)

    async def live_owners(self, owners: Sequence[str]) -> set[str]:
        """Which of ``owners`` hold their owner lock (another process's store is open)."""
        keys = pg_owner_keys(owners)
        live = {o for o in owners if o not in keys and local_alive(o)}
        if keys:
            marks = ", ".join("?" for _ in keys)
            rows = await self._read(
                "SELECT l.objid::bigint FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted"
                f" AND l.classid::bigint = {OWNER_NAMESPACE} AND l.objsubid = 2"
                f" AND l.objid::bigint IN ({marks})",
                tuple(keys.values()),
            )
            held = {int(r[0]) for r in rows}
            live |= {o for o, k in keys.items() if k in held}
        return live

    async def session_busy(self, session_id: str) -> str | None:
        """Who holds ``session_id``'s lease (its lease owner), if another process holds it, else ``None``."""
        rows = await self._read(
            "SELECT l.owner FROM session_leases l WHERE l.session_id = ? AND EXISTS (SELECT 1 FROM pg_locks p"
            " WHERE p.locktype = 'advisory' AND p.granted AND p.classid::bigint = ?"
            " AND p.objid = hashtext(?)::oid AND p.objsubid = 2)",
            (session_id, LEASE_NAMESPACE, session_id),
        )
        return f"owner {rows[0][0]}" if rows else None

    async def writes_elsewhere(self) -> int:
        """Other processes may have written at any time: a new number on every call."""
        self._elsewhere += 1
        return self._elsewhere

    def session_lease(self, session_id: str) -> SessionLease:
        """The session's cluster-wide lease (an advisory lock on a connection of its own)."""
        if self._dsn is None:
            raise StorageError(ErrorCode.storage_error, "the storage manager is not open")
        return SessionLease(
            self._dsn,
            dsn_env=self._dsn_env,
            session_id=session_id,
            policy=self._policy,
            held=self._leases,
            owner=f"{socket.gethostname()}-{os.getpid()}-{self._owner_key}",
        )

    def task_wal_writer(self) -> PgTaskWal:
        """Task WALs in this database's ``task_wal`` table (one writer per store)."""
        if self._task_wal is None:
            self._task_wal = PgTaskWal(dsn_env=self._dsn_env, environ=self._environ, leases=self._leases)
        return self._task_wal

    async def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        if self._pg_reader is None:
            raise StorageError(ErrorCode.storage_error, "the storage manager is not open")
        try:
            return await self._pg_reader.fetchall(sql, params)
        except AgentCoreError:
            raise
        except Exception as exc:
            raise wrap_storage_error(exc, "read") from exc

    def _ensure_session(self, txn: Txn, session_id: str, *, ending_run: bool = False) -> None:
        """Locks the session row for the rest of the transaction (``validation_error`` if missing);
        ``session_active`` when this store lost the session's lease, or another process took it over
        (its fencing token, read in this transaction; only a run's end is still written)."""

        def fenced(sql: str, params: Sequence[Any]) -> Sequence[Any] | None:
            rows = txn.fetchall(sql, params)
            if not rows:
                _lock_session(txn, session_id)  # a missing session is reported as such
            return tuple(rows[0]) if rows else None

        if not self._leases.fence(session_id, fenced, ending_run=ending_run, sql=_FENCED_SESSION):
            _lock_session(txn, session_id)

    async def update_run(self, run_id: str, /, **fields: Any) -> None:
        """As on SQLite; while this store holds the run's session lease, checked against the lease's
        fencing token in the same transaction (``session_active`` once another process took it over,
        unless the update ends the run)."""
        if not self._leases:
            return await super().update_run(run_id, **fields)
        statement, params = update_statement(
            "runs", "run_id", run_id, fields, S.UPDATABLE_RUN_COLUMNS, self._redactor
        )
        ending_run = _ends_run(fields)

        def op(txn: Txn) -> None:
            session_id = txn.scalar("SELECT session_id FROM runs WHERE run_id = ?", (run_id,))
            if session_id is not None:
                self._leases.fence(str(session_id), _first_row(txn), ending_run=ending_run)
            if txn.execute(statement, params) == 0:
                raise NotFoundError(ErrorCode.validation_error, f"unknown run {run_id!r}")

        await self._queue().submit(op)

    async def merge_run_metadata(self, run_id: str, key: str, value: Any) -> None:
        """As on SQLite, the run's row locked (``FOR UPDATE``); fenced as :meth:`update_run`."""
        if not self._leases:
            return await super().merge_run_metadata(run_id, key, value)

        def op(txn: Txn) -> None:
            session_id = txn.scalar("SELECT session_id FROM runs WHERE run_id = ?", (run_id,))
            if session_id is not None:
                self._leases.fence(str(session_id), _first_row(txn), ending_run=False)
            self._merge_run_metadata(txn, run_id, key, value)

        await self._queue().submit(op)


def _lock_session(txn: Txn, session_id: str) -> None:
    if not txn.scalar("SELECT 1 FROM sessions WHERE session_id = ? FOR UPDATE", (session_id,)):
        raise SessionNotFoundError(
            ErrorCode.validation_error, f"unknown session {session_id!r}", details={"session_id": session_id}
        )


def _first_row(txn: Txn) -> Callable[[str, Sequence[Any]], Sequence[Any] | None]:
    def fetch(sql: str, params: Sequence[Any]) -> Sequence[Any] | None:
        rows = txn.fetchall(sql, params)
        return tuple(rows[0]) if rows else None

    return fetch


_CONFORMS: type[SessionStore] = PostgresStorage

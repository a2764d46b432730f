"""The PostgreSQL session store (surfaces.md §3): the SQLite store's logic on a shared database.

:class:`PostgresStorage` is a :class:`StorageManager` whose writer and reader are psycopg connections
(``storage/postgres/connection.py``); every statement is the same portable SQL. What changes because
several processes may write one database:

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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent_core.errors import AgentCoreError, ErrorCode, StorageError
from agent_core.redaction import Redactor
from agent_core.storage import schema as S
from agent_core.storage.caches import SESSION_SQL_CACHE, StoreCaches
from agent_core.storage.migrations import MIGRATIONS, Migration
from agent_core.storage.postgres.connection import (
    PgConnection,
    PgWriterQueue,
    connect,
    dsn_from_env,
)
from agent_core.storage.postgres.migrate import apply_pg_migrations, pg_ddl
from agent_core.storage.sqlite import StorageManager
from agent_core.storage.writer import Txn, wrap_storage_error

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


class PostgresStorage(StorageManager):
    """The session store on PostgreSQL; the DSN comes from the environment variable ``dsn_env``."""

    BACKEND = "postgres"

    def __init__(
        self,
        *,
        dsn_env: str,
        redactor: Redactor,
        migrations: Sequence[Migration] = MIGRATIONS,
        environ: dict[str, str] | None = None,
    ) -> None:
        super().__init__(
            Path(f"${dsn_env}"), redactor=redactor, migrations=migrations, caches=SharedStoreCaches()
        )
        self._dsn_env = dsn_env
        self._environ = environ
        self._pg_writer: PgConnection | None = None
        self._pg_reader: PgConnection | None = None

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
                writer = await connect(dsn, dsn_env=self._dsn_env, name="agent_core-pg-writer")
                migrations = self._migrations
                await writer.run(lambda conn: apply_pg_migrations(conn, migrations))
                reader = await connect(dsn, dsn_env=self._dsn_env, name="agent_core-pg-reader")
            except BaseException as exc:
                for conn in (reader, writer):
                    if conn is not None:
                        await conn.close()
                if isinstance(exc, Exception) and not isinstance(exc, AgentCoreError):
                    raise wrap_storage_error(exc, f"opening PostgreSQL (${self._dsn_env})") from exc
                raise
            self._pg_writer, self._pg_reader = writer, reader
            self._writer = PgWriterQueue(writer)
            self._writer.start()

    async def close(self) -> None:
        """Drains the writer queue, then closes both connections. Idempotent."""
        await super().close()
        async with self._open_lock:
            for conn in (self._pg_reader, self._pg_writer):
                if conn is not None:
                    await conn.close()
            self._pg_reader = self._pg_writer = None

    async def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        if self._pg_reader is None:
            raise StorageError(ErrorCode.storage_error, "the storage manager is not open")
        try:
            return await self._pg_reader.fetchall(sql, params)
        except AgentCoreError:
            raise
        except Exception as exc:
            raise wrap_storage_error(exc, "read") from exc

    def _ensure_session(self, txn: Txn, session_id: str) -> None:
        """Locks the session row for the rest of the transaction (``validation_error`` if missing)."""
        if not txn.scalar("SELECT 1 FROM sessions WHERE session_id = ? FOR UPDATE", (session_id,)):
            raise AgentCoreError(ErrorCode.validation_error, f"unknown session {session_id!r}")

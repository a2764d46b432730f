"""The SQLite session store (storage.md §2–§6): one writer connection behind a FIFO writer queue, one
read connection, built-in migrations; the portable logic (writes, the append hot path, reads, sequence
counters) is :class:`~agent_core._storage.sql_store.SqlSessionStore`, shared with the postgres backend.

Contracts (besides the shared ones of ``sql_store``):

- Every write is ``BEGIN IMMEDIATE`` … ``COMMIT`` on the writer connection, one at a time: on the event
  loop when only this process writes the file, else on the connection's thread (``WriterQueue``).
- Reads use the second connection (``query_only``) and never wait behind the writer queue.
- One storage manager owns a database file (the runtime has exactly one), so the sequence counters are
  read once (``MAX(...)``) and then cached; with the ``temporal`` engine several processes write the
  file and :class:`~agent_core._storage.caches.MultiProcessCaches` reads them in every transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiosqlite

from agent_core._private_fs import create_private_file, make_private_dirs
from agent_core._redaction import Redactor
from agent_core._storage.caches import StoreCaches
from agent_core._storage.migrations import MIGRATIONS, Migration, apply_migrations
from agent_core._storage.owners import local_alive, process_owner
from agent_core._storage.sql_store import NON_TERMINAL_RUN_STATUSES, SqlSessionStore
from agent_core._storage.writer import WriterQueue, wrap_storage_error
from agent_core.errors import AgentCoreError, ErrorCode, StorageError

if TYPE_CHECKING:
    from agent_core._tasks.wal import WalWriter

__all__ = ["NON_TERMINAL_RUN_STATUSES", "StorageManager"]

log = logging.getLogger(__name__)
_NO_LEASE: contextlib.AbstractAsyncContextManager[object] = contextlib.nullcontext()

BUSY_TIMEOUT_MS = 5000
STATEMENT_CACHE = 2048


class StorageManager(SqlSessionStore):
    """Owns the SQLite file, its connections and the writer queue."""

    BACKEND = "sqlite"
    SHARED = False

    def __init__(
        self,
        db_path: Path,
        *,
        redactor: Redactor,
        migrations: Sequence[Migration] = MIGRATIONS,
        caches: StoreCaches | None = None,
    ) -> None:
        super().__init__(redactor=redactor, migrations=migrations, caches=caches)
        self._db_path = Path(db_path)
        self._writer_conn: aiosqlite.Connection | None = None
        self._reader: aiosqlite.Connection | None = None

    @property
    def db_path(self) -> Path:
        return self._db_path

    async def open(self) -> None:
        """Idempotent. Creates parent dirs, sets WAL/busy_timeout/synchronous, applies migrations.

        Failure → ``StorageError`` (``storage_error``, or ``migration_failed`` from a migration) and every
        connection opened so far is closed again.
        """
        async with self._open_lock:
            if self._writer is not None and not self._writer.closing:
                return
            writer: aiosqlite.Connection | None = None
            reader: aiosqlite.Connection | None = None
            try:
                make_private_dirs(self._db_path.parent)  # a home the runtime creates is 0700
                create_private_file(self._db_path)  # SQLite gives -wal/-shm the same mode (0600)
                writer = await self._connect()
                mode = await _enable_wal(writer)
                if str(mode).lower() != "wal":
                    raise StorageError(
                        ErrorCode.storage_error, f"cannot enable WAL journal mode (got {mode!r})"
                    )
                await writer.execute_fetchall("PRAGMA synchronous=NORMAL")
                await apply_migrations(writer, self._migrations)
                inline = not self._caches.OTHER_WRITERS
                if inline:  # the writer queue checkpoints on the connection thread
                    await writer.execute_fetchall("PRAGMA wal_autocheckpoint=0")
                reader = await self._connect()
                await reader.execute_fetchall("PRAGMA query_only=ON")
            except BaseException as exc:
                for conn in (reader, writer):
                    if conn is not None:
                        await _close_quietly(conn)
                if isinstance(exc, Exception) and not isinstance(exc, AgentCoreError):
                    raise wrap_storage_error(exc, f"opening {self._db_path}") from exc
                raise
            self._writer_conn, self._reader = writer, reader
            self._writer = WriterQueue(writer, inline=inline, busy_timeout_ms=BUSY_TIMEOUT_MS)
            self._writer.start()

    async def _connect(self) -> aiosqlite.Connection:
        # check_same_thread=False: the writer queue may run transactions on the event loop's thread (one
        # at a time, never while the connection thread runs one)
        conn = await aiosqlite.connect(
            str(self._db_path),
            isolation_level=None,
            cached_statements=STATEMENT_CACHE,
            check_same_thread=False,
        )
        try:
            await conn.execute_fetchall(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        except BaseException:
            await _close_quietly(conn)
            raise
        return conn

    async def close(self) -> None:
        """Drains the writer queue, then closes both connections. Idempotent."""
        async with self._open_lock:
            await self._stop_writer()
            for conn in (self._reader, self._writer_conn):
                if conn is not None:
                    await _close_quietly(conn)
            self._reader = self._writer_conn = None

    def session_lease(self, session_id: str) -> contextlib.AbstractAsyncContextManager[object]:
        """Held by a root run while it runs: one running root run per session across every process
        sharing the database, in FIFO order. One process per SQLite file: the runtime's own session
        queue is the whole guarantee, so this holds nothing."""
        return _NO_LEASE

    async def runs_live_elsewhere(self, run_ids: Sequence[str]) -> set[str]:
        """Which of ``run_ids`` belong to another live process (never true: one process per file)."""
        return set()

    @property
    def claim_owner(self) -> str:
        """This process (pid, start time): one machine per SQLite file."""
        return process_owner()

    async def live_owners(self, owners: Sequence[str]) -> set[str]:
        """Which of ``owners`` still run (a frozen process does; a killed one does not)."""
        return {o for o in owners if local_alive(o)}

    def task_wal_writer(self) -> WalWriter | None:
        """The Task WAL medium of this backend; ``None`` means JSONL files (the default writer)."""
        return None

    async def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        if self._reader is None:
            raise StorageError(ErrorCode.storage_error, "the storage manager is not open")
        try:
            return list(await self._reader.execute_fetchall(sql, params))
        except AgentCoreError:
            raise
        except Exception as exc:
            raise wrap_storage_error(exc, "read") from exc


async def _enable_wal(conn: aiosqlite.Connection) -> str:
    """``PRAGMA journal_mode=WAL``; the journal mode it reports. Another process opening or closing a fresh
    file at the same moment can make the switch fail with ``SQLITE_BUSY`` at once, without SQLite's busy
    handler: retried (5 ms doubling to 100 ms) until the busy timeout has passed, like any other lock wait."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    delay = 0.005
    while True:
        try:
            return str(next(iter(await conn.execute_fetchall("PRAGMA journal_mode=WAL")))[0])
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY or time.monotonic() >= deadline:
                raise
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.1)


async def _close_quietly(conn: aiosqlite.Connection) -> None:
    try:
        await conn.close()
    except Exception:
        log.debug("closing a SQLite connection failed", exc_info=True)

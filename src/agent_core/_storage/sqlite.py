"""The SQLite session store: one writer connection behind the FIFO writer queue, one
read connection, built-in migrations; the portable logic (writes, the append hot path, reads, sequence
counters) is :class:`~agent_core._storage.sql_store.SqlSessionStore`, shared with the postgres backend.

Contracts (besides the shared ones of ``sql_store``):

- Every write is ``BEGIN IMMEDIATE`` … ``COMMIT`` on the writer connection, one at a time: on the event
  loop while no other process holds the file's write lock, else on the connection's own thread
  (:mod:`agent_core._storage.sqlite_connection`).
- Reads use the second connection (``query_only``) and never wait behind the writer queue.
- Several processes (and runtimes) may open one database file (issue 40): ``serve`` beside ``chat`` and
  ``run`` on one home, or the ``temporal`` engine's workers. The counters are cached while this store is
  the only writer and re-read inside the first transaction after another connection committed (``PRAGMA
  data_version``); one root run runs per session across them (:meth:`StorageManager.session_lease`, a file
  lock in ``<database>.locks/``); each run row records its owner (``run_owners``), so crash recovery closes
  only the runs of stores that are gone (:meth:`StorageManager.runs_live_elsewhere`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiosqlite

from agent_core._redaction import Redactor
from agent_core._storage.caches import StoreCaches
from agent_core._storage.migrations import MIGRATIONS, Migration
from agent_core._storage.owners import (
    close_store_owner,
    local_alive,
    open_store_owner,
    process_owner,
    store_alive,
)
from agent_core._storage.sql_store import NON_TERMINAL_RUN_STATUSES, SqlSessionStore
from agent_core._storage.sqlite_connection import (
    BUSY_TIMEOUT_MS,
    STATEMENT_CACHE,
    SqliteWriterConnection,
)
from agent_core._storage.sqlite_lease import FileSessionLease, lease_holder
from agent_core._storage.writer import Txn, TxnQueue, wrap_storage_error
from agent_core.errors import AgentCoreError, ErrorCode, StorageError
from agent_core.types.storage import RunRecord

if TYPE_CHECKING:
    from agent_core._tasks.wal import WalWriter

__all__ = ["BUSY_TIMEOUT_MS", "NON_TERMINAL_RUN_STATUSES", "StorageManager"]

log = logging.getLogger(__name__)


class StorageManager(SqlSessionStore):
    """Owns the SQLite file, its connections and the writer queue."""

    BACKEND = "sqlite"
    SHARED = False
    """Not a database of several machines (the lease and run owners are local to this one)."""

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
        self._writer_conn: SqliteWriterConnection | None = None
        self._reader: aiosqlite.Connection | None = None
        self._owner = ""

    @property
    def db_path(self) -> Path:
        return self._db_path

    @property
    def locks_dir(self) -> Path:
        """Where the session leases live: ``<database>.locks`` beside the database file."""
        return self._db_path.with_name(f"{self._db_path.name}.locks")

    async def open(self) -> None:
        """Idempotent. Creates parent dirs, sets WAL/busy_timeout/synchronous, applies migrations.

        Failure → ``StorageError`` (``storage_error``, naming a read-only file or directory as such, or
        ``migration_failed`` from a migration) and every connection opened so far is closed again.
        """
        async with self._open_lock:
            if self._writer is not None and not self._writer.closing:
                return
            writer = SqliteWriterConnection(self._db_path, on_stale=self._caches.forget_foreign)
            reader: aiosqlite.Connection | None = None
            try:
                await writer.open(self._migrations)
                reader = await aiosqlite.connect(
                    str(self._db_path),
                    isolation_level=None,
                    cached_statements=STATEMENT_CACHE,
                )
                await reader.execute_fetchall(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
                await reader.execute_fetchall("PRAGMA query_only=ON")
            except BaseException as exc:
                if reader is not None:
                    await _close_quietly(reader)
                await writer.close()
                if isinstance(exc, Exception) and not isinstance(exc, AgentCoreError):
                    raise wrap_storage_error(exc, f"opening {self._db_path}") from exc
                raise
            self._writer_conn, self._reader = writer, reader
            self._owner = open_store_owner()
            self._writer = TxnQueue(writer)
            self._writer.start()

    async def close(self) -> None:
        """Drains the writer queue, then closes both connections. Idempotent."""
        async with self._open_lock:
            await self._stop_writer()
            if self._reader is not None:
                await _close_quietly(self._reader)
            if self._writer_conn is not None:
                await self._writer_conn.close()
            self._reader = self._writer_conn = None
            close_store_owner(self._owner)

    # ---- several processes on one file --------------------------------------------------------

    def session_lease(self, session_id: str) -> FileSessionLease:
        """Held by a root run while it runs: one running root run per session across every process and
        runtime that opens this file, waiting runs in arrival order (see ``sqlite_lease``)."""
        return FileSessionLease(self.locks_dir, session_id)

    async def session_busy(self, session_id: str) -> str | None:
        """Who else holds ``session_id``'s lease or waits for it (``"pid N"``), else ``None``."""
        return lease_holder(self.locks_dir, session_id)

    async def writes_elsewhere(self) -> int:
        """How many of this store's transactions found that another connection had committed before them;
        read in a transaction of its own, so every commit made elsewhere until now is counted."""
        conn = self._writer_conn
        if conn is None:
            raise StorageError(ErrorCode.storage_error, "the storage manager is not open")
        return int(await self._queue().submit(lambda txn: conn.foreign_writes))

    def _record_run_owner(self, txn: Txn, record: RunRecord) -> None:
        """A run row is written with its owner (this open store) in the same transaction."""
        txn.execute(
            "INSERT OR REPLACE INTO run_owners (run_id, session_id, owner) VALUES (?, ?, ?)",
            (record.run_id, record.session_id, self._owner),
        )

    def _forget_session_extras(self, txn: Txn, session_id: str) -> None:
        txn.execute("DELETE FROM run_owners WHERE session_id = ?", (session_id,))

    async def runs_live_elsewhere(self, run_ids: Sequence[str]) -> set[str]:
        """Which of ``run_ids`` another open store owns (another live process, or another runtime of this
        one): not orphans. A run without an owner row (written before owners were kept) has none."""
        live: set[str] = set()
        ids = list(run_ids)
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ", ".join("?" for _ in chunk)
            rows = await self._read(
                f"SELECT run_id, owner FROM run_owners WHERE run_id IN ({marks})", tuple(chunk)
            )
            live.update(str(r[0]) for r in rows if r[1] != self._owner and store_alive(str(r[1])))
        return live

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


async def _close_quietly(conn: aiosqlite.Connection) -> None:
    try:
        await conn.close()
    except Exception:
        log.debug("closing a SQLite connection failed", exc_info=True)

"""The SQLite writer connection: a stdlib ``sqlite3`` connection and the one thread it owns.

:class:`SqliteWriterConnection` is the :class:`~agent_core._storage.writer.TxnConnection` of the SQLite
store. Every write is ``BEGIN IMMEDIATE`` … operation … ``COMMIT`` (``ROLLBACK`` on any error), run

- *inline*, on the event loop, when the file's write lock is free: the inline ``BEGIN`` does not wait
  (busy timeout 0 for that statement only; the connection keeps :data:`BUSY_TIMEOUT_MS`). In WAL mode with
  ``synchronous=NORMAL`` a commit writes WAL frames without an fsync, so a turn's transactions cost less
  there than thread hand-offs (issue 16);
- else on the connection's own thread, where ``BEGIN`` waits up to the busy timeout for the other
  process's write to end (the event loop keeps running). Upkeep runs there too: a ``PASSIVE`` WAL
  checkpoint every :data:`CHECKPOINT_EVERY` inline commits (``wal_autocheckpoint`` is off).

The connection is used by one of the two at a time (the writer queue runs one transaction at a time).

Several processes on one file (issue 40): right after ``BEGIN IMMEDIATE`` (the write lock held, so nobody
else can commit) every transaction reads ``PRAGMA data_version``, which changes exactly when another
connection has committed since this one last looked; :attr:`foreign_writes` then counts up. Such a
transaction, and the one after a failed transaction (an ``IntegrityError`` on a ``node_seq`` means the
cached counters were wrong), is :attr:`~agent_core._storage.writer.Txn.stale`: the store re-reads its
counters inside it, and ``on_stale`` (the store forgetting its caches) is its first ``after_commit``
callback, on the event loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agent_core._private_fs import create_private_file, make_private_dirs
from agent_core._storage.migrations import MIGRATIONS, Migration, apply_migrations
from agent_core._storage.writer import Committed, Txn
from agent_core.errors import AgentCoreError, ErrorCode, StorageError

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 5000
"""How long a statement waits for another connection's lock (``PRAGMA busy_timeout``)."""
STATEMENT_CACHE = 2048
CHECKPOINT_EVERY = 100
"""Inline commits between two ``PASSIVE`` WAL checkpoints on the connection thread (a turn commits ~9)."""
DB_PATH_KEY = "context.session_db_path"

SQLITE_EXTRA_DDL: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS run_owners (
  run_id     TEXT PRIMARY KEY,
  session_id TEXT NOT NULL,
  owner      TEXT NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS idx_run_owners_session ON run_owners(session_id)",
)
"""SQLite-only bookkeeping, created idempotently at every open: the store (process and open store) that
started each run, so crash recovery in another process closes only runs whose owner is gone."""


def connect(path: Path, *, read_only: bool = False) -> sqlite3.Connection:
    """A connection in autocommit mode, usable from any one thread at a time, with the busy timeout."""
    conn = sqlite3.connect(
        str(path), isolation_level=None, cached_statements=STATEMENT_CACHE, check_same_thread=False
    )
    try:
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        if read_only:
            conn.execute("PRAGMA query_only=ON")
    except BaseException:
        conn.close()
        raise
    return conn


def enable_wal(conn: sqlite3.Connection) -> str:
    """``PRAGMA journal_mode=WAL``; the journal mode it reports. Another process opening or closing a fresh
    file at the same moment can make the switch fail with ``SQLITE_BUSY`` at once, without SQLite's busy
    handler: retried (5 ms doubling to 100 ms) until the busy timeout has passed, like any other lock wait."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    delay = 0.005
    while True:
        try:
            return str(conn.execute("PRAGMA journal_mode=WAL").fetchone()[0])
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY or time.monotonic() >= deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


def not_writable(path: Path) -> Path | None:
    """What keeps this process from writing the database ``path``: the file itself (when it exists) or the
    directory that holds it or would (its nearest existing ancestor when it does not exist yet); ``None``
    when both can be written."""
    if path.exists() and not os.access(path, os.W_OK):
        return path
    folder = path.parent
    while not folder.exists() and folder.parent != folder:
        folder = folder.parent
    return None if os.access(folder, os.W_OK) else folder


def read_only_error(path: Path, blocked: Path, cause: BaseException | None = None) -> StorageError:
    kind = "directory" if blocked.is_dir() else "file"
    return StorageError(
        ErrorCode.storage_error,
        f"the session database {path} is read-only: this process cannot write the {kind} {blocked} "
        f"(make it writable, or set {DB_PATH_KEY} to a writable location)",
        details={"path": str(path), "not_writable": str(blocked), "config_key": DB_PATH_KEY},
        cause=cause,
    )


def open_error(exc: BaseException, path: Path) -> AgentCoreError:
    """The error of a failed open: a database file or directory this process cannot write is named as
    such (the driver only says ``unable to open database file`` or ``attempt to write a readonly
    database``)."""
    blocked = not_writable(path)
    if blocked is not None and not (isinstance(exc, AgentCoreError) and "not_writable" in exc.details):
        return read_only_error(path, blocked, exc)
    if isinstance(exc, AgentCoreError):
        return exc
    return StorageError(
        ErrorCode.storage_error, f"opening {path} failed: {type(exc).__name__}: {exc}", cause=exc
    )


class SqliteWriterConnection:
    """The writer's ``sqlite3`` connection and its thread (see the module docstring)."""

    def __init__(
        self,
        path: Path,
        *,
        on_stale: Callable[[], None] = lambda: None,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
    ) -> None:
        self._path = path
        self._on_stale = on_stale
        self._failed = False
        self._restore_busy_timeout = f"PRAGMA busy_timeout={int(busy_timeout_ms)}"
        self._conn: sqlite3.Connection | None = None
        self._thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="agent_core-sqlite-writer")
        self._version = 0
        self._commits = 0
        self.foreign_writes = 0
        """How many transactions found that another connection had committed since the one before."""

    # ---- open / close ---------------------------------------------------------------------------

    async def open(self, migrations: Sequence[Migration] = MIGRATIONS) -> None:
        """Connects on the connection's thread: WAL, ``synchronous=NORMAL``, the missing migrations, the
        SQLite-only tables. Failure → ``StorageError`` (a read-only file or directory named as such;
        ``migration_failed`` from a migration) and the connection is closed again."""
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._thread, self._open_blocking, tuple(migrations))
        except BaseException:
            self._thread.shutdown(wait=False)
            raise

    def _open_blocking(self, migrations: Sequence[Migration]) -> None:
        conn: sqlite3.Connection | None = None
        try:
            blocked = not_writable(self._path)
            if blocked is not None:  # SQLite would open it read-only and fail on the first write
                raise read_only_error(self._path, blocked)
            make_private_dirs(self._path.parent)  # a home the runtime creates is 0700
            create_private_file(self._path)  # SQLite gives -wal/-shm the same mode (0600)
            conn = connect(self._path)
            mode = enable_wal(conn)
            if mode.lower() != "wal":
                raise StorageError(ErrorCode.storage_error, f"cannot enable WAL journal mode (got {mode!r})")
            conn.execute("PRAGMA synchronous=NORMAL")
            apply_migrations(conn, migrations)
            for statement in SQLITE_EXTRA_DDL:
                conn.execute(statement)
            conn.execute("PRAGMA wal_autocheckpoint=0")  # checkpoints run on this thread (upkeep)
            self._version = int(conn.execute("PRAGMA data_version").fetchone()[0])
        except BaseException as exc:
            if conn is not None:
                _close_quietly(conn)
            error = open_error(exc, self._path) if isinstance(exc, Exception) else exc
            if error is not exc:
                raise error from exc
            raise
        self._conn = conn

    async def close(self) -> None:
        """Closes the connection on its thread (after anything still running there) and ends the thread."""
        if self._conn is None:
            self._thread.shutdown(wait=False)
            return
        conn, self._conn = self._conn, None
        try:
            await asyncio.get_running_loop().run_in_executor(self._thread, _close_quietly, conn)
        finally:
            self._thread.shutdown(wait=False)

    # ---- transactions (TxnConnection) -----------------------------------------------------------

    def run_inline(self, op: Callable[[Txn], Any]) -> Committed | None:
        """``op`` on the event loop unless another process holds the write lock (then ``None``)."""
        outcome = self._transaction(op, nowait=True)
        if outcome is not None:
            self._commits += 1
        return outcome

    def submit(self, op: Callable[[Txn], Any]) -> concurrent.futures.Future[Committed]:
        return self._thread.submit(self._waiting_transaction, op)

    def submit_upkeep(self) -> concurrent.futures.Future[None] | None:
        if self._commits < CHECKPOINT_EVERY:
            return None
        self._commits = 0
        return self._thread.submit(self._checkpoint)

    def _waiting_transaction(self, op: Callable[[Txn], Any]) -> Committed:
        outcome = self._transaction(op, nowait=False)
        assert outcome is not None
        return outcome

    def _live(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StorageError(ErrorCode.storage_error, "the storage manager is not open")
        return self._conn

    def _transaction(self, op: Callable[[Txn], Any], *, nowait: bool) -> Committed | None:
        """``BEGIN IMMEDIATE`` … ``op`` … ``COMMIT``; ``nowait``: ``None`` (nothing ran) when another
        connection holds the write lock, instead of waiting for it."""
        conn = self._live()
        try:
            if nowait:
                conn.execute("PRAGMA busy_timeout=0")
                try:
                    conn.execute("BEGIN IMMEDIATE")
                finally:
                    conn.execute(self._restore_busy_timeout)
            else:
                conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if nowait and exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY:  # or an extended busy code
                return None
            raise
        try:
            stale, self._failed = self._failed, True  # until this transaction commits
            version = conn.execute("PRAGMA data_version").fetchone()[0]
            if version != self._version:  # another connection committed since our last transaction
                self._version = version
                self.foreign_writes += 1
                stale = True
            txn = Txn(conn, stale=stale)
            if stale:
                txn.after_commit(self._on_stale)
            result = op(txn)
            conn.execute("COMMIT")
        except BaseException:
            try:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            except sqlite3.Error:
                log.exception("ROLLBACK failed")
            raise
        self._failed = False
        return result, txn._after

    def _checkpoint(self) -> None:
        self._live().execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()


def _close_quietly(conn: sqlite3.Connection) -> None:
    try:
        conn.close()
    except Exception:
        log.debug("closing a SQLite connection failed", exc_info=True)

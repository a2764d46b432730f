"""The single SQLite writer queue (storage.md §3).

A FIFO of ``(operation, future)`` pairs. An operation is a *synchronous* callable receiving a
:class:`Txn`; the whole ``BEGIN IMMEDIATE`` … operation … ``COMMIT`` runs as one call — on the event loop
for a file only this process writes, else on the writer connection's aiosqlite thread (one thread hop per
transaction instead of one per statement); see :class:`WriterQueue`. On any exception the transaction is
rolled back, the operation's ``after_commit`` callbacks are discarded and the caller's future receives the
error (:class:`AgentCoreError` unchanged, anything else wrapped as ``StorageError(storage_error)``). After a
successful ``COMMIT`` the callbacks run on the event loop, before the next operation starts: this is
where in-memory counters and caches are advanced.

Operations may run on another thread: they may read manager state but must only *change* it through
``after_commit``. A write that has been enqueued always runs; cancelling the awaiting task does not
cancel it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar, cast

import aiosqlite

from agent_core.errors import AgentCoreError, ErrorCode, StorageError

log = logging.getLogger(__name__)

T = TypeVar("T")


class Txn:
    """The open write transaction handed to a queued operation (used on the connection thread)."""

    __slots__ = ("_after", "conn")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self._after: list[Callable[[], None]] = []

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Runs ``callback`` on the event loop only if (and right after) this transaction commits."""
        self._after.append(callback)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Executes one statement; returns the number of changed rows (DML) or -1."""
        return int(self.conn.execute(sql, params).rowcount)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self.conn.executemany(sql, rows)

    def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return self.conn.execute(sql, params).fetchall()

    def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        row = self.conn.execute(sql, params).fetchone()
        return row[0] if row else None


WriteOp = Callable[[Txn], T]
_Item = tuple[Callable[[Txn], Any], "asyncio.Future[Any]"]


def wrap_storage_error(exc: BaseException, what: str) -> AgentCoreError:
    """``AgentCoreError`` unchanged; anything else becomes ``StorageError(storage_error)``."""
    if isinstance(exc, AgentCoreError):
        return exc
    return StorageError(ErrorCode.storage_error, f"{what} failed: {type(exc).__name__}: {exc}", cause=exc)


async def run_on_connection_thread(conn: aiosqlite.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
    """Runs ``fn(sqlite3_connection)`` on the aiosqlite connection thread in a single hop.

    aiosqlite exposes no public call for this; ``Connection._execute`` and ``Connection._conn`` are the
    primitives every public aiosqlite method is built on (unchanged since aiosqlite 0.17).
    """
    raw: sqlite3.Connection = conn._conn
    execute: Callable[..., Awaitable[Any]] = conn._execute
    return cast(T, await execute(fn, raw))


CHECKPOINT_EVERY = 100
"""Inline commits between two ``PASSIVE`` WAL checkpoints on the connection thread (a turn commits ~9)."""

_LOCKED: Any = object()
"""What an inline ``BEGIN IMMEDIATE`` that found the file locked returns (nothing ran)."""


def _transaction(
    op: Callable[[Txn], T], *, nowait_restore: str | None = None
) -> Callable[[sqlite3.Connection], tuple[T, list[Callable[[], None]]]]:
    """``BEGIN IMMEDIATE`` … ``op`` … ``COMMIT`` (``ROLLBACK`` on any error); its result and callbacks.
    ``nowait_restore`` (a ``PRAGMA busy_timeout=…`` statement): ``BEGIN`` does not wait for a lock held by
    another process — it returns :data:`_LOCKED` (nothing ran) — and the statement then restores the
    connection's busy timeout."""

    def run(conn: sqlite3.Connection) -> tuple[T, list[Callable[[], None]]]:
        txn = Txn(conn)
        try:
            if nowait_restore is None:
                conn.execute("BEGIN IMMEDIATE")
            else:
                conn.execute("PRAGMA busy_timeout=0")
                try:
                    conn.execute("BEGIN IMMEDIATE")
                finally:
                    conn.execute(nowait_restore)
        except sqlite3.OperationalError as exc:
            busy = exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY  # SQLITE_BUSY or an extended code
            if nowait_restore is not None and busy:
                return cast(tuple[T, list[Callable[[], None]]], _LOCKED)
            raise
        try:
            result = op(txn)
            conn.execute("COMMIT")
        except BaseException:
            try:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            except sqlite3.Error:
                log.exception("ROLLBACK failed")
            raise
        return result, txn._after

    return run


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Marks the error as retrieved, so a caller cancelled while waiting causes no loop warning."""
    if not future.cancelled():
        future.exception()


class TxnQueue(ABC):
    """FIFO of write transactions executed one at a time on one connection.

    :meth:`_execute` runs one transaction; each backend provides it (SQLite: :class:`WriterQueue`,
    PostgreSQL: ``storage/postgres``), the FIFO, error wrapping and ``after_commit`` are shared.
    """

    def __init__(self) -> None:
        self._queue: asyncio.Queue[_Item | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="agent_core-sqlite-writer")

    @property
    def closing(self) -> bool:
        return self._closing

    async def submit(self, op: WriteOp[T], *, offload: bool = False) -> T:
        """Enqueues ``op`` and waits for its committed result (or its error). ``offload``: ``op`` may take
        long (a backend that runs transactions on the event loop runs this one on a thread)."""
        # no shield: cancelling the caller cancels only this future; the queued write still runs (and a
        # shield costs an extra future and event-loop iteration per transaction)
        return await self.enqueue(op, offload=offload)

    def enqueue(self, op: WriteOp[T], *, offload: bool = False) -> asyncio.Future[T]:
        """Enqueues ``op`` now (FIFO position fixed) and returns the future of its committed result."""
        if self._closing or self._task is None:
            raise StorageError(ErrorCode.storage_error, "the storage writer is closed")
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        future.add_done_callback(_retrieve)
        self._queue.put_nowait((op, future))
        return future

    async def drain_and_stop(self) -> None:
        """Refuses new writes, finishes every queued one, then stops the writer task."""
        self._closing = True
        if self._task is None:
            return
        self._queue.put_nowait(None)
        try:
            await asyncio.shield(self._task)
        finally:
            self._task = None

    @abstractmethod
    async def _execute(self, op: Callable[[Txn], Any]) -> tuple[Any, list[Callable[[], None]]]:
        """Runs ``op`` as one committed transaction; returns its result and ``after_commit`` callbacks."""

    async def _run(self) -> None:
        while True:
            item = await self._queue.get()
            if item is None:
                return
            op, future = item
            try:
                result, callbacks = await self._execute(op)
            except BaseException as exc:
                _fail(future, exc)
                if isinstance(exc, asyncio.CancelledError):
                    raise
                continue
            _settle(future, result, callbacks)


class WriterQueue(TxnQueue):
    """The SQLite writer: FIFO transactions on one connection, run inline on the event loop or handed to
    the aiosqlite connection thread.

    ``inline=True`` (a file no other process writes): a transaction runs on the event loop, in the loop
    callback after the one that enqueued it; queued ones run back to back. In WAL mode with
    ``synchronous=NORMAL`` a commit writes WAL frames without an fsync, so a turn's transactions cost less
    there than the thread hand-offs they replace (GIL and self-pipe wake-ups; issue 16). What may wait stays
    off the loop, on the connection thread: a transaction that finds the file locked by another process
    (its inline ``BEGIN`` does not wait; retried there with the connection's busy timeout), the WAL
    checkpoint (the caller turns ``wal_autocheckpoint`` off; a ``PASSIVE`` checkpoint runs there every
    :data:`CHECKPOINT_EVERY` inline commits), and writes enqueued with ``offload=True`` (deleting a session).

    ``inline=False`` (other processes write the file, so any ``BEGIN IMMEDIATE`` may wait): every
    transaction is handed to the connection thread when it reaches the head of the queue, and the thread's
    completion callback (on the event loop) settles it and hands over the next one.

    Either way: FIFO order, ``after_commit`` callbacks before the next operation, and "an enqueued write
    always runs" (cancelling the awaiting task cancels only its wait). ``busy_timeout_ms`` is the
    connection's busy timeout (storage.md §2), restored after each inline ``BEGIN``.
    """

    def __init__(self, conn: aiosqlite.Connection, *, inline: bool = False, busy_timeout_ms: int = 0) -> None:
        super().__init__()
        self._conn = conn
        self._inline = inline
        self._restore_busy_timeout = f"PRAGMA busy_timeout={int(busy_timeout_ms)}"
        self._items: deque[tuple[Callable[[Txn], Any], asyncio.Future[Any], bool]] = deque()
        self._busy = False
        self._started = False
        self._commits = 0
        self._idle: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._started = True

    def enqueue(self, op: WriteOp[T], *, offload: bool = False) -> asyncio.Future[T]:
        """Enqueues ``op`` now; the future of its committed result. Inline, the queue starts in the next
        loop callback; otherwise an idle queue hands ``op`` to the connection thread at once."""
        if self._closing or not self._started or self._loop is None:
            raise StorageError(ErrorCode.storage_error, "the storage writer is closed")
        future: asyncio.Future[T] = self._loop.create_future()
        future.add_done_callback(_retrieve)
        self._items.append((op, future, offload))
        if not self._busy:
            self._busy = True
            if self._inline:
                self._loop.call_soon(self._next)
            else:
                self._next()
        return future

    async def drain_and_stop(self) -> None:
        """Refuses new writes, finishes every queued one."""
        self._closing = True
        if not self._started:
            return
        if self._busy and self._loop is not None:
            if self._idle is None:
                self._idle = self._loop.create_future()
            await asyncio.shield(self._idle)
        self._started = False

    async def _execute(self, op: Callable[[Txn], Any]) -> tuple[Any, list[Callable[[], None]]]:
        return await run_on_connection_thread(self._conn, _transaction(op))

    def _next(self) -> None:
        """Runs the queue (on the event loop) until it is empty or a transaction went to the thread."""
        while self._items:
            op, future, offload = self._items.popleft()
            if self._inline and not offload:
                try:
                    raw: sqlite3.Connection = self._conn._conn
                    outcome = _transaction(op, nowait_restore=self._restore_busy_timeout)(raw)
                except BaseException as exc:
                    _fail(future, exc)
                    if not isinstance(exc, Exception):  # an interrupt leaves the loop: the queue resumes
                        assert self._loop is not None  # after it (if the loop runs again)
                        self._loop.call_soon(self._next)
                        raise
                    continue
                if outcome is not _LOCKED:
                    _settle(future, *outcome)
                    self._commits += 1
                    if self._commits >= CHECKPOINT_EVERY:
                        self._commits = 0
                        if self._to_thread(_checkpoint, None):
                            return
                    continue
            # on the thread a transaction may wait for another process's lock (the busy timeout)
            if self._to_thread(_transaction(op), future):
                return
        self._busy = False
        if self._idle is not None and not self._idle.done():
            self._idle.set_result(None)

    def _to_thread(self, fn: Callable[[sqlite3.Connection], Any], future: asyncio.Future[Any] | None) -> bool:
        """Hands ``fn`` to the connection thread; ``False`` (and ``future`` failed) if the connection is
        closed. Its completion settles ``future`` (``None``: a checkpoint) and runs the queue on."""
        loop = self._loop
        assert loop is not None
        try:
            raw: sqlite3.Connection = self._conn._conn
            tx: Any = self._conn._tx
        except Exception as exc:  # the connection is closed
            if future is not None:
                _fail(future, exc)
            return False

        def work() -> None:
            try:
                outcome: tuple[Any, BaseException | None] = (fn(raw), None)
            except BaseException as exc:
                outcome = (None, exc)
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                loop.call_soon_threadsafe(self._done, future, outcome)

        # aiosqlite's worker resolves its own future too; a fresh one nobody awaits
        tx.put_nowait((loop.create_future(), work))
        return True

    def _done(self, future: asyncio.Future[Any] | None, outcome: tuple[Any, BaseException | None]) -> None:
        value, error = outcome
        if future is None:
            if error is not None:
                log.warning("WAL checkpoint failed: %s", error)
        elif error is not None:
            _fail(future, error)
        else:
            _settle(future, *value)
        self._next()


def _checkpoint(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()


def _settle(future: asyncio.Future[Any], result: Any, callbacks: Sequence[Callable[[], None]]) -> None:
    """A committed transaction: its ``after_commit`` callbacks run (a failing one is logged, never breaks
    the writer), then the caller's future resolves (unless it was cancelled)."""
    for callback in callbacks:
        try:
            callback()
        except Exception:  # a cache callback must never break the writer
            log.exception("after_commit callback failed")
    if not future.done():
        future.set_result(result)


def _fail(future: asyncio.Future[Any], exc: BaseException) -> None:
    """A failed transaction: the caller's future fails with the wrapped storage error."""
    if not future.done():
        future.set_exception(wrap_storage_error(exc, "write transaction"))

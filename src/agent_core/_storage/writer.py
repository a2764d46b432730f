"""The single writer of a session store: a FIFO of write transactions run one at a time on one connection.

An operation is a *synchronous* callable receiving a :class:`Txn`; the connection runs it as one whole
transaction (``BEGIN`` … operation … ``COMMIT``) in one call, so a transaction costs at most one thread hop.
On any exception the transaction is rolled back, the operation's ``after_commit`` callbacks are discarded
and the caller's future receives the error (:class:`AgentCoreError` unchanged, anything else wrapped as
``StorageError(storage_error)``). After a successful ``COMMIT`` the callbacks run on the event loop, before
the next operation starts: this is where in-memory counters and caches are advanced.

:class:`TxnQueue` is the writer of both backends; what differs is the :class:`TxnConnection` it runs
transactions on (SQLite: :class:`agent_core._storage.sqlite_connection.SqliteWriterConnection`, PostgreSQL:
``PgConnection.transactions()``). A connection may run a transaction *inline*, on the event loop, when it
cannot wait there (SQLite: a file whose write lock is free; a commit writes WAL frames without an fsync);
everything else goes to the connection's own thread.

Operations may run on another thread: they may read store state but must only *change* it through
``after_commit`` (or under the rule their store documents). A write that has been enqueued always runs;
cancelling the awaiting task does not cancel it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

from agent_core.errors import AgentCoreError, ErrorCode, StorageError

log = logging.getLogger(__name__)

T = TypeVar("T")


class Txn:
    """The open write transaction handed to a queued operation (used on the connection's thread or on
    the event loop, never on both at once). ``conn`` is a DB-API connection (``sqlite3`` here; the
    PostgreSQL backend overrides the four statement methods).

    ``stale``: what the store caches about the database (counters, known sessions) may be out of date —
    another process wrote since, or the last write failed — so this transaction reads it again."""

    __slots__ = ("_after", "conn", "stale")

    def __init__(self, conn: Any, *, stale: bool = False) -> None:
        self.conn = conn
        self.stale = stale
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
        return list(self.conn.execute(sql, params).fetchall())

    def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        row = self.conn.execute(sql, params).fetchone()
        return row[0] if row else None


WriteOp = Callable[[Txn], T]
Committed = tuple[Any, list[Callable[[], None]]]
"""A committed transaction: the operation's result and its ``after_commit`` callbacks."""


class TxnConnection(Protocol):
    """Where a :class:`TxnQueue` runs its transactions: one connection and a thread of its own."""

    def run_inline(self, op: Callable[[Txn], Any]) -> Committed | None:
        """``op`` as one transaction on the calling thread (the event loop) if it runs there without
        waiting, else ``None`` (nothing ran: it goes to :meth:`submit`). Raises what the transaction
        raised (rolled back)."""
        ...

    def submit(self, op: Callable[[Txn], Any]) -> concurrent.futures.Future[Committed]:
        """``op`` as one transaction on the connection's thread, where it may wait (locks, reconnects)."""
        ...

    def submit_upkeep(self) -> concurrent.futures.Future[None] | None:
        """After an inline commit: upkeep that is due now (e.g. a WAL checkpoint) started on the
        connection's thread, or ``None``. The queue runs nothing else until it has finished."""
        ...


def wrap_storage_error(exc: BaseException, what: str) -> AgentCoreError:
    """``AgentCoreError`` unchanged; anything else becomes ``StorageError(storage_error)``."""
    if isinstance(exc, AgentCoreError):
        return exc
    return StorageError(ErrorCode.storage_error, f"{what} failed: {type(exc).__name__}: {exc}", cause=exc)


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Marks the error as retrieved, so a caller cancelled while waiting causes no loop warning."""
    if not future.cancelled():
        future.exception()


_Item = tuple[Callable[[Txn], Any], "asyncio.Future[Any]", bool]


class TxnQueue:
    """FIFO of write transactions executed one at a time on one :class:`TxnConnection`.

    A transaction runs inline when the connection allows it (in the loop callback after the one that
    enqueued it; queued ones then run back to back), else — and always with ``offload=True`` — on the
    connection's thread, whose completion callback (on the event loop) settles it and runs the queue on.
    Either way: FIFO order, ``after_commit`` callbacks before the next operation, and "an enqueued write
    always runs" (cancelling the awaiting task cancels only its wait).
    """

    def __init__(self, connection: TxnConnection) -> None:
        self._connection = connection
        self._items: deque[_Item] = deque()
        self._busy = False
        self._started = False
        self._closing = False
        self._idle: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._started = True

    @property
    def closing(self) -> bool:
        return self._closing

    async def submit(self, op: WriteOp[T], *, offload: bool = False) -> T:
        """Enqueues ``op`` and waits for its committed result (or its error). ``offload``: ``op`` may take
        long, so it never runs on the event loop."""
        # no shield: cancelling the caller cancels only this future; the queued write still runs
        return await self.enqueue(op, offload=offload)

    def enqueue(self, op: WriteOp[T], *, offload: bool = False) -> asyncio.Future[T]:
        """Enqueues ``op`` now (its FIFO position fixed) and returns the future of its committed result.
        An idle queue starts in the next loop callback."""
        if self._closing or not self._started or self._loop is None:
            raise StorageError(ErrorCode.storage_error, "the storage writer is closed")
        future: asyncio.Future[T] = self._loop.create_future()
        future.add_done_callback(_retrieve)
        self._items.append((op, future, offload))
        if not self._busy:
            self._busy = True
            self._loop.call_soon(self._next)
        return future

    async def drain_and_stop(self) -> None:
        """Refuses new writes, finishes every queued one."""
        self._closing = True
        if not self._started:
            return
        if self._busy and self._loop is not None:
            if self._idle is None:
                self._idle = self._loop.create_future()
            await asyncio.wait({self._idle})  # a cancelled caller leaves the shared future to the queue
        self._started = False

    def _next(self) -> None:
        """Runs the queue (on the event loop) until it is empty or a transaction went to the thread."""
        connection = self._connection
        while self._items:
            op, future, offload = self._items.popleft()
            if not offload:
                try:
                    outcome = connection.run_inline(op)
                except BaseException as exc:
                    _fail(future, exc)
                    if not isinstance(exc, Exception):  # an interrupt leaves the loop: the queue resumes
                        assert self._loop is not None  # after it (if the loop runs again)
                        self._loop.call_soon(self._next)
                        raise
                    continue
                if outcome is not None:
                    _settle(future, *outcome)
                    upkeep = connection.submit_upkeep()
                    if upkeep is not None:
                        self._when_done(upkeep, None)
                        return
                    continue
            try:
                started = connection.submit(op)
            except Exception as exc:  # the connection is closed
                _fail(future, exc)
                continue
            self._when_done(started, future)
            return
        self._busy = False
        if self._idle is not None and not self._idle.done():
            self._idle.set_result(None)

    def _when_done(self, work: concurrent.futures.Future[Any], future: asyncio.Future[Any] | None) -> None:
        """When ``work`` (on the connection's thread) is done: settles ``future`` (``None``: upkeep) and
        runs the queue on, on the event loop."""
        loop = self._loop
        assert loop is not None

        def done(finished: concurrent.futures.Future[Any]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                loop.call_soon_threadsafe(self._done, future, finished)

        work.add_done_callback(done)

    def _done(self, future: asyncio.Future[Any] | None, finished: concurrent.futures.Future[Any]) -> None:
        error = (
            finished.exception()
            if not finished.cancelled()
            else StorageError(ErrorCode.storage_error, "the storage writer was stopped")
        )
        if future is None:
            if error is not None:
                log.warning("storage upkeep failed: %s", error)
        elif error is not None:
            _fail(future, error)
        else:
            _settle(future, *finished.result())
        self._next()


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

"""A psycopg connection bound to its own thread, reconnecting after a lost connection, and the
:class:`Txn` that runs portable SQL on it.

The storage layer's SQL is written once, with ``?`` placeholders (SQLite's paramstyle); :func:`pg_sql`
turns it into psycopg's (``%s``, a literal ``%`` doubled) and caches the result. Each connection runs in
autocommit mode on one dedicated thread: a write transaction is one hop onto that thread
(``BEGIN`` … operation … ``COMMIT``, like the SQLite writer), a read one statement.

Lost connections (a server restart, a dropped network): the next call reconnects, retrying for at most
``[storage.postgres] reconnect_timeout_ms`` with growing delays, each failed attempt logged; past that it
raises ``storage_error`` naming the DSN variable. A read is then run again. A write transaction is run
again as a whole only when it did not commit: its id (``pg_current_xact_id``, read with ``BEGIN`` in one
round trip) is looked up after reconnecting when the connection broke during ``COMMIT``; a transaction
whose outcome cannot be known fails with ``storage_error`` (it is never half applied: PostgreSQL commits
a transaction whole or not at all).

The DSN never leaves this module's error texts: errors name the environment variable, not its value.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg

from agent_core._storage.writer import Committed, Txn
from agent_core.errors import ErrorCode, StorageError

log = logging.getLogger(__name__)

T = TypeVar("T")
DSN_CONFIG_KEY = "storage.postgres.dsn_env"
RECONNECT_CONFIG_KEY = "storage.postgres.reconnect_timeout_ms"
DEFAULT_RECONNECT_TIMEOUT_MS = 15_000
_SQL_CACHE: dict[str, str] = {}


def pg_sql(sql: str) -> str:
    """``?`` placeholders → ``%s`` (a literal ``%`` → ``%%``); cached per statement text."""
    out = _SQL_CACHE.get(sql)
    if out is None:
        out = sql.replace("%", "%%").replace("?", "%s")
        if len(_SQL_CACHE) < 8192:
            _SQL_CACHE[sql] = out
    return out


class PgTxn(Txn):
    """An open write transaction on a PostgreSQL connection (used on the connection's thread)."""

    __slots__ = ("_cur",)

    def __init__(self, cur: psycopg.Cursor[Any]) -> None:
        self._after = []
        self.stale = True  # other processes write the database at any time: nothing cached is trusted
        self._cur = cur

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        self._cur.execute(pg_sql(sql), tuple(params))
        return int(self._cur.rowcount)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self._cur.executemany(pg_sql(sql), [tuple(r) for r in rows])

    def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        self._cur.execute(pg_sql(sql), tuple(params))
        return self._cur.fetchall()

    def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        self._cur.execute(pg_sql(sql), tuple(params))
        row = self._cur.fetchone()
        return row[0] if row else None


def is_connection_lost(conn: psycopg.Connection[Any] | None, exc: BaseException) -> bool:
    """Whether ``exc`` means ``conn`` is gone (server restart, network loss), not a failed statement."""
    if not isinstance(exc, psycopg.OperationalError):
        return False
    return conn is None or conn.closed or conn.broken


@dataclass(frozen=True, slots=True)
class ReconnectPolicy:
    """How long a lost connection is retried (``[storage.postgres] reconnect_timeout_ms``), and how."""

    timeout_s: float = DEFAULT_RECONNECT_TIMEOUT_MS / 1000
    first_delay_s: float = 0.05
    max_delay_s: float = 1.0
    transaction_attempts: int = 3
    """Runs in all of a transaction interrupted by lost connections (each known not to have committed)."""


class TxnInterrupted(Exception):
    """The connection broke inside a transaction (raised on the connection thread). ``committing``:
    ``COMMIT`` was sent, so the transaction may have committed (look ``xid`` up); ``result`` and
    ``after`` are then the operation's result and after-commit callbacks."""

    def __init__(
        self, xid: str | None, committing: bool, result: Any, after: list[Callable[[], None]]
    ) -> None:
        super().__init__(f"connection lost in transaction {xid}")
        self.xid = xid
        self.committing = committing
        self.result = result
        self.after = after


def transaction(
    op: Callable[[Txn], T],
) -> Callable[[psycopg.Connection[Any]], tuple[T, list[Callable[[], None]]]]:
    """``BEGIN`` … ``op`` … ``COMMIT`` on the connection thread; rolled back when ``op`` raises; a lost
    connection is raised as :class:`TxnInterrupted`."""

    def run(conn: psycopg.Connection[Any]) -> tuple[T, list[Callable[[], None]]]:
        xid: str | None = None
        committing = False
        txn: PgTxn | None = None
        result: T | None = None
        try:
            with conn.cursor() as cur:
                cur.execute("BEGIN; SELECT pg_current_xact_id()::text")  # one round trip
                cur.nextset()
                row = cur.fetchone()
                xid = str(row[0]) if row else None
                txn = PgTxn(cur)
                try:
                    result = op(txn)
                    committing = True
                    cur.execute("COMMIT")
                except BaseException as exc:
                    if not committing and not is_connection_lost(conn, exc):
                        try:
                            cur.execute("ROLLBACK")
                        except psycopg.Error:
                            log.exception("ROLLBACK failed")
                    raise
                return result, txn._after
        except psycopg.OperationalError as exc:
            if not is_connection_lost(conn, exc):
                raise
            after = txn._after if (committing and txn is not None) else []
            raise TxnInterrupted(xid, committing, result, after) from exc

    return run


class PgConnection:
    """One autocommit psycopg connection and the single thread every call on it runs on.

    ``on_connect`` runs on every new connection (the first and each reconnect) before it is used, e.g.
    to take the store's owner lock again.
    """

    def __init__(
        self,
        dsn: str,
        *,
        dsn_env: str,
        name: str,
        policy: ReconnectPolicy | None = None,
        on_connect: Callable[[psycopg.Connection[Any]], None] | None = None,
    ) -> None:
        self._dsn = dsn
        self._dsn_env = dsn_env
        self._name = name
        self._policy = policy or ReconnectPolicy()
        self._on_connect = on_connect
        self._conn: psycopg.Connection[Any] | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._thread_ident: int | None = None
        self._connected_once = False
        self.reconnects = 0
        """How many times this connection was re-established after a loss."""

    def _on_thread(self, fn: Callable[[], T]) -> Callable[[], T]:
        def call() -> T:
            self._thread_ident = threading.get_ident()
            return fn()

        return call

    async def _call(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._on_thread(fn))

    # ---- connection thread (``live``, ``idempotent`` and ``drop_lost`` run only there) --------

    def _open_first(self) -> None:
        try:
            conn = psycopg.connect(self._dsn, autocommit=True)
        except psycopg.Error as exc:
            raise self._connect_error(exc) from None
        try:
            if self._on_connect is not None:
                self._on_connect(conn)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        self._connected_once = True

    def live(self) -> psycopg.Connection[Any]:
        """The open connection; reconnects (bounded, logged) when it was lost."""
        conn = self._conn
        if conn is not None and not conn.closed:
            return conn
        if not self._connected_once:  # never connected: no retries, the first error is the answer
            self._open_first()
            assert self._conn is not None
            return self._conn
        self._conn = None
        deadline = time.monotonic() + self._policy.timeout_s
        delay = self._policy.first_delay_s
        attempt = 0
        while True:
            attempt += 1
            try:
                conn = psycopg.connect(self._dsn, autocommit=True)
                try:
                    if self._on_connect is not None:
                        self._on_connect(conn)
                except BaseException:
                    conn.close()
                    raise
            except psycopg.Error as exc:
                message = scrub(str(exc), self._dsn).strip()
                log.warning(
                    "PostgreSQL connection %s (DSN from $%s) lost: reconnect attempt %d failed: %s",
                    self._name,
                    self._dsn_env,
                    attempt,
                    message,
                )
                if time.monotonic() + delay > deadline:
                    raise StorageError(
                        ErrorCode.storage_error,
                        f"lost the connection to PostgreSQL (DSN from ${self._dsn_env}) and could not "
                        f"reconnect within {self._policy.timeout_s:g} s ({attempt} attempts): {message}",
                        details={
                            "config_key": RECONNECT_CONFIG_KEY,
                            "dsn_config_key": DSN_CONFIG_KEY,
                            "env": self._dsn_env,
                            "attempts": attempt,
                            "reconnect_timeout_ms": int(self._policy.timeout_s * 1000),
                        },
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, self._policy.max_delay_s)
                continue
            self._conn = conn
            self.reconnects += 1
            log.warning(
                "PostgreSQL connection %s (DSN from $%s) re-established after %d attempt(s)",
                self._name,
                self._dsn_env,
                attempt,
            )
            return conn

    def _connect_error(self, exc: psycopg.Error) -> StorageError:
        if isinstance(exc, psycopg.ProgrammingError):  # an unparsable DSN: its text would echo it
            return StorageError(
                ErrorCode.storage_error,
                f"the PostgreSQL DSN in ${self._dsn_env} is invalid",
                details={"config_key": DSN_CONFIG_KEY, "env": self._dsn_env},
            )
        return StorageError(
            ErrorCode.storage_error,
            f"cannot connect to PostgreSQL (DSN from ${self._dsn_env}): {scrub(str(exc), self._dsn)}",
            details={"config_key": DSN_CONFIG_KEY, "env": self._dsn_env},
        )

    def drop_lost(self, what: str, exc: BaseException) -> None:
        log.warning(
            "PostgreSQL connection %s (DSN from $%s) lost during %s: %s",
            self._name,
            self._dsn_env,
            what,
            scrub(str(exc), self._dsn).strip(),
        )
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:
                log.debug("closing a lost PostgreSQL connection failed", exc_info=True)
        self._conn = None

    def transaction_blocking(self, op: Callable[[Txn], T]) -> tuple[T, list[Callable[[], None]]]:
        """``op`` as one committed transaction, on the connection thread (see the module docstring for
        lost connections)."""
        run = transaction(op)
        attempts = 0
        while True:
            attempts += 1
            conn = self.live()
            try:
                return run(conn)
            except TxnInterrupted as interrupted:
                self.drop_lost("a write transaction", interrupted.__cause__ or interrupted)
                if interrupted.committing:
                    status = self._xact_status(interrupted.xid)
                    if status == "committed":
                        result: T = interrupted.result
                        return result, interrupted.after
                    if status != "aborted":
                        raise StorageError(
                            ErrorCode.storage_error,
                            "the connection to PostgreSQL (DSN from "
                            f"${self._dsn_env}) broke while a write transaction committed and its outcome "
                            f"cannot be known (transaction status: {status or 'unknown'})",
                            details={"env": self._dsn_env, "config_key": RECONNECT_CONFIG_KEY},
                        ) from interrupted
                if attempts >= self._policy.transaction_attempts:
                    raise StorageError(
                        ErrorCode.storage_error,
                        f"a write transaction lost its PostgreSQL connection (DSN from ${self._dsn_env}) "
                        f"{attempts} times; nothing of it was stored",
                        details={"env": self._dsn_env, "attempts": attempts},
                    ) from interrupted
                log.warning("running the interrupted write transaction again (it did not commit)")

    def _xact_status(self, xid: str | None) -> str | None:
        """``committed`` / ``aborted`` / ``in progress`` of a transaction, after reconnecting."""
        if xid is None:
            return "aborted"  # the connection broke before the transaction began
        deadline = time.monotonic() + self._policy.timeout_s
        while True:
            conn = self.live()
            try:
                row = conn.execute("SELECT pg_xact_status(%s::xid8)", (xid,)).fetchone()
            except psycopg.OperationalError as exc:
                if not is_connection_lost(conn, exc):
                    raise
                self.drop_lost("a transaction status lookup", exc)
                continue
            status = None if row is None or row[0] is None else str(row[0])
            # "in progress": the old server process has not noticed the loss yet (it aborts then)
            if status != "in progress" or time.monotonic() > deadline:
                return status
            time.sleep(self._policy.first_delay_s)

    def idempotent(self, what: str, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        attempts = 0
        while True:
            attempts += 1
            conn = self.live()
            try:
                return fn(conn)
            except psycopg.OperationalError as exc:
                if not is_connection_lost(conn, exc) or attempts >= self._policy.transaction_attempts:
                    raise
                self.drop_lost(what, exc)

    # ---- event loop ----------------------------------------------------------------------------

    def call_blocking(self, fn: Callable[[], T]) -> T:
        """``fn()`` on the connection thread, waiting for it on the calling thread (synchronous APIs);
        called on the connection thread itself, runs ``fn`` right there."""
        if threading.get_ident() == self._thread_ident:
            return fn()
        return self._executor.submit(self._on_thread(fn)).result()

    def submit(self, fn: Callable[[], T]) -> concurrent.futures.Future[T]:
        """Starts ``fn()`` on the connection thread; its future."""
        return self._executor.submit(self._on_thread(fn))

    async def call(self, fn: Callable[[], T]) -> T:
        """``fn()`` on the connection thread, awaited without blocking the event loop."""
        return await self._call(fn)

    def open_blocking(self) -> None:
        """:meth:`open` for synchronous callers."""
        try:
            self.call_blocking(self._open_first)
        except BaseException:
            self._executor.shutdown(wait=False)
            raise

    async def open(self) -> None:
        """Connects (no retries: a server that is not there at open fails at once)."""
        try:
            await self._call(self._open_first)
        except BaseException:
            self._executor.shutdown(wait=False)
            raise

    async def run(self, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        """``fn(connection)`` once on the connection thread (reconnecting first if the connection was
        lost); a loss during ``fn`` is raised."""

        def call() -> T:
            conn = self.live()
            try:
                return fn(conn)
            except psycopg.OperationalError as exc:
                if is_connection_lost(conn, exc):
                    self.drop_lost("a call", exc)
                raise

        return await self._call(call)

    async def run_idempotent(self, what: str, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        """``fn(connection)``, run again after reconnecting when the connection was lost (reads)."""
        return await self._call(lambda: self.idempotent(what, fn))

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        statement, values = pg_sql(sql), tuple(params)

        def read(conn: psycopg.Connection[Any]) -> list[Any]:
            return conn.execute(statement, values).fetchall()

        return await self.run_idempotent("a read", read)

    @property
    def lost(self) -> bool:
        """The connection is gone (closed, broken or never re-established)."""
        return self._conn is None or self._conn.closed

    def cancel_request(self) -> None:
        """Asks the server to cancel the statement running on this connection (from any thread)."""
        conn = self._conn
        if conn is not None:
            conn.cancel_safe()

    def _close_conn(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def close(self) -> None:
        try:
            await self._call(self._close_conn)
        except Exception:
            log.debug("closing a PostgreSQL connection failed", exc_info=True)
        finally:
            self._executor.shutdown(wait=False)

    def close_blocking(self) -> None:
        """:meth:`close` for synchronous callers."""
        try:
            self.call_blocking(self._close_conn)
        except Exception:
            log.debug("closing a PostgreSQL connection failed", exc_info=True)
        finally:
            self._executor.shutdown(wait=False)


async def connect(
    dsn: str,
    *,
    dsn_env: str,
    name: str,
    policy: ReconnectPolicy | None = None,
    on_connect: Callable[[psycopg.Connection[Any]], None] | None = None,
) -> PgConnection:
    """Opens an autocommit connection on a new thread; failures never show the DSN."""
    conn = PgConnection(dsn, dsn_env=dsn_env, name=name, policy=policy, on_connect=on_connect)
    await conn.open()
    return conn


def scrub(message: str, dsn: str) -> str:
    """``message`` without the DSN or its password (driver messages may quote connection details)."""
    secrets = [dsn]
    try:
        password = psycopg.conninfo.conninfo_to_dict(dsn).get("password")
    except psycopg.Error:
        password = None
    if isinstance(password, str) and password:
        secrets.append(password)
    for secret in secrets:
        message = message.replace(secret, "***")
    return message


def dsn_from_env(environ: dict[str, str] | Any, dsn_env: str) -> str:
    """The DSN ``dsn_env`` holds; ``storage_error`` naming the config key when it is unset or empty."""
    dsn = environ.get(dsn_env)
    if not dsn:
        raise StorageError(
            ErrorCode.storage_error,
            f'storage.backend = "postgres" but the environment variable {dsn_env} ({DSN_CONFIG_KEY}) is not set',
            details={"config_key": DSN_CONFIG_KEY, "env": dsn_env},
        )
    return str(dsn)


class PgTransactions:
    """A :class:`PgConnection` as the writer queue's connection (``TxnConnection``): every transaction
    runs on the connection's thread (a network round trip never runs on the event loop)."""

    def __init__(self, conn: PgConnection) -> None:
        self._conn = conn

    def run_inline(self, op: Callable[[Txn], Any]) -> Committed | None:
        return None

    def submit(self, op: Callable[[Txn], Any]) -> concurrent.futures.Future[Committed]:
        conn = self._conn
        return conn.submit(lambda: conn.transaction_blocking(op))

    def submit_upkeep(self) -> concurrent.futures.Future[None] | None:
        return None

"""A psycopg connection bound to its own thread, and the :class:`Txn` that runs portable SQL on it.

The storage layer's SQL is written once, with ``?`` placeholders (SQLite's paramstyle); :func:`pg_sql`
turns it into psycopg's (``%s``, a literal ``%`` doubled) and caches the result. Each connection runs in
autocommit mode on one dedicated thread: a write transaction is one hop onto that thread
(``BEGIN`` … operation … ``COMMIT``, like the SQLite writer), a read one statement.

The DSN never leaves :func:`connect`: errors name the environment variable, not its value.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import psycopg

from agent_core._storage.writer import Txn, TxnQueue
from agent_core.errors import AgentCoreError, ErrorCode, StorageError

log = logging.getLogger(__name__)

T = TypeVar("T")
DSN_CONFIG_KEY = "storage.postgres.dsn_env"
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


def transaction(
    op: Callable[[Txn], T],
) -> Callable[[psycopg.Connection[Any]], tuple[T, list[Callable[[], None]]]]:
    """``BEGIN`` … ``op`` … ``COMMIT`` on the connection thread; rolled back when ``op`` raises."""

    def run(conn: psycopg.Connection[Any]) -> tuple[T, list[Callable[[], None]]]:
        with conn.cursor() as cur:
            cur.execute("BEGIN")
            txn = PgTxn(cur)
            try:
                result = op(txn)
                cur.execute("COMMIT")
            except BaseException:
                try:
                    cur.execute("ROLLBACK")
                except psycopg.Error:
                    log.exception("ROLLBACK failed")
                raise
            return result, txn._after

    return run


class PgConnection:
    """One autocommit psycopg connection and the single thread every call on it runs on."""

    def __init__(self, conn: psycopg.Connection[Any], executor: ThreadPoolExecutor) -> None:
        self._conn = conn
        self._executor = executor

    async def run(self, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, self._conn)

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        statement, values = pg_sql(sql), tuple(params)

        def read(conn: psycopg.Connection[Any]) -> list[Any]:
            return conn.execute(statement, values).fetchall()

        return await self.run(read)

    def cancel_request(self) -> None:
        """Asks the server to cancel the statement running on this connection (from any thread)."""
        self._conn.cancel_safe()

    async def close(self) -> None:
        try:
            await self.run(lambda conn: conn.close())
        except Exception:
            log.debug("closing a PostgreSQL connection failed", exc_info=True)
        finally:
            self._executor.shutdown(wait=False)


async def connect(dsn: str, *, dsn_env: str, name: str) -> PgConnection:
    """Opens an autocommit connection on a new thread; failures never show the DSN."""
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)

    def open_conn() -> psycopg.Connection[Any]:
        return psycopg.connect(dsn, autocommit=True)

    try:
        conn = await asyncio.get_running_loop().run_in_executor(executor, open_conn)
    except BaseException as exc:
        executor.shutdown(wait=False)
        if isinstance(exc, psycopg.ProgrammingError):  # an unparsable DSN: its text would echo it
            raise StorageError(
                ErrorCode.storage_error,
                f"the PostgreSQL DSN in ${dsn_env} is invalid",
                details={"config_key": DSN_CONFIG_KEY, "env": dsn_env},
            ) from None
        if isinstance(exc, psycopg.Error):
            raise StorageError(
                ErrorCode.storage_error,
                f"cannot connect to PostgreSQL (DSN from ${dsn_env}): {scrub(str(exc), dsn)}",
                details={"config_key": DSN_CONFIG_KEY, "env": dsn_env},
            ) from None
        raise
    return PgConnection(conn, executor)


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
        raise AgentCoreError(
            ErrorCode.storage_error,
            f'storage.backend = "postgres" but the environment variable {dsn_env} ({DSN_CONFIG_KEY}) is not set',
            details={"config_key": DSN_CONFIG_KEY, "env": dsn_env},
        )
    return str(dsn)


class PgWriterQueue(TxnQueue):
    """The FIFO writer of one process on its PostgreSQL writer connection."""

    def __init__(self, conn: PgConnection) -> None:
        super().__init__()
        self._conn = conn

    async def _execute(self, op: Callable[[Txn], Any]) -> tuple[Any, list[Callable[[], None]]]:
        return await self._conn.run(transaction(op))

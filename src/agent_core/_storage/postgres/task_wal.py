"""The Task WAL as a PostgreSQL table (docs/storage.md#backends): the same records as the JSONL files
(docs/task-board.md#wal-records).

One row per record, keyed by ``(wal_path, wal_seq)``; ``line`` is exactly the JSONL line without its
newline, so :meth:`PgTaskWal.export_jsonl` reproduces the file form byte for byte. ``wal_path`` keeps the
name a file would have (``<wal_dir>/<session_id>/<name>.wal.jsonl``), so events and views are unchanged.

Appends are conditional: a commit whose first ``wal_seq`` is not the stored maximum + 1 — another
process appended first — is refused (:class:`WalConflictError`) and the primary key refuses two commits
racing for the same ``wal_seq``. A step is therefore claimed exactly once cluster-wide; the refused
process catches up (:meth:`records_after`) under its Task lock before deciding again. While the store
holds the WAL's session lease, a commit also checks the lease's fencing token in its transaction
(``lease.py``): once another process took the session over, nothing is written (``session_active``).

A commit is one transaction on the table's own connection and thread (:class:`PgConnection`, which
reconnects after a lost connection). The synchronous :class:`WalWriter` methods wait for that thread;
the Task store awaits them through :meth:`PgTaskWal.offload`, so the event loop is free meanwhile. A
commit whose answer was lost with the connection is looked up after reconnecting (are exactly its
records stored?) before it is tried again, so it is never stored twice.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import psycopg

from agent_core._storage.postgres.connection import (
    PgConnection,
    ReconnectPolicy,
    dsn_from_env,
    is_connection_lost,
    pg_sql,
)
from agent_core._storage.postgres.lease import HeldLeases
from agent_core._tasks.models import TaskWalEvent, wal_event_adapter
from agent_core._tasks.wal import (
    ReplayOutcome,
    WalAppendError,
    WalReplayError,
    WalTail,
    WalWriter,
    replay_bytes,
)
from agent_core.errors import (
    AgentCoreError,
    ErrorCode,
    FileOperationError,
    SessionBusyError,
    StorageError,
)

T = TypeVar("T")

TASK_WAL_DDL = (
    """CREATE TABLE IF NOT EXISTS task_wal (
  wal_path   TEXT NOT NULL,
  wal_dir    TEXT NOT NULL,
  wal_seq    BIGINT NOT NULL,
  task_id    TEXT NOT NULL,
  event_type TEXT NOT NULL,
  created_at TEXT NOT NULL,
  written_ns BIGINT NOT NULL,
  line       TEXT NOT NULL,
  PRIMARY KEY (wal_path, wal_seq)
)""",
    "CREATE INDEX IF NOT EXISTS task_wal_dir ON task_wal(wal_dir, wal_path)",
)
DDL_LOCK = 0x50A6_0002


def _create_table(conn: psycopg.Connection[Any]) -> None:
    """On every new connection: the ``task_wal`` table exists (idempotent, serialised across processes)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (DDL_LOCK,))
        for statement in TASK_WAL_DDL:
            conn.execute(statement)


class WalMediumError(OSError):
    """The WAL table could not be read (callers treat it like an unreadable file)."""


class WalConflictError(WalAppendError):
    """Another process appended to the WAL first; nothing was written (catch up, then decide again)."""

    def __init__(self, path: Path, expected: int, found: int) -> None:
        super().__init__(
            f"{path.name}: another process appended first (expected wal_seq {expected}, stored up to {found})",
            unavailable=False,
        )
        self.details.update({"conflict": True, "wal_path": str(path), "wal_seq": expected})


class WalLeaseLostError(WalAppendError, SessionBusyError):
    """This process no longer holds the lease of the WAL's session (another process took it over);
    nothing was written. Code ``session_active``, with the lease's details."""

    def __init__(self, lost: AgentCoreError) -> None:
        super().__init__(lost.message, unavailable=False, cause=lost)
        self.code = ErrorCode.session_active
        self.details.update(lost.details)


class PgTaskWal(WalWriter):
    """Task WALs in the ``task_wal`` table of the database ``$dsn_env`` names.

    Every call runs on the table connection's own thread (:class:`PgConnection`: reconnects after a
    lost connection, reads are run again). :meth:`offload` runs a whole Task WAL operation there, so the
    event loop never waits for a round trip; synchronous callers wait on their own thread.
    """

    SHARED = True

    def __init__(
        self,
        *,
        dsn_env: str,
        environ: Mapping[str, str] | None = None,
        policy: ReconnectPolicy | None = None,
        leases: HeldLeases | None = None,
    ) -> None:
        super().__init__(fsync=False)
        self._leases = leases
        """The session leases of the store this table belongs to: appends are fenced by them."""
        self._dsn_env = dsn_env
        self._environ = environ
        self._policy = policy
        self._pg: PgConnection | None = None
        self._pg_lock = threading.Lock()

    # ---- connection --------------------------------------------------------------------------

    def _connection(self) -> PgConnection:
        with self._pg_lock:
            if self._pg is None:
                dsn = dsn_from_env(self._environ if self._environ is not None else os.environ, self._dsn_env)
                self._pg = PgConnection(
                    dsn,
                    dsn_env=self._dsn_env,
                    name="agent_core-pg-task-wal",
                    policy=self._policy,
                    on_connect=_create_table,
                )
            return self._pg

    def _call(self, what: str, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        """``fn(connection)`` on the connection thread, run again after a lost connection (reads)."""
        pg = self._connection()
        try:
            return pg.call_blocking(lambda: pg.idempotent(what, fn))
        except psycopg.Error as exc:
            raise WalMediumError(f"{what} failed: {exc}") from exc
        except StorageError as exc:  # the server stayed away longer than the reconnect timeout
            raise WalMediumError(exc.message) from exc

    async def offload(self, fn: Callable[[], T]) -> T:
        """Runs ``fn`` (calls on this writer) on the connection thread; the event loop does not wait."""
        pg = self._connection()
        return await pg.call(fn)

    def close(self) -> None:
        with self._pg_lock:
            pg, self._pg = self._pg, None
        if pg is not None:
            pg.close_blocking()

    def _rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        return self._call("reading the Task WAL table", lambda conn: conn.execute(sql, params).fetchall())

    # ---- writes ------------------------------------------------------------------------------

    def _insert(self, path: Path, records: list[TaskWalEvent], *, creating: bool) -> None:
        rows = [
            (
                str(path),
                str(path.parent),
                r.wal_seq,
                r.task_id,
                r.event_type,
                r.created_at,
                time.time_ns(),
                r.to_line()[:-1].decode("utf-8"),
            )
            for r in records
        ]
        first, last = records[0].wal_seq, records[-1].wal_seq
        pg = self._connection()
        leases, session_id = self._leases, path.parent.name

        def insert(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction(), conn.cursor() as cur:
                if leases is not None:

                    def fetch(sql: str, params: Sequence[Any]) -> Sequence[Any] | None:
                        return cur.execute(pg_sql(sql), tuple(params)).fetchone()

                    try:
                        leases.fence(session_id, fetch)
                    except AgentCoreError as exc:
                        raise WalLeaseLostError(exc) from exc
                cur.execute(
                    "SELECT COALESCE(MAX(wal_seq), 0) FROM task_wal WHERE wal_path = %s", (str(path),)
                )
                row = cur.fetchone()
                found = int(row[0]) if row else 0
                if creating and found:
                    raise FileOperationError(
                        ErrorCode.path_conflict, f"a Task WAL named {path.name} already exists"
                    )
                if not creating and found != first - 1:
                    raise WalConflictError(path, first, found)
                cur.executemany(
                    "INSERT INTO task_wal (wal_path, wal_dir, wal_seq, task_id, event_type, created_at, "
                    "written_ns, line) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                    rows,
                )

        def stored(conn: psycopg.Connection[Any]) -> bool:
            """Whether exactly these records are stored (a commit whose answer was lost went through)."""
            lines = conn.execute(
                "SELECT line FROM task_wal WHERE wal_path = %s AND wal_seq BETWEEN %s AND %s ORDER BY wal_seq",
                (str(path), first, last),
            ).fetchall()
            return [r[0] for r in lines] == [r[7] for r in rows]

        def on_thread() -> None:
            for _ in range(3):
                conn = pg.live()
                try:
                    insert(conn)
                    return
                except psycopg.OperationalError as exc:
                    if not is_connection_lost(conn, exc):
                        raise
                    pg.drop_lost("a Task WAL append", exc)
                if pg.idempotent("a Task WAL append check", stored):
                    return
            raise WalAppendError(
                f"cannot append to {path.name}: the PostgreSQL connection (DSN from ${self._dsn_env}) "
                "was lost again and again; nothing was stored",
                unavailable=False,
            )

        try:
            pg.call_blocking(on_thread)
        except psycopg.errors.UniqueViolation as exc:
            if creating:
                raise FileOperationError(
                    ErrorCode.path_conflict, f"a Task WAL named {path.name} already exists"
                ) from exc
            raise WalConflictError(path, first, first) from exc
        except psycopg.Error as exc:
            raise WalAppendError(
                f"cannot append to {path.name}: {exc}", unavailable=False, cause=exc
            ) from exc
        except WalAppendError:
            raise
        except StorageError as exc:  # the server stayed away longer than the reconnect timeout
            raise WalAppendError(exc.message, unavailable=False, cause=exc) from exc

    def create(self, path: Path, records: list[TaskWalEvent]) -> None:
        """Writes the first commit of a new WAL; ``path_conflict`` if one of that name exists."""
        self._insert(path, records, creating=True)

    def append(self, path: Path, records: list[TaskWalEvent]) -> None:
        """Appends one commit, only if it continues the stored WAL (else :class:`WalConflictError`)."""
        self._insert(path, records, creating=False)

    def remove(self, path: Path) -> None:
        self._call(
            f"deleting {path.name}",
            lambda conn: conn.execute("DELETE FROM task_wal WHERE wal_path = %s", (str(path),)),
        )

    # ---- reads -------------------------------------------------------------------------------

    def list_wal_files(self, session_dir: Path) -> list[Path]:
        rows = self._rows(
            "SELECT DISTINCT wal_path FROM task_wal WHERE wal_dir = %s ORDER BY wal_path", (str(session_dir),)
        )
        return [Path(r[0]) for r in rows]

    def list_all_wals(self, wal_root: Path) -> list[Path]:
        root = str(wal_root)
        rows = self._rows(
            "SELECT DISTINCT wal_path FROM task_wal WHERE left(wal_dir, %s) = %s ORDER BY wal_path",
            (len(root) + 1, root + "/"),
        )
        return [Path(r[0]) for r in rows if Path(r[0]).parent.parent == wal_root]

    def size_bytes(self, path: Path) -> int:
        rows = self._rows(
            "SELECT COALESCE(SUM(octet_length(line) + 1), 0) FROM task_wal WHERE wal_path = %s", (str(path),)
        )
        return int(rows[0][0]) if rows else 0

    def exists(self, path: Path) -> bool:
        return bool(self._rows("SELECT 1 FROM task_wal WHERE wal_path = %s LIMIT 1", (str(path),)))

    def mtime_ns(self, path: Path) -> int:
        rows = self._rows("SELECT MAX(written_ns) FROM task_wal WHERE wal_path = %s", (str(path),))
        if not rows or rows[0][0] is None:
            raise WalMediumError(f"no Task WAL {path.name}")
        return int(rows[0][0])

    def uncommitted_create(self, path: Path) -> bool:
        """Never: a commit is one transaction, so a WAL row set is never a torn create."""
        return False

    def read_tail(self, path: Path) -> WalTail:
        rows = self._rows(
            "SELECT event_type, created_at, task_id FROM task_wal WHERE wal_path = %s "
            "ORDER BY wal_seq DESC LIMIT 1",
            (str(path),),
        )
        if not rows:
            return WalTail(event_type=None, created_at=None, task_id=None)
        return WalTail(event_type=rows[0][0], created_at=rows[0][1], task_id=rows[0][2])

    def read_first_task_id(self, path: Path) -> str | None:
        rows = self._rows("SELECT task_id FROM task_wal WHERE wal_path = %s AND wal_seq = 1", (str(path),))
        return str(rows[0][0]) if rows else None

    def read_timeline(self, path: Path) -> list[dict[str, Any]]:
        try:
            lines = self._lines(path)
        except WalMediumError:
            return []
        return [json.loads(line) for line in lines]

    def _lines(self, path: Path, after: int = 0) -> list[str]:
        rows = self._rows(
            "SELECT line FROM task_wal WHERE wal_path = %s AND wal_seq > %s ORDER BY wal_seq",
            (str(path), after),
        )
        return [str(r[0]) for r in rows]

    def export_jsonl(self, path: Path) -> bytes:
        return b"".join(line.encode("utf-8") + b"\n" for line in self._lines(path))

    def replay(self, path: Path, *, session_id: str, repair: bool, recent: int = 64) -> ReplayOutcome:
        """Rebuilds the DAG from the stored records (there is never a torn tail to repair)."""
        data = self.export_jsonl(path)
        if not data:
            raise WalReplayError(path, "no complete record (expected task_created)", task_id=None)
        outcome, _, _, _ = replay_bytes(data, path, session_id=session_id, recent=recent)
        return outcome

    def records_after(self, path: Path, wal_seq: int) -> list[TaskWalEvent]:
        validate = wal_event_adapter.validator.validate_json
        return [validate(line) for line in self._lines(path, wal_seq)]

"""The built-in migrations on PostgreSQL (docs/storage.md#migrations, docs/storage.md#backends).

The same :data:`~agent_core._storage.migrations.MIGRATIONS` as SQLite, with the DDL adapted by
:func:`pg_ddl`: ``INTEGER`` becomes ``BIGINT`` and every global table gets an insertion-ordered
``rowid`` identity column (the portable SQL orders by ``rowid`` as on SQLite). Each migration is one
transaction holding a cluster-wide advisory lock, so processes opening one fresh database concurrently
apply each migration once. Any failure rolls it back and raises ``migration_failed``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import psycopg

from agent_core._storage.migrations import Migration
from agent_core._storage.schema import SCHEMA_MIGRATIONS_DDL
from agent_core.errors import ErrorCode, MigrationError, StorageError
from agent_core.types.base import format_ts

MIGRATION_LOCK = 0x50A6_0001
"""``pg_advisory_xact_lock`` key serialising migrations across processes."""
_CREATE_TABLE = re.compile(r"^(CREATE TABLE(?: IF NOT EXISTS)? [^\s(]+ \()\n", re.MULTILINE)
_INTEGER = re.compile(r"\bINTEGER\b")


def pg_ddl(statement: str, *, rowid: bool) -> str:
    """SQLite DDL of this project → PostgreSQL (``BIGINT`` integers, optional ``rowid`` identity)."""
    out = _INTEGER.sub("BIGINT", statement)
    if rowid:
        out = _CREATE_TABLE.sub(r"\1\n  rowid BIGINT GENERATED ALWAYS AS IDENTITY,\n", out, count=1)
    return out


PG_EXTRA_DDL: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS run_owners (
  run_id    TEXT PRIMARY KEY,
  owner_key BIGINT NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS session_leases (
  session_id TEXT PRIMARY KEY,
  epoch      BIGINT NOT NULL,
  owner      TEXT NOT NULL,
  taken_at   TEXT NOT NULL
)""",
)
"""PostgreSQL-only bookkeeping, created idempotently at every open: which process runs a run (its
``owner_key`` is an advisory lock the owning store holds while it is open) and each session lease's
fencing token (``epoch``, bumped by every holder when granted; see ``lease.py``)."""


def apply_pg_migrations(conn: psycopg.Connection[Any], migrations: Sequence[Migration]) -> list[int]:
    """Applies the missing migrations (runs on the connection thread); returns the versions applied."""
    versions = [m.version for m in migrations]
    if versions != sorted(set(versions)):
        raise MigrationError(ErrorCode.migration_failed, "migration versions must be unique and ascending")
    applied: list[int] = []
    with conn.cursor() as cur:
        try:
            cur.execute("BEGIN")
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            cur.execute(pg_ddl(SCHEMA_MIGRATIONS_DDL, rowid=False))
            cur.execute("COMMIT")
        except psycopg.Error as exc:
            cur.execute("ROLLBACK")
            raise MigrationError(
                ErrorCode.migration_failed, f"cannot create schema_migrations: {exc}", cause=exc
            ) from exc
        for migration in migrations:
            try:
                cur.execute("BEGIN")
                cur.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
                cur.execute("SELECT 1 FROM schema_migrations WHERE version = %s", (migration.version,))
                if cur.fetchone() is not None:
                    cur.execute("COMMIT")
                    continue
                if migration.step is not None:
                    raise MigrationError(
                        ErrorCode.migration_failed,
                        f"migration {migration.version} has a SQLite-only step; PostgreSQL cannot apply it",
                    )
                for statement in migration.statements:
                    cur.execute(pg_ddl(statement, rowid=True))
                cur.execute(
                    "INSERT INTO schema_migrations (version, applied_at) VALUES (%s, %s)",
                    (migration.version, format_ts()),
                )
                cur.execute("COMMIT")
            except Exception as exc:
                try:
                    cur.execute("ROLLBACK")
                except psycopg.Error:
                    pass
                if isinstance(exc, StorageError):
                    raise
                raise MigrationError(
                    ErrorCode.migration_failed,
                    f"migration {migration.version} ({migration.description}) failed: {exc}",
                    details={"version": migration.version},
                    cause=exc,
                ) from exc
            applied.append(migration.version)
        cur.execute("BEGIN")
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        for statement in PG_EXTRA_DDL:
            cur.execute(statement)
        cur.execute("COMMIT")
    return applied

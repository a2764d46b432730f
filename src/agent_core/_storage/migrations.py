"""Built-in schema migrations (docs/storage.md#migrations).

On open, every migration whose version is missing from ``schema_migrations`` is applied in ascending
order, each inside its own ``BEGIN IMMEDIATE`` … ``COMMIT`` together with its bookkeeping row (its version
is re-read inside that transaction: another process opening the same fresh home may have applied it). Any
failure rolls that migration back and raises :class:`StorageError` with code ``migration_failed``.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agent_core._storage.schema import (
    APPROVALS_V2,
    BACKGROUND_JOBS_V3,
    GLOBAL_TABLES_V1,
    QUESTIONS_V7,
    SCHEDULES_V4,
    SCHEMA_MIGRATIONS_DDL,
    TEAMS_V6,
    TOOL_CLAIMS_V5,
)
from agent_core.errors import ErrorCode, MigrationError
from agent_core.types.base import format_ts

log = logging.getLogger(__name__)

MigrationStep = Callable[[sqlite3.Connection], None]


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema version: plain statements and/or a step run on the open transaction (SQLite only)."""

    version: int
    description: str
    statements: tuple[str, ...] = ()
    step: MigrationStep | None = None


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "global tables sessions/agents/runs/artifacts and their indexes", GLOBAL_TABLES_V1),
    Migration(2, "pending_approvals table (durable permission requests of soong-agent serve)", APPROVALS_V2),
    Migration(3, "background_jobs table (offloaded tool calls)", BACKGROUND_JOBS_V3),
    Migration(4, "schedules table (cron schedules)", SCHEDULES_V4),
    Migration(5, "tool call claims, tool plans and stopped step attempts (temporal engine)", TOOL_CLAIMS_V5),
    Migration(6, "inbox entries, teammates and team requests", TEAMS_V6),
    Migration(7, "pending_questions table (durable ask_user questions of soong-agent serve)", QUESTIONS_V7),
)
"""Every built-in migration, ascending. Per-session DDL changes must iterate over ``sessions``."""

CURRENT_VERSION = MIGRATIONS[-1].version


def applied_versions(conn: sqlite3.Connection) -> set[int]:
    return {int(row[0]) for row in conn.execute("SELECT version FROM schema_migrations")}


def _recorded(conn: sqlite3.Connection, version: int) -> bool:
    return (
        conn.execute("SELECT 1 FROM schema_migrations WHERE version = ?", (version,)).fetchone() is not None
    )


def apply_migrations(conn: sqlite3.Connection, migrations: Sequence[Migration] = MIGRATIONS) -> list[int]:
    """Applies the missing migrations on ``conn`` (autocommit mode); returns the versions applied."""
    versions = [m.version for m in migrations]
    if versions != sorted(set(versions)):
        raise MigrationError(ErrorCode.migration_failed, "migration versions must be unique and ascending")
    try:
        conn.execute(SCHEMA_MIGRATIONS_DDL)
        done = applied_versions(conn)
    except Exception as exc:
        raise MigrationError(
            ErrorCode.migration_failed, f"cannot read schema_migrations: {exc}", cause=exc
        ) from exc
    applied: list[int] = []
    for migration in migrations:
        if migration.version in done:
            continue
        try:
            conn.execute("BEGIN IMMEDIATE")
            if _recorded(conn, migration.version):  # another process applied it meanwhile
                conn.execute("COMMIT")
                continue
            for statement in migration.statements:
                conn.execute(statement)
            if migration.step is not None:
                migration.step(conn)
            conn.execute(
                "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
                (migration.version, format_ts()),
            )
            conn.execute("COMMIT")
        except Exception as exc:
            if conn.in_transaction:
                try:
                    conn.execute("ROLLBACK")
                except Exception:  # the original error is what matters
                    log.debug("rollback after failed migration %s failed", migration.version)
            raise MigrationError(
                ErrorCode.migration_failed,
                f"migration {migration.version} ({migration.description}) failed: {exc}",
                details={"version": migration.version},
                cause=exc,
            ) from exc
        log.debug("applied migration %s", migration.version)
        applied.append(migration.version)
    return applied

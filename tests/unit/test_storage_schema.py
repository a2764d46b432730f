"""Schema, migrations, connection setup and session-table creation (docs/storage.md#backends,
docs/storage.md#tables; E1)."""

from __future__ import annotations

import os
import re
import sqlite3
from pathlib import Path

import pytest

from agent_core._ids import new_id
from agent_core._storage.migrations import MIGRATIONS, Migration
from agent_core._storage.sqlite import StorageManager
from agent_core._storage.sqlite_connection import enable_wal
from agent_core.errors import AgentCoreError, ErrorCode, StorageError
from agent_core.types.base import format_ts, parse_ts
from agent_core.types.enums import AgentType
from agent_core.types.storage import AgentRecord, SessionRecord
from tests.fixtures.storage_env import make_redactor, opened_store

GLOBAL_COLUMNS = {
    "sessions": [
        ("session_id", False), ("cwd", True), ("root_agent_id", True), ("active_node_id", False),
        ("parent_session_id", False), ("status", True), ("metadata_json", False), ("created_at", True),
        ("updated_at", True),
    ],
    "agents": [
        ("agent_id", False), ("session_id", True), ("parent_agent_id", False), ("agent_type", True),
        ("created_by_run_id", False), ("fork_from_node_id", False), ("status", True), ("result_json", False),
        ("metadata_json", False), ("created_at", True), ("updated_at", True),
    ],
    "runs": [
        ("run_id", False), ("session_id", True), ("agent_id", True), ("status", True), ("start_node_id", False),
        ("end_node_id", False), ("end_reason", False), ("turn_count", False), ("usage_json", False),
        ("error_json", False), ("metadata_json", False), ("created_at", True), ("updated_at", True),
    ],
    "artifacts": [
        ("artifact_id", False), ("session_id", True), ("agent_id", False), ("run_id", False), ("node_id", False),
        ("tool_call_id", False), ("path", True), ("filename", False), ("mime_type", False),
        ("size_bytes", False), ("summary", False), ("metadata_json", False), ("created_at", True),
    ],
}  # fmt: skip
NODE_COLUMNS = [
    "node_id", "node_seq", "parent_id", "agent_id", "run_id", "role", "node_type", "content_json",
    "metadata_json", "token_count", "created_at",
]  # fmt: skip
EVENT_COLUMNS = [
    "event_id", "seq", "run_seq", "agent_id", "run_id", "level", "event_type", "node_id", "tool_call_id",
    "payload_json", "created_at",
]  # fmt: skip


def _tables(db: Path) -> set[str]:
    conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        conn.close()


async def test_migrations_create_schema_and_reopen_applies_nothing(tmp_path: Path) -> None:
    """Case E1."""
    db = tmp_path / "deep" / "home" / "sessions.sqlite"
    storage = StorageManager(db, redactor=make_redactor())
    assert not db.parent.exists(), "construction must not create anything"
    await storage.open()
    await storage.open()  # idempotent
    try:
        assert {"schema_migrations", "sessions", "agents", "runs", "artifacts"} <= _tables(db)
        conn = sqlite3.connect(db)
        rows = conn.execute("SELECT version, applied_at FROM schema_migrations").fetchall()
        conn.close()
        assert [r[0] for r in rows] == [m.version for m in MIGRATIONS]
        parse_ts(rows[0][1])
    finally:
        await storage.close()
        await storage.close()  # idempotent
    again = StorageManager(db, redactor=make_redactor())
    await again.open()
    await again.close()
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT COUNT(*) FROM schema_migrations").fetchone()[0] == len(MIGRATIONS)
    conn.close()


async def test_pragmas_wal_and_busy_timeout(tmp_path: Path) -> None:
    """Case E1."""
    async with opened_store(tmp_path) as env:
        storage = env.storage

        async def writer(pragma: str) -> object:
            return await storage.write(lambda txn: txn.scalar(f"PRAGMA {pragma}"))

        async def reader(pragma: str) -> object:
            return (await storage.query(f"PRAGMA {pragma}"))[0][0]

        for read in (writer, reader):
            assert await read("journal_mode") == "wal"
            assert await read("busy_timeout") == 5000
        assert await writer("synchronous") == 1  # NORMAL
        assert await writer("foreign_keys") == 0
        assert await reader("query_only") == 1


class _FlakyWalSwitch:
    """A connection whose ``PRAGMA journal_mode=WAL`` fails with ``errors`` first (SQLite reports a busy
    WAL switch at once, without its busy handler, when another process opens or closes the fresh file)."""

    def __init__(self, *errors: sqlite3.OperationalError) -> None:
        self.errors = list(errors)
        self.calls = 0

    def execute(self, sql: str) -> _FlakyWalSwitch:
        assert sql == "PRAGMA journal_mode=WAL"
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return self

    def fetchone(self) -> tuple[str]:
        return ("wal",)


def _sqlite_error(message: str, code: int) -> sqlite3.OperationalError:
    exc = sqlite3.OperationalError(message)
    exc.sqlite_errorcode = code
    return exc


def test_a_busy_wal_switch_is_retried_and_other_errors_are_not() -> None:
    """Case E1."""
    locked = _FlakyWalSwitch(_sqlite_error("database is locked", 5), _sqlite_error("database is locked", 5))
    assert enable_wal(locked) == "wal"  # type: ignore[arg-type]
    assert locked.calls == 3
    broken = _FlakyWalSwitch(_sqlite_error("disk I/O error", 10))
    with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
        enable_wal(broken)  # type: ignore[arg-type]
    assert broken.calls == 1


async def test_corrupt_database_fails_with_storage_error(tmp_path: Path) -> None:
    """Case E1."""
    db = tmp_path / "sessions.sqlite"
    db.write_bytes(os.urandom(8192))
    storage = StorageManager(db, redactor=make_redactor())
    with pytest.raises(StorageError) as info:
        await storage.open()
    assert info.value.code in {ErrorCode.storage_error, ErrorCode.migration_failed}
    assert storage._writer_conn is None and storage._reader is None and not storage.is_open


async def test_failing_migration_rolls_back_and_raises_migration_failed(tmp_path: Path) -> None:
    def explode(conn: sqlite3.Connection) -> None:
        raise RuntimeError("boom")

    db = tmp_path / "sessions.sqlite"
    bad = (
        *MIGRATIONS,
        Migration(
            MIGRATIONS[-1].version + 1, "broken", ("CREATE TABLE half_done (x INTEGER)",), step=explode
        ),
    )
    storage = StorageManager(db, redactor=make_redactor(), migrations=bad)
    with pytest.raises(StorageError) as info:
        await storage.open()
    assert info.value.code == ErrorCode.migration_failed
    assert not storage.is_open and storage._writer_conn is None
    tables = _tables(db)
    assert "half_done" not in tables, "the failing migration must be rolled back"
    conn = sqlite3.connect(db)
    assert [r[0] for r in conn.execute("SELECT version FROM schema_migrations")] == [
        m.version for m in MIGRATIONS
    ]
    conn.close()
    # a later open with the good migrations works
    good = StorageManager(db, redactor=make_redactor())
    await good.open()
    await good.close()


async def test_write_after_close_is_a_storage_error(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        pass
    with pytest.raises(StorageError):
        await env.new_session()


async def test_global_tables_match_spec_columns_and_not_null(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        for table, expected in GLOBAL_COLUMNS.items():
            info = env.query(f"PRAGMA table_info({table})")
            got = [(row[1], bool(row[3])) for row in info]
            assert got == expected, table
        indexes = {r[0] for r in env.query("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert {
            "idx_agents_session",
            "idx_runs_session",
            "idx_runs_agent",
            "idx_artifacts_session",
            "idx_artifacts_run",
        } <= indexes


async def test_create_session_creates_per_session_tables_with_exact_columns(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        sid, aid = await env.new_session(cwd="/work/project")
        assert re.fullmatch(r"sess_\d{8}_\d{6}_[0-9a-f]{12}", sid)
        assert [r[1] for r in env.query(f'PRAGMA table_info("nodes_{sid}")')] == NODE_COLUMNS
        assert [r[1] for r in env.query(f'PRAGMA table_info("events_{sid}")')] == EVENT_COLUMNS
        session = await env.storage.get_session(sid)
        assert session is not None and session.status == "active" and session.cwd == "/work/project"
        assert session.root_agent_id == aid and session.parent_session_id is None
        agent = await env.storage.get_agent(aid)
        assert agent is not None and agent.agent_type == AgentType.main and agent.session_id == sid
        tables = _tables(env.db_path)
        assert not tables & {"plans", "tasks", "task_attempts", "task_dependencies"}
        index_sql = [
            r[0] for r in env.query("SELECT sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
        ]
        assert any("UNIQUE" in s and f'"nodes_{sid}"(node_seq)' in s for s in index_sql)
        assert any("UNIQUE" in s and f'"events_{sid}"(seq)' in s for s in index_sql)
        assert any(f'"events_{sid}"(run_id, run_seq)' in s for s in index_sql)


async def test_invalid_session_id_rejected_before_sql(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        now = format_ts()
        evil = "x; DROP TABLE sessions"
        with pytest.raises(AgentCoreError) as info:
            await env.storage.create_session(
                SessionRecord(
                    session_id=evil, cwd="/p", root_agent_id="agent_a", created_at=now, updated_at=now
                ),
                AgentRecord(
                    agent_id="agent_a", session_id=evil, agent_type="main", created_at=now, updated_at=now
                ),
            )
        assert info.value.code == ErrorCode.validation_error
        for call in (env.storage.list_nodes(evil), env.storage.list_events(evil), env.storage.append(evil)):
            with pytest.raises(AgentCoreError) as info:
                await call
            assert info.value.code == ErrorCode.validation_error
        assert {"sessions", "agents", "runs", "artifacts"} <= _tables(env.db_path)


async def test_unknown_or_duplicate_session_is_a_validation_error(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        with pytest.raises(AgentCoreError) as info:
            await env.storage.list_nodes("sess_unknown")
        assert info.value.code == ErrorCode.validation_error
        with pytest.raises(AgentCoreError) as info:
            await env.storage.append("sess_unknown")
        assert info.value.code == ErrorCode.validation_error
        sid, aid = await env.new_session()
        session = await env.storage.get_session(sid)
        agent = await env.storage.get_agent(aid)
        assert session is not None and agent is not None
        with pytest.raises(AgentCoreError) as info:
            await env.storage.create_session(session, agent.model_copy(update={"agent_id": new_id("agent_")}))
        assert info.value.code == ErrorCode.validation_error
        assert len(await env.storage.list_agents(sid)) == 1, "the failed create left no agent row"

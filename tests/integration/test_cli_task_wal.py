"""``soong-agent task-wal list|export``: a session's Task WAL as JSONL, on either storage backend, byte for
byte the file the sqlite backend writes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from agent_core._tasks.wal import WalWriter
from tests.fixtures.cli import cli_command, cli_env
from tests.fixtures.env import SoongEnv
from tests.fixtures.postgres_server import DSN_ENV
from tests.fixtures.task_harness import ManualClock, TaskHarness, claim, create, finish, step

SESSION = "sess_20260101_000000_cafebabe0001"


def _cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(cli_command(args), capture_output=True, env=cli_env(), timeout=120, check=False)


async def _write_task(project: Path, writer: WalWriter) -> Path:
    """The same Task history on any writer (a fixed clock: identical records); returns the WAL path."""
    harness = TaskHarness(project=project, session_id=SESSION, clock=ManualClock(), writer=writer)
    await create(harness, step("a"), step("b", "a"), title="Export me", summary="naïve — ✓")
    await finish(harness, "a")
    await claim(harness, "b", name="w2")
    return harness.wal()


async def test_export_prints_the_jsonl_file_byte_for_byte_on_sqlite(
    soong_env: SoongEnv, tmp_path: Path
) -> None:
    soong_env.write_config()
    wal = await _write_task(soong_env.project, WalWriter(fsync=False))
    expected = wal.read_bytes()
    assert expected.count(b"\n") >= 5
    result = await _run("task-wal", "export", SESSION, "--path", str(soong_env.project))
    assert result.returncode == 0, result.stderr
    assert result.stdout == expected and result.stderr == b""
    out = tmp_path / "copy.jsonl"
    result = await _run(
        "task-wal", "export", SESSION, "work", "-o", str(out), "--path", str(soong_env.project)
    )
    assert result.returncode == 0 and result.stdout == b"" and out.read_bytes() == expected
    listing = await _run("task-wal", "list", SESSION, "--path", str(soong_env.project))
    assert listing.returncode == 0
    assert listing.stdout.decode().startswith("work.wal.jsonl\ttask=t1\tlast=task_step_claimed\t")


async def test_unknown_wals_and_sessions_are_one_line_errors(soong_env: SoongEnv) -> None:
    soong_env.write_config()
    await _write_task(soong_env.project, WalWriter(fsync=False))
    missing = await _run("task-wal", "export", SESSION, "nope", "--path", str(soong_env.project))
    assert missing.returncode == 1 and missing.stdout == b""
    assert missing.stderr.decode() == (
        f"soong-agent: error: no Task WAL 'nope' in session {SESSION} (its WALs: work.wal.jsonl)\n"
    )
    empty = await _run(
        "task-wal", "export", "sess_20260101_000000_cafebabe0002", "--path", str(soong_env.project)
    )
    assert empty.returncode == 1
    assert empty.stderr.decode().startswith(
        "soong-agent: error: session sess_20260101_000000_cafebabe0002 has no"
    )
    bad = await _run("task-wal", "export", "../etc", "--path", str(soong_env.project))
    assert (
        bad.returncode == 1
        and bad.stderr.decode().count("\n") == 1
        and "Traceback" not in bad.stderr.decode()
    )


@pytest.mark.postgres
async def test_export_from_postgres_is_byte_identical_to_the_sqlite_file(
    soong_env: SoongEnv, postgres_dsn: str, tmp_path: Path
) -> None:
    from agent_core._storage.postgres.task_wal import PgTaskWal

    writer = PgTaskWal(dsn_env=DSN_ENV)
    try:
        wal = await _write_task(soong_env.project, writer)
        records = writer.records_after(wal, 0)
    finally:
        writer.close()
    assert not wal.exists(), "the records live in the table only"
    # the JSONL file the sqlite backend's writer makes of exactly these records
    file_wal = tmp_path / "files" / wal.name
    file_wal.parent.mkdir()
    WalWriter(fsync=False).create(file_wal, records)
    expected = file_wal.read_bytes()
    assert expected.count(b"\n") == len(records) >= 5
    soong_env.write_config(storage={"backend": "postgres", "postgres": {"dsn_env": DSN_ENV}})
    result = await _run("task-wal", "export", SESSION, "t1", "--path", str(soong_env.project))
    assert result.returncode == 0, result.stderr
    assert result.stdout == expected


async def _run(*args: str) -> subprocess.CompletedProcess[bytes]:
    import asyncio

    return await asyncio.to_thread(_cli, *args)

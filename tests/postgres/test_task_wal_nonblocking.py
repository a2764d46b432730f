"""Task WAL calls on postgres do not block the event loop: while a claim waits for the server, other
coroutines keep running; the claim then commits exactly once."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import psycopg
import pytest

from agent_core._storage.postgres.task_wal import PgTaskWal
from tests.fixtures.postgres_server import DSN_ENV
from tests.fixtures.task_harness import ManualClock, TaskHarness, claim, create, step

pytestmark = pytest.mark.postgres

RELEASE_AFTER_S = 30.0
"""A blocked event loop cannot release the table lock: a timer thread does, so such a run fails instead
of hanging."""


def _waiting_for_lock(dsn: str) -> bool:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'task_wal'::regclass"
        ).fetchone()
    return bool(row and row[0])


@pytest.mark.timeout(120)
async def test_a_claim_waiting_for_the_server_leaves_the_event_loop_free(
    postgres_dsn: str, tmp_path: Path
) -> None:
    harness = TaskHarness(
        project=tmp_path.resolve(),
        session_id="sess_nonblock",
        clock=ManualClock(),
        writer=PgTaskWal(dsn_env=DSN_ENV),
    )
    await create(harness, step("a"), step("b"))
    admin = psycopg.connect(postgres_dsn)
    admin.execute("LOCK TABLE task_wal IN ACCESS EXCLUSIVE MODE")  # every Task WAL statement now waits
    admin_lock = threading.Lock()

    def release() -> None:
        with admin_lock:
            if not admin.closed:
                admin.commit()

    timer = threading.Timer(RELEASE_AFTER_S, release)
    timer.start()
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticking = asyncio.create_task(ticker())
    claiming = asyncio.create_task(claim(harness, "a", name="w1"))
    try:
        while not await asyncio.to_thread(_waiting_for_lock, postgres_dsn):
            assert not claiming.done(), "the claim finished before it waited for the server"
            await asyncio.sleep(0.02)
        before = ticks
        while ticks < before + 5:  # the loop keeps running while the claim waits for the server
            await asyncio.sleep(0.01)
        assert not claiming.done() and timer.is_alive(), "the event loop was blocked by the Task WAL"
        release()
        await asyncio.wait_for(claiming, 60)
    finally:
        timer.cancel()
        ticking.cancel()
        with admin_lock:
            admin.close()
    timeline = harness.writer.read_timeline(harness.wal())
    claims = [e["step_id"] for e in timeline if e["event_type"] == "task_step_claimed"]
    assert claims == ["a"], "claimed exactly once"
    assert [e["wal_seq"] for e in timeline] == list(range(1, len(timeline) + 1))
    harness.writer.close()  # type: ignore[attr-defined]

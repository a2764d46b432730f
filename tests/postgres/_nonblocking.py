"""The harness of the postgres nonblocking tests: a Task WAL call made while another connection holds
``task_wal`` locked must wait for the server without blocking the event loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import psycopg

from agent_core._storage.postgres.task_wal import PgTaskWal
from tests.fixtures.postgres_server import DSN_ENV
from tests.fixtures.task_harness import ManualClock, TaskHarness

T = TypeVar("T")

RELEASE_AFTER_S = 30.0
"""A blocked event loop cannot release the table lock: a timer thread does, so such a run fails instead
of hanging."""


def pg_task_harness(tmp_path: Path, session_id: str) -> TaskHarness:
    """A Task board of ``session_id`` on the postgres Task WAL of ``$SOONG_TEST_PG_DSN``."""
    return TaskHarness(
        project=tmp_path.resolve(),
        session_id=session_id,
        clock=ManualClock(),
        writer=PgTaskWal(dsn_env=DSN_ENV),
    )


def _waiting_for_lock(dsn: str) -> bool:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'task_wal'::regclass"
        ).fetchone()
    return bool(row and row[0])


async def waits_without_blocking(dsn: str, call: Callable[[], Awaitable[T]], what: str) -> T:
    """Runs ``call()`` while ``task_wal`` is locked (every Task WAL statement waits); asserts that it
    waited for the server and that the event loop kept running meanwhile, then releases the lock and
    returns its result. ``what`` names the call in the failures."""
    admin = psycopg.connect(dsn)
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
    calling = asyncio.ensure_future(call())
    try:
        while not await asyncio.to_thread(_waiting_for_lock, dsn):
            assert not calling.done(), f"the {what} finished before it waited for the server"
            await asyncio.sleep(0.02)
        before = ticks
        while ticks < before + 5:  # the loop keeps running while the call waits for the server
            await asyncio.sleep(0.01)
        assert not calling.done() and timer.is_alive(), f"the event loop was blocked by the {what}"
        release()
        return await asyncio.wait_for(calling, 60)
    finally:
        timer.cancel()
        ticking.cancel()
        with admin_lock:
            admin.close()

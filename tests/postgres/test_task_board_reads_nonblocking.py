"""Task board reads on postgres do not block the event loop: while a read of a terminal Task
(``task_get`` → the WAL search and its read-only replay, ``task_list`` with terminal Tasks, the inspect
views of ``replay_session``) waits for the server, other coroutines keep running; the read then answers."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from agent_core._storage.postgres.task_wal import PgTaskWal
from tests.fixtures.postgres_server import DSN_ENV
from tests.fixtures.task_harness import ManualClock, TaskHarness, create, step

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


async def _task_get(h: TaskHarness) -> Any:
    return await h.ok(h.orchestrator(), "agent.task_get", task_id="t1")


async def _task_list(h: TaskHarness) -> Any:
    return await h.ok(h.orchestrator(), "agent.task_list", include_terminal=True)


async def _inspect(h: TaskHarness) -> Any:
    return await h.service.inspect_views()


READS: dict[str, Callable[[TaskHarness], Awaitable[Any]]] = {
    "task_get": _task_get,
    "task_list": _task_list,
    "inspect_views": _inspect,
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("read", sorted(READS))
async def test_a_board_read_waiting_for_the_server_leaves_the_event_loop_free(
    postgres_dsn: str, tmp_path: Path, read: str
) -> None:
    harness = TaskHarness(
        project=tmp_path.resolve(),
        session_id=f"sess_reads_{read}",
        clock=ManualClock(),
        writer=PgTaskWal(dsn_env=DSN_ENV),
    )
    await create(harness, step("a"))
    await harness.ok(harness.orchestrator(), "agent.task_cancel", task_id="t1", reason="done with it")
    harness.restart()  # a new process: the terminal Task is known only from its WAL rows
    await harness.service.load()
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
    reading = asyncio.create_task(READS[read](harness))
    try:
        while not await asyncio.to_thread(_waiting_for_lock, postgres_dsn):
            assert not reading.done(), "the read finished before it waited for the server"
            await asyncio.sleep(0.02)
        before = ticks
        while ticks < before + 5:  # the loop keeps running while the read waits for the server
            await asyncio.sleep(0.01)
        assert not reading.done() and timer.is_alive(), "the event loop was blocked by the board read"
        release()
        result = await asyncio.wait_for(reading, 60)
    finally:
        timer.cancel()
        ticking.cancel()
        with admin_lock:
            admin.close()
    if read == "task_get":
        assert result["status"] == "cancelled" and result["read_only"] is True
    elif read == "task_list":
        assert [(t["task_id"], t["status"]) for t in result["tasks"]] == [("t1", "cancelled")]
    else:
        assert [(v.task_id, v.status) for v in result] == [("t1", "cancelled")]
    harness.writer.close()  # type: ignore[attr-defined]

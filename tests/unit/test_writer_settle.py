"""The SQLite writer settles each transaction: after_commit callbacks, then the caller's future.

A failing ``after_commit`` callback is logged and never breaks the writer (the other callbacks run, the
caller gets its result, later transactions still run); a failing transaction fails only its own future,
with a ``storage_error``, and runs none of its callbacks — whether transactions run on the connection
thread or inline on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path

import pytest

from agent_core._storage.sqlite_connection import SqliteWriterConnection
from agent_core._storage.writer import Txn, TxnQueue
from agent_core.errors import ErrorCode, StorageError


@pytest.mark.parametrize("offload", [True, False], ids=["connection-thread", "inline"])
async def test_callbacks_run_before_the_result_and_a_failing_one_is_only_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, offload: bool
) -> None:
    ran: list[str] = []
    conn = SqliteWriterConnection(tmp_path / "w.sqlite")
    await conn.open()
    try:
        queue = TxnQueue(conn)
        queue.start()
        await queue.submit(lambda txn: txn.execute("CREATE TABLE t (v INTEGER)"))

        def broken() -> None:
            raise RuntimeError("cache bug")

        def write(txn: Txn) -> int:
            txn.execute("INSERT INTO t VALUES (1)")
            txn.after_commit(broken)
            txn.after_commit(lambda: ran.append("second callback"))
            return 7

        def fail(txn: Txn) -> int:
            txn.after_commit(lambda: ran.append("callback of a failed write"))
            raise sqlite3.OperationalError("disk I/O error")

        def count(txn: Txn) -> int:
            return int(txn.scalar("SELECT COUNT(*) FROM t"))

        with caplog.at_level(logging.ERROR):  # a broken writer would leave the futures pending: 10 s
            first = queue.enqueue(write, offload=offload)
            failed = queue.enqueue(fail, offload=offload)
            after = queue.enqueue(count, offload=offload)
            async with asyncio.timeout(10):
                assert await first == 7
                with pytest.raises(StorageError) as info:
                    await failed
                assert await after == 1
        await queue.drain_and_stop()
    finally:
        await conn.close()
    assert info.value.code == ErrorCode.storage_error
    assert ran == ["second callback"]
    assert "after_commit callback failed" in caplog.text

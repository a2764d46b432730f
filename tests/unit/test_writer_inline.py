"""Where the SQLite writer runs a transaction (issue 16, docs/storage.md#backends).

Transactions run inline on the event loop, in FIFO order with the ones that go to the connection's own
thread — a write that finds the file locked by another process (it waits there, the loop keeps running),
``offload=True`` writes (deleting a session) and the periodic ``PASSIVE`` WAL checkpoint
(``wal_autocheckpoint`` is off). A transaction after another connection committed is ``stale``.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from agent_core._redaction import Redactor
from agent_core._storage import sqlite_connection as connection_module
from agent_core._storage.sqlite import StorageManager
from agent_core._storage.writer import Txn, WriteOp
from agent_core.errors import StorageError


def _where(log: list[tuple[str, bool]], name: str) -> WriteOp[str]:
    def op(txn: Txn) -> str:
        txn.execute("INSERT INTO jot (name) VALUES (?)", (name,))
        log.append((name, threading.current_thread() is threading.main_thread()))
        return name

    return op


async def _open(tmp_path: Path) -> StorageManager:
    storage = StorageManager(tmp_path / "s.sqlite", redactor=Redactor())
    await storage.open()
    await storage.write(lambda txn: txn.execute("CREATE TABLE IF NOT EXISTS jot (name TEXT)"))
    return storage


async def test_writes_run_on_the_loop_in_fifo_order_with_offloaded_ones(tmp_path: Path) -> None:
    storage = await _open(tmp_path)
    log: list[tuple[str, bool]] = []
    try:
        queue = storage._queue()
        futures = [
            queue.enqueue(_where(log, "a")),
            queue.enqueue(_where(log, "b"), offload=True),
            queue.enqueue(_where(log, "c")),
        ]
        assert log == []  # enqueue only queues: the first runs in the next loop callback
        assert await asyncio.gather(*futures) == ["a", "b", "c"]
    finally:
        await storage.close()
    assert log == [("a", True), ("b", False), ("c", True)]


async def test_a_transaction_after_another_connection_committed_is_stale(tmp_path: Path) -> None:
    storage = await _open(tmp_path)
    other = sqlite3.connect(tmp_path / "s.sqlite", isolation_level=None)

    def stale(txn: Txn) -> bool:
        return txn.stale

    try:
        assert [await storage.write(stale) for _ in range(3)] == [False] * 3
        other.execute("INSERT INTO jot (name) VALUES ('elsewhere')")  # another process's commit
        assert [await storage.write(stale) for _ in range(2)] == [True, False]
        assert await storage.writes_elsewhere() == 1
    finally:
        other.close()
        await storage.close()


async def test_a_write_that_finds_the_file_locked_waits_off_the_loop(tmp_path: Path) -> None:
    storage = await _open(tmp_path)
    log: list[tuple[str, bool]] = []
    other = sqlite3.connect(tmp_path / "s.sqlite", isolation_level=None, check_same_thread=False)
    try:
        other.execute("BEGIN IMMEDIATE")  # another process's write transaction
        timer = threading.Timer(0.4, lambda: other.execute("COMMIT"))
        timer.start()
        ticks = 0
        writing = asyncio.ensure_future(storage.write(_where(log, "waited")))
        started = time.monotonic()
        while not writing.done():
            ticks += 1
            await asyncio.sleep(0.01)
        assert await writing == "waited"
        assert time.monotonic() - started >= 0.3
        assert ticks >= 10, "the event loop was blocked while the write waited for the lock"
        await storage.write(_where(log, "after"))  # inline again
        busy_timeout = await storage.write(lambda txn: txn.scalar("PRAGMA busy_timeout"))
        at_rest = await storage._queue().submit(lambda txn: txn.scalar("PRAGMA busy_timeout"), offload=True)
    finally:
        timer.join()
        other.close()
        await storage.close()
    # the connection keeps docs/storage.md's busy timeout; only an inline BEGIN does not wait
    assert log == [("waited", False), ("after", True)] and busy_timeout == at_rest == 5000


async def test_the_wal_is_checkpointed_on_the_connection_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = await _open(tmp_path)
    checkpoints: list[tuple[bool, int]] = []
    real = connection_module.SqliteWriterConnection._checkpoint

    def checkpoint(self: connection_module.SqliteWriterConnection) -> None:
        real(self)
        _busy, frames, done = self._live().execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        checkpoints.append((threading.current_thread() is threading.main_thread(), frames - done))

    monkeypatch.setattr(connection_module.SqliteWriterConnection, "_checkpoint", checkpoint)
    log: list[tuple[str, bool]] = []
    try:
        assert await storage.write(lambda txn: txn.scalar("PRAGMA wal_autocheckpoint")) == 0
        for i in range(2 * connection_module.CHECKPOINT_EVERY):
            await storage.write(_where(log, str(i)))
    finally:
        await storage.close()
    assert checkpoints == [(False, 0), (False, 0)]  # every frame copied back, off the loop
    assert all(on_loop for _, on_loop in log)


def test_an_interrupt_inside_an_inline_write_fails_it_and_later_writes_still_run(tmp_path: Path) -> None:
    loop = asyncio.new_event_loop()
    log: list[tuple[str, bool]] = []

    def interrupted(txn: Txn) -> str:
        raise KeyboardInterrupt

    try:
        storage = loop.run_until_complete(_open(tmp_path))
        queue = storage._queue()  # enqueued while the loop is stopped: it runs them once it runs again
        first, second = queue.enqueue(interrupted), queue.enqueue(_where(log, "after"))
        with pytest.raises(KeyboardInterrupt):  # the interrupt leaves the loop, as it does from any callback
            loop.run_until_complete(asyncio.sleep(5))
        assert loop.run_until_complete(asyncio.wait_for(second, 5)) == "after"
        assert first.done() and isinstance(first.exception(), StorageError)
        loop.run_until_complete(storage.close())
    finally:
        loop.close()
    assert log == [("after", True)]

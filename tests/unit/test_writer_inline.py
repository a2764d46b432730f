"""Where the SQLite writer runs a transaction (issue 16, storage.md §3).

A file only this process writes: transactions run inline on the event loop, in FIFO order with the ones
that go to the connection thread — a write that finds the file locked by another process (it waits there,
the loop keeps running), ``offload=True`` writes (deleting a session) and the periodic ``PASSIVE`` WAL
checkpoint (``wal_autocheckpoint`` is off). A file other processes write (``MultiProcessCaches``): every
transaction runs on the connection thread.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from agent_core._redaction import Redactor
from agent_core._storage import writer as writer_module
from agent_core._storage.caches import MultiProcessCaches
from agent_core._storage.sqlite import StorageManager
from agent_core._storage.writer import Txn
from agent_core.errors import StorageError


def _where(log: list[tuple[str, bool]], name: str) -> writer_module.WriteOp[str]:
    def op(txn: Txn) -> str:
        txn.execute("INSERT INTO jot (name) VALUES (?)", (name,))
        log.append((name, threading.current_thread() is threading.main_thread()))
        return name

    return op


async def _open(tmp_path: Path, *, shared: bool = False) -> StorageManager:
    storage = StorageManager(
        tmp_path / "s.sqlite", redactor=Redactor(), caches=MultiProcessCaches() if shared else None
    )
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


async def test_a_file_other_processes_write_is_written_on_the_connection_thread(tmp_path: Path) -> None:
    storage = await _open(tmp_path, shared=True)
    log: list[tuple[str, bool]] = []
    try:
        await storage.write(_where(log, "a"))
        autocheckpoint = await storage.write(lambda txn: txn.scalar("PRAGMA wal_autocheckpoint"))
    finally:
        await storage.close()
    assert log == [("a", False)] and autocheckpoint == 1000


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
        assert storage._writer_conn is not None
        at_rest = next(iter(await storage._writer_conn.execute_fetchall("PRAGMA busy_timeout")))[0]
    finally:
        timer.join()
        other.close()
        await storage.close()
    # the connection keeps storage.md's busy timeout; only an inline BEGIN does not wait
    assert log == [("waited", False), ("after", True)] and busy_timeout == at_rest == 5000


async def test_the_wal_is_checkpointed_on_the_connection_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = await _open(tmp_path)
    checkpoints: list[tuple[bool, int]] = []
    real = writer_module._checkpoint

    def checkpoint(conn: sqlite3.Connection) -> None:
        real(conn)
        _busy, frames, done = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        checkpoints.append((threading.current_thread() is threading.main_thread(), frames - done))

    monkeypatch.setattr(writer_module, "_checkpoint", checkpoint)
    log: list[tuple[str, bool]] = []
    try:
        assert await storage.write(lambda txn: txn.scalar("PRAGMA wal_autocheckpoint")) == 0
        for i in range(2 * writer_module.CHECKPOINT_EVERY):
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

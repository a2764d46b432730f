"""Several stores on one SQLite file (issue 40): counters re-read after another store committed or after a
failed write, the session lease (one holder, waiters in arrival order, dead waiters skipped), run owners
per open store, and a read-only database named as such."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from agent_core._storage.drafts import EventDraft, NodeDraft
from agent_core._storage.sqlite import StorageManager
from agent_core._storage.sqlite_connection import open_error, read_only_error
from agent_core._storage.sqlite_lease import FileSessionLease, lease_holder
from agent_core.errors import ErrorCode, StorageError
from agent_core.types.content import TextBlock
from agent_core.types.enums import EventType
from tests.fixtures.storage_env import StoreEnv, make_redactor, opened_store


def _turn(agent_id: str, run_id: str, text: str) -> tuple[list[NodeDraft], list[EventDraft]]:
    node = NodeDraft(agent_id=agent_id, run_id=run_id, role="user", content=[TextBlock(text=text)])
    event = EventDraft(
        event_type=EventType.message_created, agent_id=agent_id, run_id=run_id, node_id=node.node_id
    )
    return [node], [event]


async def _second_store(env: StoreEnv) -> StorageManager:
    other = StorageManager(env.db_path, redactor=make_redactor())
    await other.open()
    return other


async def test_two_stores_append_to_one_session_in_turns_with_contiguous_seqs(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        other = await _second_store(env)
        try:
            sid, aid = await env.new_session()
            run = await env.new_run(sid, aid)
            for k in range(6):  # each store caches its counters, the other one moves them on
                store = env.storage if k % 2 == 0 else other
                nodes, events = _turn(aid, run, f"turn {k}")
                written = await store.append(sid, nodes=nodes, events=events)
                assert [n.node_seq for n in written.nodes] == [k + 1]
                assert [(e.seq, e.run_seq) for e in written.events] == [(k + 1, k + 1)]
            assert await other.writes_elsewhere() == 3  # the first write of each of its turns
        finally:
            await other.close()
        listed = await env.storage.list_nodes(sid)
        assert [n.node_seq for n in listed] == [1, 2, 3, 4, 5, 6]


async def test_a_failed_write_makes_the_next_one_read_its_counters_again(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        sid, aid = await env.new_session()
        run = await env.new_run(sid, aid)
        await env.storage.append(sid, nodes=_turn(aid, run, "first")[0])
        env.storage._caches.node_seq[sid] = 0  # a counter gone wrong (how the bug looked)
        with pytest.raises(StorageError) as failed:
            await env.storage.append(sid, nodes=_turn(aid, run, "collides")[0])
        assert "UNIQUE constraint failed" in failed.value.message
        written = await env.storage.append(sid, nodes=_turn(aid, run, "second")[0])
        assert [n.node_seq for n in written.nodes] == [2]


async def test_runs_of_another_open_store_are_live_until_it_closes(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        other = await _second_store(env)
        sid, aid = await env.new_session()
        mine = await env.new_run(sid, aid)
        theirs = await _run_of(other, sid, aid)
        assert await env.storage.runs_live_elsewhere([mine, theirs]) == {theirs}
        assert await other.runs_live_elsewhere([mine, theirs]) == {mine}
        await other.close()
        assert await env.storage.runs_live_elsewhere([mine, theirs]) == set()


async def _run_of(store: StorageManager, session_id: str, agent_id: str) -> str:
    from agent_core._ids import new_id
    from agent_core.types.base import format_ts
    from agent_core.types.enums import RunStatus
    from agent_core.types.storage import RunRecord

    now = format_ts()
    run_id = new_id("run_")
    await store.insert_run(
        RunRecord(
            run_id=run_id,
            session_id=session_id,
            agent_id=agent_id,
            status=RunStatus.running,
            created_at=now,
            updated_at=now,
        )
    )
    return run_id


async def test_the_session_lease_has_one_holder_and_serves_waiters_in_arrival_order(tmp_path: Path) -> None:
    locks = tmp_path / "s.sqlite.locks"
    first, second, third, late = (FileSessionLease(locks, "sess_a") for _ in range(4))
    assert lease_holder(locks, "sess_a") is None
    assert first.try_enter() is True
    assert lease_holder(locks, "sess_a") == f"pid {os.getpid()}"
    assert second.try_enter() is False and second.queue_position == 1
    waiting_second = asyncio.ensure_future(second.__aenter__())
    await asyncio.sleep(0.1)
    waiting_third = asyncio.ensure_future(third.__aenter__())
    await asyncio.sleep(0.1)
    assert late.try_enter() is False and late.queue_position == 3  # no overtaking the queue
    assert not waiting_second.done() and not waiting_third.done()
    assert FileSessionLease(locks, "sess_b").try_enter() is True  # other sessions are independent
    first.release()
    await asyncio.wait_for(waiting_second, 5)
    await asyncio.sleep(0.1)
    assert not waiting_third.done()
    second.release()
    await asyncio.wait_for(waiting_third, 5)
    third.release()
    assert lease_holder(locks, "sess_a") is None


async def test_a_dead_waiters_ticket_is_skipped_and_a_cancelled_wait_leaves_none(tmp_path: Path) -> None:
    locks = tmp_path / "s.sqlite.locks"
    holder, cancelled, waiter = (FileSessionLease(locks, "sess_a") for _ in range(3))
    assert holder.try_enter()
    queue = locks / "sess_a.queue"
    queue.mkdir(parents=True, exist_ok=True)
    (queue / "00000000000000000001-1-dead").write_text("")  # a ticket nobody holds: its waiter died
    waiting = asyncio.ensure_future(cancelled.__aenter__())
    await asyncio.sleep(0.1)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert os.listdir(queue) == []  # the dead ticket was removed, the cancelled one withdrew its own
    holder.release()
    assert waiter.try_enter() is True
    waiter.release()


def test_a_read_only_database_is_named_as_such(tmp_path: Path) -> None:
    path = tmp_path / "home" / "sessions.sqlite"
    error = read_only_error(path, path.parent)
    assert (
        error.code == ErrorCode.storage_error and "read-only" in error.message and str(path) in error.message
    )
    assert error.details["not_writable"] == str(path.parent)
    plain = open_error(OSError("disk I/O error"), path)
    assert "read-only" not in plain.message and str(path) in plain.message

"""The append hot path: sequences, atomicity, tip chaining, concurrency (docs/storage.md#backends,
docs/storage.md#tree-active-path-and-branches; E9)."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agent_core._storage.drafts import FROM_TIP, EventDraft, NodeDraft, Tip
from agent_core._storage.sqlite import StorageManager
from agent_core._storage.writer import Txn
from agent_core.errors import AgentCoreError, ErrorCode, StorageError
from agent_core.types.content import TextBlock
from agent_core.types.enums import EventType, RunStatus
from tests.fixtures.storage_env import make_redactor, opened_store


def _node(agent_id: str, text: str = "hi", **kw: Any) -> NodeDraft:
    return NodeDraft(agent_id=agent_id, role="user", content=[TextBlock(text=text)], **kw)


def _event(node: NodeDraft | None = None, **kw: Any) -> EventDraft:
    kw.setdefault("event_type", EventType.message_created)
    if node is not None:
        kw.setdefault("agent_id", node.agent_id)
        kw.setdefault("run_id", node.run_id)
        kw.setdefault("node_id", node.node_id)
    return EventDraft(**kw)


async def test_append_allocates_seqs_and_returns_filled_objects(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        sid, aid = await env.new_session()
        rid = await env.new_run(sid, aid)
        n1 = _node(aid, run_id=rid)
        res = await env.storage.append(sid, nodes=[n1], events=[_event(n1, payload={"role": "user"})])
        assert [n.node_seq for n in res.nodes] == [1] and res.nodes[0].session_id == sid
        assert [(e.seq, e.run_seq) for e in res.events] == [(1, 1)]
        assert res.events[0].data == {"role": "user"} and res.events[0].node_id == n1.node_id
        res2 = await env.storage.append(
            sid,
            events=[
                _event(event_type=EventType.loop_started, agent_id=aid),
                _event(run_id=rid, agent_id=aid),
            ],
        )
        assert [(e.seq, e.run_seq) for e in res2.events] == [(2, None), (3, 2)]
        stored = await env.storage.list_events(sid)
        assert [e.model_dump() for e in stored] == [e.model_dump() for e in res.events + res2.events]
        assert (await env.storage.get_node(sid, n1.node_id)) == res.nodes[0]
        assert await env.storage.get_node(sid, "node_missing") is None


async def test_event_insert_failure_leaves_neither_row_and_counters_unchanged(tmp_path: Path) -> None:
    """Case E9."""
    async with opened_store(tmp_path) as env:
        sid, aid = await env.new_session()
        rid = await env.new_run(sid, aid)
        first = _event(agent_id=aid, run_id=rid)
        await env.storage.append(sid, events=[first])
        node = _node(aid, run_id=rid)
        # a duplicate event id makes the event INSERT fail after the node INSERT ran in the same txn
        with pytest.raises(StorageError) as info:
            await env.storage.append(
                sid, nodes=[node], events=[_event(node, event_id=first.event_id)], active_node_id=node.node_id
            )
        assert info.value.code == ErrorCode.storage_error
        assert env.query(f'SELECT COUNT(*) FROM "nodes_{sid}"') == [(0,)]
        assert env.query(f'SELECT COUNT(*) FROM "events_{sid}"') == [(1,)]
        assert env.query("SELECT active_node_id FROM sessions") == [(None,)]
        node2 = _node(aid, run_id=rid)
        res = await env.storage.append(sid, nodes=[node2], events=[_event(node2)])
        assert res.nodes[0].node_seq == 1
        assert (res.events[0].seq, res.events[0].run_seq) == (2, 2), "the failed write consumed no seq"


async def test_injected_oserror_during_event_write_is_atomic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Case E9."""
    async with opened_store(tmp_path) as env:
        sid, aid = await env.new_session()
        rid = await env.new_run(sid, aid)
        await env.storage.append(
            sid, nodes=[_node(aid, run_id=rid)], events=[_event(agent_id=aid, run_id=rid)]
        )
        real = Txn.executemany

        def failing(self: Txn, sql: str, rows: Any) -> None:
            if '"events_' in sql:
                raise OSError("disk I/O error (injected)")
            real(self, sql, rows)

        monkeypatch.setattr(Txn, "executemany", failing)
        node = _node(aid, run_id=rid)
        tip = Tip(node_id="node_before")
        with pytest.raises(StorageError) as info:
            await env.storage.append(
                sid,
                nodes=[dataclasses.replace(node, parent_id=FROM_TIP)],
                events=[_event(node)],
                run_update=(rid, {"turn_count": 7}),
                tip=tip,
            )
        assert info.value.code == ErrorCode.storage_error and isinstance(info.value.cause, OSError)
        assert tip.node_id == "node_before", "the tip only moves after a commit"
        monkeypatch.setattr(Txn, "executemany", real)
        assert env.query(f'SELECT COUNT(*) FROM "nodes_{sid}"') == [(1,)]
        assert env.query(f'SELECT COUNT(*) FROM "events_{sid}"') == [(1,)]
        assert env.query("SELECT turn_count FROM runs") == [(None,)]
        res = await env.storage.append(
            sid, nodes=[_node(aid, run_id=rid)], events=[_event(agent_id=aid, run_id=rid)]
        )
        assert res.nodes[0].node_seq == 2 and (res.events[0].seq, res.events[0].run_seq) == (2, 2)


async def test_unserialisable_payload_fails_without_writing(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        sid, aid = await env.new_session()
        node = _node(aid)
        with pytest.raises(StorageError) as info:
            await env.storage.append(sid, nodes=[node], events=[_event(node, payload={"x": object()})])
        assert info.value.code == ErrorCode.storage_error
        assert env.query(f'SELECT COUNT(*) FROM "nodes_{sid}"') == [(0,)]
        res = await env.storage.append(sid, nodes=[_node(aid)], events=[_event(agent_id=aid)])
        assert res.nodes[0].node_seq == 1 and res.events[0].seq == 1


async def test_invalid_draft_values_are_validation_errors(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        sid, aid = await env.new_session()
        bad_calls = [
            env.storage.append(sid, nodes=[NodeDraft(agent_id=aid, role="wizard", content=[])]),
            env.storage.append(sid, events=[EventDraft(event_type="no_such_event")]),
            env.storage.append(sid, nodes=[_node(aid, parent_id=FROM_TIP)]),  # FROM_TIP without a tip
            env.storage.append(sid, run_update=("run_unknown", {"turn_count": 1})),
            env.storage.append(sid, agent_update=(aid, {"session_id": "sess_other"})),
        ]
        for call in bad_calls:
            with pytest.raises(AgentCoreError) as info:
                await call
            assert info.value.code == ErrorCode.validation_error


async def test_issue_a_eight_concurrent_writers_get_contiguous_unique_seqs(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        sid, _aid = await env.new_session()
        writers = []
        for _ in range(8):
            agent = await env.new_agent(sid)
            writers.append((agent, await env.new_run(sid, agent)))
        reads: list[int] = []

        async def writer(agent: str, run: str) -> None:
            for i in range(15):
                node = _node(agent, f"n{i}", run_id=run)
                await env.storage.append(
                    sid, nodes=[node], events=[_event(node), _event(agent_id=agent, run_id=run)]
                )

        async def reader() -> None:
            for _ in range(20):
                reads.append(len(await env.storage.list_events(sid)))
                await asyncio.sleep(0)

        await asyncio.gather(*(writer(a, r) for a, r in writers), reader())
        nodes = await env.storage.list_nodes(sid)
        events = await env.storage.list_events(sid)
        assert [n.node_seq for n in nodes] == list(range(1, 121))
        assert [e.seq for e in events] == list(range(1, 241))
        for agent, run in writers:
            assert [e.run_seq for e in events if e.run_id == run] == list(range(1, 31))
            assert len([n for n in nodes if n.agent_id == agent]) == 15
        assert reads == sorted(reads), "reads only ever see committed, growing state"


async def test_fifty_concurrent_node_writes_from_different_agents(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        sid, _ = await env.new_session()
        pairs = []
        for _ in range(50):
            agent = await env.new_agent(sid)
            pairs.append((agent, await env.new_run(sid, agent)))
        drafts = [_node(agent, run_id=run) for agent, run in pairs]
        results = await asyncio.gather(
            *(env.storage.append(sid, nodes=[d], events=[_event(d)]) for d in drafts)
        )
        node_seqs = [r.nodes[0].node_seq for r in results]
        assert sorted(node_seqs) == list(range(1, 51))
        by_commit = sorted(results, key=lambda r: r.nodes[0].node_seq)
        assert [r.events[0].seq for r in by_commit] == list(range(1, 51)), "seq follows commit order"
        assert all(r.events[0].run_seq == 1 for r in results), "run_seq restarts at 1 for each run"


async def test_replay_order_is_by_seq_not_created_at(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        sid, aid = await env.new_session()
        rid = await env.new_run(sid, aid)
        base = datetime(2026, 6, 12, 15, 30, tzinfo=UTC)
        stamps = [
            base + timedelta(seconds=5),
            base,
            base,
            base - timedelta(days=1),
            base + timedelta(hours=1),
        ]
        written = []
        for ts in stamps:
            node = _node(aid, run_id=rid, created_at=ts)
            res = await env.storage.append(sid, nodes=[node], events=[_event(node, created_at=ts)])
            written.append(res.events[0].event_id)
        events = await env.storage.list_events(sid)
        assert [e.event_id for e in events] == written
        assert [e.seq for e in events] == [1, 2, 3, 4, 5]
        assert [e.created_at for e in events] == stamps
        assert [n.node_seq for n in await env.storage.list_nodes(sid)] == [1, 2, 3, 4, 5]
        window = await env.storage.list_events(sid, from_seq=2, to_seq=4)
        assert [e.seq for e in window] == [2, 3, 4], "bounds are inclusive"
        assert [e.seq for e in await env.storage.list_events(sid, from_seq=4)] == [4, 5]
        assert [e.seq for e in await env.storage.list_events(sid, to_seq=1)] == [1]


async def test_run_filters_and_run_seq_per_run(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        sid, aid = await env.new_session()
        r1, r2 = await env.new_run(sid, aid), await env.new_run(sid, aid)
        for run in (r1, r2, r1, r2, r2):
            node = _node(aid, run_id=run)
            await env.storage.append(sid, nodes=[node], events=[_event(node)])
        second = await env.storage.list_events(sid, run_id=r2)
        assert [(e.seq, e.run_seq) for e in second] == [(2, 1), (4, 2), (5, 3)]
        assert len(await env.storage.list_nodes(sid, run_id=r1)) == 2
        assert len(await env.storage.list_nodes(sid, agent_id=aid, run_id=r2)) == 3
        assert await env.storage.list_nodes(sid, agent_id="agent_other") == []


async def test_tip_chains_concurrent_writes_in_commit_order(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        sid, aid = await env.new_session()
        root = _node(aid, "root")
        tip = Tip()
        await env.storage.append(sid, nodes=[root], tip=tip)
        assert tip.node_id == root.node_id
        drafts = [_node(aid, f"tool {i}", parent_id=FROM_TIP) for i in range(6)]
        await asyncio.gather(*(env.storage.append(sid, nodes=[d], tip=tip) for d in drafts))
        nodes = await env.storage.list_nodes(sid)
        for previous, current in itertools.pairwise(nodes):
            assert current.parent_id == previous.node_id, "each node hangs under the previous commit"
        assert tip.node_id == nodes[-1].node_id
        # within one call: the first FROM_TIP node chains to the tip, the next to the first
        a, b = _node(aid, "a", parent_id=FROM_TIP), _node(aid, "b", parent_id=FROM_TIP)
        res = await env.storage.append(sid, nodes=[a, b], tip=tip)
        assert res.nodes[0].parent_id == nodes[-1].node_id and res.nodes[1].parent_id == a.node_id
        # a sub agent's first node is an explicit new root
        sub_root = await env.storage.append(
            sid, nodes=[_node(aid, "sub", parent_id=None)], tip=Tip(node_id="x")
        )
        assert sub_root.nodes[0].parent_id is None


async def test_active_node_and_run_agent_updates_share_the_transaction(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        sid, aid = await env.new_session()
        rid = await env.new_run(sid, aid)
        before = await env.storage.get_session(sid)
        node = _node(aid, run_id=rid)
        await env.storage.append(
            sid,
            nodes=[node],
            events=[_event(node)],
            active_node_id=node.node_id,
            run_update=(rid, {"status": RunStatus.completed, "end_reason": "completed", "turn_count": 2}),
            agent_update=(aid, {"status": "completed", "metadata_json": {"active_node_id": node.node_id}}),
        )
        session, run, agent = (
            await env.storage.get_session(sid),
            await env.storage.get_run(rid),
            await env.storage.get_agent(aid),
        )
        assert session is not None and before is not None
        assert session.active_node_id == node.node_id and session.updated_at >= before.updated_at
        assert run is not None and run.status == RunStatus.completed and run.turn_count == 2
        assert run.end_reason == "completed"
        assert agent is not None and agent.status == "completed"
        assert agent.metadata_json == f'{{"active_node_id":"{node.node_id}"}}'
        # an update of an unknown run rolls the node back as well
        other = _node(aid)
        with pytest.raises(AgentCoreError):
            await env.storage.append(
                sid, nodes=[other], active_node_id=other.node_id, run_update=("run_nope", {})
            )
        assert await env.storage.get_node(sid, other.node_id) is None
        session2 = await env.storage.get_session(sid)
        assert session2 is not None and session2.active_node_id == node.node_id


async def test_update_run_and_agent_columns(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        sid, aid = await env.new_session()
        rid = await env.new_run(sid, aid, status=RunStatus.pending)
        run0 = await env.storage.get_run(rid)
        await env.storage.update_run(
            rid, status="failed", end_reason="failed", error_json={"code": "storage_error", "message": "x"}
        )
        run = await env.storage.get_run(rid)
        assert run is not None and run0 is not None
        assert run.status == RunStatus.failed and run.updated_at >= run0.updated_at
        assert run.error_json == '{"code":"storage_error","message":"x"}'
        for bad in ({"status": "exploded"}, {"run_id": "run_x"}, {"nonsense": 1}, {"turn_count": object()}):
            with pytest.raises(AgentCoreError) as info:
                await env.storage.update_run(rid, **bad)
            assert info.value.code == ErrorCode.validation_error
        with pytest.raises(AgentCoreError):
            await env.storage.update_run("run_unknown", status="failed")
        await env.storage.update_agent(aid, status="running", result_json=None)
        agent = await env.storage.get_agent(aid)
        assert agent is not None and agent.status == "running"


async def test_run_and_session_listings(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        s1, a1 = await env.new_session()
        s2, _ = await env.new_session()
        runs = [
            await env.new_run(s1, a1, status=s)
            for s in (RunStatus.completed, RunStatus.queued, RunStatus.running)
        ]
        assert [r.run_id for r in await env.storage.list_runs(s1)] == runs
        assert [r.run_id for r in await env.storage.list_non_terminal_runs(s1)] == runs[1:]
        assert await env.storage.list_non_terminal_runs(s2) == []
        assert [s.session_id for s in await env.storage.list_sessions()] == [s2, s1]
        node = _node(a1)
        await env.storage.append(s1, nodes=[node], active_node_id=node.node_id)
        assert [s.session_id for s in await env.storage.list_sessions()] == [s1, s2], (
            "most recently updated first"
        )


async def test_node_path_root_to_node_and_node_lookup(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        sid, aid = await env.new_session()
        other_sid, other_aid = await env.new_session()
        tip = Tip()
        chain = [_node(aid, f"n{i}", parent_id=FROM_TIP) for i in range(4)]
        for d in chain:
            await env.storage.append(sid, nodes=[d], tip=tip)
        branch = _node(aid, "branch", parent_id=chain[1].node_id)
        await env.storage.append(sid, nodes=[branch])
        path = await env.storage.node_path(sid, chain[3].node_id)
        assert [n.node_id for n in path] == [d.node_id for d in chain]
        assert [n.node_id for n in await env.storage.node_path(sid, branch.node_id)] == [
            chain[0].node_id,
            chain[1].node_id,
            branch.node_id,
        ]
        with pytest.raises(AgentCoreError) as info:
            await env.storage.node_path(sid, "node_unknown")
        assert info.value.code == ErrorCode.validation_error
        assert await env.storage.find_node_session(branch.node_id) == sid
        await env.storage.append(other_sid, nodes=[_node(other_aid)])
    # a fresh manager has no cache: the lookup scans the session tables
    fresh = StorageManager(env.db_path, redactor=make_redactor())
    await fresh.open()
    try:
        assert await fresh.find_node_session(chain[2].node_id) == sid
        assert await fresh.find_node_session("node_nowhere") is None
    finally:
        await fresh.close()


async def test_counters_resume_from_max_after_reopen(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        sid, aid = await env.new_session()
        rid = await env.new_run(sid, aid)
        for _ in range(3):
            node = _node(aid, run_id=rid)
            await env.storage.append(sid, nodes=[node], events=[_event(node)])
    async with opened_store(tmp_path) as env2:
        node = _node(aid, run_id=rid)
        res = await env2.storage.append(sid, nodes=[node], events=[_event(node)])
        assert res.nodes[0].node_seq == 4 and (res.events[0].seq, res.events[0].run_seq) == (4, 4)


async def test_delete_session_rows_drops_tables_and_rows(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        sid, aid = await env.new_session()
        keep_sid, keep_aid = await env.new_session()
        rid = await env.new_run(sid, aid)
        await env.new_agent(sid)
        node = _node(aid, run_id=rid)
        await env.storage.append(sid, nodes=[node], events=[_event(node), _event(node)])
        await env.artifacts.create("x", filename="a.txt", kind="debug", session_id=sid)
        counts = await env.storage.delete_session_rows(sid)
        assert counts.model_dump() == {"nodes": 1, "events": 2, "runs": 1, "agents": 2, "artifacts": 1}
        names = {r[0] for r in env.query("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert f"nodes_{sid}" not in names and f"events_{sid}" not in names
        assert f"nodes_{keep_sid}" in names
        assert env.query("SELECT session_id FROM sessions") == [(keep_sid,)]
        assert await env.storage.find_node_session(node.node_id) is None
        with pytest.raises(AgentCoreError) as info:
            await env.storage.delete_session_rows(sid)
        assert info.value.code == ErrorCode.validation_error
        assert await env.storage.get_agent(keep_aid) is not None


async def test_cancelled_caller_does_not_cancel_a_queued_write(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        sid, aid = await env.new_session()
        drafts = [_node(aid, f"n{i}") for i in range(5)]
        tasks = [asyncio.create_task(env.storage.append(sid, nodes=[d])) for d in drafts]
        await asyncio.sleep(0)
        tasks[2].cancel()
        done = await asyncio.gather(*tasks, return_exceptions=True)
        assert isinstance(done[2], asyncio.CancelledError)
    async with opened_store(tmp_path) as env2:  # close() drained the queue: all five were written
        assert [n.node_seq for n in await env2.storage.list_nodes(sid)] == [1, 2, 3, 4, 5]


async def test_rows_must_reference_an_existing_session_and_agent(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        sid, aid = await env.new_session()
        other_sid, _ = await env.new_session()
        for call in (
            env.new_run("sess_missing", aid),
            env.new_run(sid, "agent_missing"),
            env.new_run(other_sid, aid),  # the agent belongs to another session
            env.new_agent("sess_missing"),
        ):
            with pytest.raises(AgentCoreError) as info:
                await call
            assert info.value.code == ErrorCode.validation_error
        assert env.query("SELECT COUNT(*) FROM runs") == [(0,)]
        assert env.query("SELECT COUNT(*) FROM agents") == [(2,)]

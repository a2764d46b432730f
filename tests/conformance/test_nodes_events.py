"""Conformance: the node tree, the active path, sequences and events (every backend)."""

from __future__ import annotations

import asyncio

import pytest

from agent_core._storage.drafts import FROM_TIP, Tip
from agent_core._storage.protocol import SessionStore
from agent_core.errors import AgentCoreError, ErrorCode, StorageError
from agent_core.types.enums import EventType, RunStatus
from tests.conformance.helpers import event, new_run, new_session, node


async def test_append_writes_node_and_event_atomically(store: SessionStore) -> None:
    sid, aid = await new_session(store)
    rid = await new_run(store, sid, aid)
    first = event(agent_id=aid, run_id=rid)
    await store.append(sid, events=[first])
    n = node(aid, run_id=rid)
    with pytest.raises(StorageError) as info:  # duplicate event id: the node INSERT is rolled back too
        await store.append(
            sid, nodes=[n], events=[event(n, event_id=first.event_id)], active_node_id=n.node_id
        )
    assert info.value.code == ErrorCode.storage_error
    assert await store.list_nodes(sid) == []
    assert [e.event_id for e in await store.list_events(sid)] == [first.event_id]
    session = await store.get_session(sid)
    assert session is not None and session.active_node_id is None
    n2 = node(aid, run_id=rid)
    res = await store.append(sid, nodes=[n2], events=[event(n2)], active_node_id=n2.node_id)
    assert res.nodes[0].node_seq == 1 and (res.events[0].seq, res.events[0].run_seq) == (2, 2)
    assert await store.list_events(sid) == [*(await store.list_events(sid, to_seq=1)), res.events[0]]


async def test_concurrent_appends_get_contiguous_sequences(store: SessionStore) -> None:
    sid, aid = await new_session(store)
    runs = [await new_run(store, sid, aid) for _ in range(3)]

    async def write(k: int) -> None:
        rid = runs[k % 3]
        n = node(aid, f"m{k}", run_id=rid)
        await store.append(sid, nodes=[n], events=[event(n), event(agent_id=aid, run_id=rid)])

    await asyncio.gather(*(write(k) for k in range(60)))
    assert [n.node_seq for n in await store.list_nodes(sid)] == list(range(1, 61))
    events = await store.list_events(sid)
    assert [e.seq for e in events] == list(range(1, 121))
    for rid in runs:
        assert [e.run_seq for e in await store.list_events(sid, run_id=rid)] == list(range(1, 41))


async def test_active_path_branches_and_tip_chaining(store: SessionStore) -> None:
    sid, aid = await new_session(store)
    tip = Tip()
    a, b, c = (
        node(aid, "a", parent_id=FROM_TIP),
        node(aid, "b", parent_id=FROM_TIP),
        node(aid, "c", parent_id=FROM_TIP),
    )
    res = await store.append(sid, nodes=[a, b, c], tip=tip, active_node_id=c.node_id)
    assert tip.node_id == c.node_id
    assert [n.parent_id for n in res.nodes] == [None, a.node_id, b.node_id]
    branch = node(aid, "b2", parent_id=a.node_id)
    await store.append(sid, nodes=[branch], active_node_id=branch.node_id)
    assert [n.node_id for n in await store.node_path(sid, c.node_id)] == [a.node_id, b.node_id, c.node_id]
    assert [n.node_id for n in await store.node_path(sid, branch.node_id)] == [a.node_id, branch.node_id]
    session = await store.get_session(sid)
    assert session is not None and session.active_node_id == branch.node_id
    with pytest.raises(AgentCoreError) as info:
        await store.node_path(sid, "node_missing")
    assert info.value.code == ErrorCode.validation_error
    assert await store.find_node_session(b.node_id) == sid
    assert await store.find_node_session("node_missing") is None
    got = await store.get_node(sid, b.node_id)
    assert got is not None and got.content[0].model_dump()["text"] == "b"


async def test_reads_filter_by_run_agent_and_seq_bounds(store: SessionStore) -> None:
    sid, aid = await new_session(store)
    r1, r2 = await new_run(store, sid, aid), await new_run(store, sid, aid)
    n1, n2 = node(aid, run_id=r1), node(aid, run_id=r2)
    await store.append(
        sid, nodes=[n1, n2], events=[event(n1), event(n2), event(event_type=EventType.loop_started)]
    )
    assert [n.node_id for n in await store.list_nodes(sid, run_id=r2)] == [n2.node_id]
    assert len(await store.list_nodes(sid, agent_id=aid)) == 2
    assert [e.node_id for e in await store.list_events(sid, run_id=r1)] == [n1.node_id]
    assert [e.seq for e in await store.list_events(sid, from_seq=2, to_seq=3)] == [2, 3]
    with pytest.raises(AgentCoreError) as info:
        await store.list_events("sess_missing")
    assert info.value.code == ErrorCode.validation_error


async def test_append_updates_run_agent_and_merges_session_metadata(store: SessionStore) -> None:
    sid, aid = await new_session(store)
    rid = await new_run(store, sid, aid)
    await store.append(sid, session_metadata={"title": "t", "keep": 1})
    await store.append(
        sid,
        events=[event(agent_id=aid, run_id=rid)],
        run_update=(rid, {"status": RunStatus.completed, "turn_count": 1}),
        session_metadata={"title": None, "mode": "x"},
    )
    run = await store.get_run(rid)
    assert run is not None and run.status == RunStatus.completed
    session = await store.get_session(sid)
    assert session is not None and session.metadata_json == '{"keep":1,"mode":"x"}'
    with pytest.raises(AgentCoreError) as info:
        await store.append(sid, events=[event(agent_id=aid)], run_update=("run_missing", {"turn_count": 2}))
    assert info.value.code == ErrorCode.validation_error
    assert len(await store.list_events(sid)) == 1


async def test_unknown_session_append_is_a_validation_error(store: SessionStore) -> None:
    with pytest.raises(AgentCoreError) as info:
        await store.append("sess_missing", events=[event(event_type=EventType.loop_started)])
    assert info.value.code == ErrorCode.validation_error


async def test_session_nodes_stand_for_the_node_ids_only_when_they_are_all_of_them(
    store: SessionStore,
) -> None:
    from agent_core._storage.sql_store import SqlSessionStore

    assert isinstance(store, SqlSessionStore)
    sid, aid = await new_session(store)
    nodes = [node(aid) for _ in range(4)]
    await store.append(sid, nodes=nodes)
    read = await store.list_nodes(sid)
    sql = store._caches.session_sql(sid)
    assert await store._whole_ids_by_seq(sql, read) == [None, *(n.node_id for n in nodes)]
    assert await store._whole_ids_by_seq(sql, read[:-1]) is None  # the table holds one more
    assert await store._whole_ids_by_seq(sql, read[1:]) is None
    assert await store.list_events(sid, session_nodes=read) == await store.list_events(sid)

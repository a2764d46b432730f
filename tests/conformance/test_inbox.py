"""Conformance: the durable per-agent inbox on every backend (delivery bound, order, acknowledgement in
the transaction of the node that carries an entry, never twice, deletion)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from agent_core._ids import new_id
from agent_core._storage.inbox import InboxAck, InboxAckConflict
from agent_core._storage.protocol import SessionStore
from agent_core._storage.writer import Txn
from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.types.inbox import InboxEntry
from tests.conformance.helpers import new_agent, new_session, node
from tests.fixtures.storage_env import set_test_secret


def entry(text: str, kind: str = "message", **kw: object) -> InboxEntry:
    return InboxEntry.model_validate(
        {
            "entry_id": new_id("inbox_"),
            "kind": kind,
            "from": kw.pop("sender", "lead"),
            "content": text,
            "created_at": datetime.now(UTC),
            **kw,
        }
    )


async def test_deliver_keeps_order_and_counts_per_agent(store: SessionStore) -> None:
    sid, aid = await new_session(store)
    other = await new_agent(store, sid)
    assert await store.deliver_inbox(sid, aid, [entry("one")], max_entries=5) == 1
    assert await store.deliver_inbox(sid, aid, [entry("two"), entry("three")], max_entries=5) == 3
    req = entry("plan", "request", request_id="req_1", metadata={"request_kind": "plan_approval"})
    assert await store.deliver_inbox(sid, other, [req], max_entries=5) == 1
    pending = await store.pending_inbox(sid, aid)
    assert [p.entry.content for p in pending] == ["one", "two", "three"]
    assert {p.status for p in pending} == {"pending"} and pending[0].entry.from_ == "lead"
    (got,) = await store.pending_inbox(sid, other)
    assert got.entry.request_id == "req_1" and got.entry.metadata == {"request_kind": "plan_approval"}
    assert got.entry.kind == "request" and got.entry.entry_id == req.entry_id
    assert await store.inbox_depths(sid) == {aid: 3, other: 1}
    assert [p.entry.content for p in await store.pending_inbox(sid, aid, limit=2)] == ["one", "two"]


async def test_overflow_is_an_error_and_stores_nothing(store: SessionStore) -> None:
    sid, aid = await new_session(store)
    await store.deliver_inbox(sid, aid, [entry("a"), entry("b")], max_entries=3)
    with pytest.raises(AgentCoreError) as info:
        await store.deliver_inbox(sid, aid, [entry("c"), entry("d")], max_entries=3)
    assert info.value.code == ErrorCode.validation_error
    assert info.value.details["limit"] == "agents.inbox_max_entries" and info.value.details["depth"] == 2
    assert [p.entry.content for p in await store.pending_inbox(sid, aid)] == ["a", "b"]
    # concurrent senders: the bound holds (each delivery counts after the previous one committed)
    results = await asyncio.gather(
        *(store.deliver_inbox(sid, aid, [entry(f"x{k}")], max_entries=6) for k in range(8)),
        return_exceptions=True,
    )
    assert sum(isinstance(r, int) for r in results) == 4
    assert all(isinstance(r, AgentCoreError) for r in results if not isinstance(r, int))
    assert len(await store.pending_inbox(sid, aid)) == 6


async def test_unknown_recipient_and_guard(store: SessionStore) -> None:
    sid, aid = await new_session(store)
    other_sid, other_aid = await new_session(store)
    with pytest.raises(AgentCoreError) as info:
        await store.deliver_inbox(sid, other_aid, [entry("x")], max_entries=5)
    assert info.value.code == ErrorCode.validation_error
    calls: list[int] = []

    def refuse(txn: Txn) -> bool:
        calls.append(1)
        return False

    assert await store.deliver_inbox(sid, aid, [entry("x")], max_entries=5, guard=refuse) is None
    assert calls == [1] and await store.pending_inbox(sid, aid) == []
    assert await store.pending_inbox(other_sid, other_aid) == []


async def test_ack_commits_with_its_node_and_never_twice(store: SessionStore) -> None:
    sid, aid = await new_session(store)
    first, second = entry("first"), entry("second")
    await store.deliver_inbox(sid, aid, [first, second], max_entries=5)
    ids = tuple(p.entry_id for p in await store.pending_inbox(sid, aid))
    note = node(aid, "<inbox>...</inbox>")
    await store.append(sid, nodes=[note], inbox_ack=InboxAck(aid, ids, note.node_id))
    assert await store.pending_inbox(sid, aid) == []
    stored = await store.list_inbox(sid, aid)
    assert [(s.status, s.node_id) for s in stored] == [("acked", note.node_id)] * 2
    # a second drain of the same entries fails whole: its node is not written
    again = node(aid, "<inbox>again</inbox>")
    with pytest.raises(InboxAckConflict):
        await store.append(sid, nodes=[again], inbox_ack=InboxAck(aid, ids, again.node_id))
    assert [n.node_id for n in await store.list_nodes(sid)] == [note.node_id]
    # an ack must name a node of the same write
    with pytest.raises(AgentCoreError):
        await store.append(sid, nodes=[node(aid)], inbox_ack=InboxAck(aid, ids, "node_elsewhere"))


async def test_concurrent_drains_deliver_each_entry_once(store: SessionStore) -> None:
    sid, aid = await new_session(store)
    await store.deliver_inbox(sid, aid, [entry(f"m{k}") for k in range(4)], max_entries=10)
    ids = tuple(p.entry_id for p in await store.pending_inbox(sid, aid))

    async def drain() -> bool:
        n = node(aid, "note")
        try:
            await store.append(sid, nodes=[n], inbox_ack=InboxAck(aid, ids, n.node_id))
        except InboxAckConflict:
            return False
        return True

    outcomes = await asyncio.gather(*(drain() for _ in range(5)))
    assert sum(outcomes) == 1 and len(await store.list_nodes(sid)) == 1


async def test_entries_are_redacted_and_deleted_with_their_session(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = set_test_secret(monkeypatch)
    sid, aid = await new_session(store)
    await store.deliver_inbox(sid, aid, [entry(f"token {secret}", metadata={"note": secret})], max_entries=5)
    (got,) = await store.pending_inbox(sid, aid)
    assert secret not in got.entry.content and secret not in str(got.entry.metadata)
    await store.delete_session_rows(sid)
    assert await store.list_inbox(sid) == [] and await store.inbox_depths(sid) == {}

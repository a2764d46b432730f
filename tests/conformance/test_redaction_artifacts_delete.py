"""Conformance: redaction (write time and read time), artifact metadata, deletion (every backend)."""

from __future__ import annotations

import pytest

from agent_core._ids import new_id
from agent_core._storage.protocol import SessionStore
from agent_core.types.base import format_ts
from agent_core.types.enums import EventType
from agent_core.types.storage import ArtifactRecord
from tests.conformance.helpers import event, new_run, new_session, node
from tests.fixtures.storage_env import set_test_secret


async def test_secrets_are_redacted_before_they_are_stored(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = set_test_secret(monkeypatch)
    sid, aid = await new_session(store)
    n = node(aid, f"key is {secret}", metadata={"note": secret})
    await store.append(
        sid, nodes=[n], events=[event(n, payload={"echo": secret})], session_metadata={"s": secret}
    )
    (stored,) = await store.list_nodes(sid)
    dumped = stored.model_dump_json() + (await store.list_events(sid))[0].model_dump_json()
    session = await store.get_session(sid)
    assert session is not None
    assert secret not in dumped + (session.metadata_json or "")
    assert "[REDACTED]" in dumped
    rows = await store.query("SELECT metadata_json FROM sessions WHERE session_id = ?", (sid,))
    assert secret not in str(rows)


async def test_sensitive_keys_are_masked_at_read_time_only_when_asked(store: SessionStore) -> None:
    sid, aid = await new_session(store)
    payload = {"usage": {"input_tokens": 3}, "headers": {"Authorization": "Bearer x"}}
    await store.append(
        sid,
        nodes=[node(aid, metadata={"token": "t"})],
        events=[event(event_type=EventType.model_started, payload=payload)],
    )
    (masked,) = await store.list_events(sid, redact_keys=True)
    assert masked.data == {"usage": {"input_tokens": 3}, "headers": {"Authorization": "[REDACTED]"}}
    assert (await store.list_events(sid))[0].data == payload
    (n,) = await store.list_nodes(sid, redact_keys=True)
    assert n.metadata == {"token": "[REDACTED]"}


def _artifact(session_id: str, run_id: str | None, summary: str, size: int = 10) -> ArtifactRecord:
    aid = new_id("artifact_")
    return ArtifactRecord(
        artifact_id=aid,
        session_id=session_id,
        run_id=run_id,
        path=f"artifacts/{aid}.txt",
        filename="out.txt",
        mime_type="text/plain",
        size_bytes=size,
        summary=summary,
        metadata_json='{"k":1}',
        created_at=format_ts(),
    )


async def test_artifact_metadata_round_trips_and_deletes(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = set_test_secret(monkeypatch)
    sid, aid = await new_session(store)
    rid = await new_run(store, sid, aid)
    big = _artifact(sid, rid, f"has {secret}", size=5 * 2**31)  # sizes beyond 32 bits
    other = _artifact(sid, None, "plain")
    await store.insert_artifact(big)
    await store.insert_artifact(other)
    got = await store.get_artifact(big.artifact_id)
    assert got is not None and got.size_bytes == 5 * 2**31 and got.summary == "has [REDACTED]"
    assert got.model_copy(update={"summary": big.summary}) == big
    assert [a.artifact_id for a in await store.list_artifacts(session_id=sid)] == [
        big.artifact_id,
        other.artifact_id,
    ]
    assert [a.artifact_id for a in await store.list_artifacts(run_id=rid)] == [big.artifact_id]
    assert await store.delete_artifact_row(big.artifact_id) is True
    assert await store.delete_artifact_row(big.artifact_id) is False
    assert await store.get_artifact(big.artifact_id) is None


async def test_delete_session_removes_its_rows_and_leaves_others(store: SessionStore) -> None:
    sid, aid = await new_session(store)
    keep, keep_agent = await new_session(store)
    rid = await new_run(store, sid, aid)
    n = node(aid, run_id=rid)
    await store.append(sid, nodes=[n], events=[event(n), event(agent_id=aid)])
    await store.append(keep, nodes=[node(keep_agent)])
    await store.insert_artifact(_artifact(sid, rid, "x"))
    counts = await store.delete_session_rows(sid)
    assert (counts.nodes, counts.events, counts.runs, counts.agents, counts.artifacts) == (1, 2, 1, 1, 1)
    assert await store.get_session(sid) is None and await store.get_run(rid) is None
    assert await store.list_artifacts(session_id=sid) == []
    assert await store.find_node_session(n.node_id) is None
    assert len(await store.list_nodes(keep)) == 1
    sid2, _ = await new_session(store)  # a new session after a delete starts its counters at 1
    res = await store.append(sid2, events=[event(event_type=EventType.loop_started)])
    assert res.events[0].seq == 1

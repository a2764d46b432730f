"""Conformance: sessions, agents and runs (every backend)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from agent_core._storage.protocol import SessionStore
from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.types.enums import AgentStatus, EndReason, RunStatus
from tests.conformance.conftest import make_store
from tests.conformance.helpers import new_agent, new_run, new_session
from tests.fixtures.storage_env import make_redactor


async def test_sessions_are_created_read_and_listed_newest_first(store: SessionStore) -> None:
    s1, a1 = await new_session(store, cwd="/one")
    s2, _ = await new_session(store, cwd="/two")
    got = await store.get_session(s1)
    assert got is not None and got.cwd == "/one" and got.root_agent_id == a1 and got.status == "active"
    assert [s.session_id for s in await store.list_sessions()][:2] == [s2, s1]
    assert await store.get_session("sess_missing") is None
    with pytest.raises(AgentCoreError) as info:
        await store.create_session(*_records_of(await store.get_session(s1), await store.get_agent(a1)))
    assert info.value.code == ErrorCode.validation_error


def _records_of(session: object, agent: object) -> tuple:  # type: ignore[type-arg]
    return session, agent


async def test_agents_and_runs_round_trip_and_update(store: SessionStore) -> None:
    sid, aid = await new_session(store)
    sub = await new_agent(store, sid)
    assert [a.agent_id for a in await store.list_agents(sid)] == [aid, sub]
    await store.update_agent(sub, status=AgentStatus.completed, result_json={"ok": True})
    got = await store.get_agent(sub)
    assert got is not None and got.status == AgentStatus.completed and got.result_json == '{"ok":true}'
    r1 = await new_run(store, sid, aid)
    r2 = await new_run(store, sid, sub, status=RunStatus.queued)
    assert [r.run_id for r in await store.list_runs(sid)] == [r1, r2]
    await store.update_run(r1, status=RunStatus.completed, end_reason=EndReason.completed, turn_count=3)
    run = await store.get_run(r1)
    assert run is not None and run.status == RunStatus.completed and run.end_reason == EndReason.completed
    assert run.turn_count == 3
    assert [r.run_id for r in await store.list_non_terminal_runs(sid)] == [r2]


async def test_invalid_writes_are_validation_errors_and_store_nothing(store: SessionStore) -> None:
    sid, aid = await new_session(store)
    with pytest.raises(AgentCoreError) as info:
        await store.update_run("run_missing", status=RunStatus.completed)
    assert info.value.code == ErrorCode.validation_error
    with pytest.raises(AgentCoreError) as info:
        await store.update_run("run_x", bogus=1)
    assert info.value.code == ErrorCode.validation_error
    with pytest.raises(AgentCoreError) as info:
        await new_run(store, sid, "agent_missing")
    assert info.value.code == ErrorCode.validation_error
    with pytest.raises(AgentCoreError) as info:
        await new_agent(store, "sess_missing")
    assert info.value.code == ErrorCode.validation_error
    assert await store.list_runs(sid) == []
    assert [a.agent_id for a in await store.list_agents(sid)] == [aid]


async def test_concurrent_run_metadata_merges_of_different_keys_all_survive(
    store: SessionStore, backend: str, tmp_path: Path
) -> None:
    """Two stores on one database (two processes) merge different keys into one run's metadata at once
    (the two sides of a dispatched worker run): no merge is lost, the keys stored before stay."""
    sid, aid = await new_session(store)
    run_id = await new_run(store, sid, aid)
    await store.update_run(run_id, metadata_json={"mode": "normal"})
    other = make_store(backend, tmp_path, make_redactor())
    await other.open()
    try:
        merges = [
            (store if i % 2 else other).merge_run_metadata(run_id, f"k{i}", {"i": i}) for i in range(16)
        ]
        await asyncio.gather(*merges)
    finally:
        await other.close()
    run = await store.get_run(run_id)
    assert run is not None and run.metadata_json is not None
    assert json.loads(run.metadata_json) == {"mode": "normal", **{f"k{i}": {"i": i} for i in range(16)}}
    await store.merge_run_metadata(run_id, "mode", "orchestrator")  # a key merged again is replaced
    run = await store.get_run(run_id)
    assert run is not None and json.loads(run.metadata_json or "{}")["mode"] == "orchestrator"
    with pytest.raises(AgentCoreError) as info:
        await store.merge_run_metadata("run_missing", "k", 1)
    assert info.value.code == ErrorCode.validation_error

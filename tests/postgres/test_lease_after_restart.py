"""A session lease across a real server restart
(docs/scale-out.md#2-production-postgresql-and-a-temporal-cluster: one running root run per session,
cluster-wide): the holder takes its lock again before its next write; when another process took it meanwhile,
the holder's run stops writing and ends ``failed`` (``session_active``) with its terminal events written
whole, while the other run completes; sequences stay contiguous."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from agent_core import RunStatus
from agent_core._redaction import Redactor
from agent_core._storage.drafts import EventDraft
from agent_core._storage.postgres.store import PostgresStorage
from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.types.enums import EventType
from tests.conformance.helpers import new_run, new_session
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, hang, text
from tests.fixtures.postgres_server import DSN_ENV
from tests.fixtures.runtime import collect, open_runtime
from tests.postgres.restartable import RestartableServer, restartable_postgres

pytestmark = pytest.mark.postgres

__all__ = ["restartable_postgres"]  # the fixture, imported for pytest


@pytest.fixture
def dsn(restartable_postgres: RestartableServer, monkeypatch: pytest.MonkeyPatch) -> str:
    dsn = restartable_postgres.server.new_schema()
    monkeypatch.setenv(DSN_ENV, dsn)
    return dsn


def _pg_config() -> dict[str, Any]:
    return {
        "storage": {"backend": "postgres", "postgres": {"dsn_env": DSN_ENV, "reconnect_timeout_ms": 30_000}}
    }


async def _hanging(fake: FakeProvider, run_id: str | None = None, session_id: str | None = None) -> None:
    """Until the run waits inside its model call and, given ``run_id``, its ``model_started`` (written
    while the request goes out, without waiting for the commit) is committed: a write still in flight at
    the restart would take the lease again first — correct, but not the case under test, and under load
    the commit of that early write could land after the restart (the test then waited for a lease the
    first runtime had legitimately taken back)."""
    async with asyncio.timeout(60):
        while fake.hanging < 1:
            await asyncio.sleep(0.02)
        if run_id is None or session_id is None:
            return
        probe = PostgresStorage(dsn_env=DSN_ENV, redactor=Redactor())
        await probe.open()
        try:
            while not any(
                e.run_id == run_id and e.event_type == EventType.model_started
                for e in await probe.list_events(session_id)
            ):
                await asyncio.sleep(0.05)
        finally:
            await probe.close()


@pytest.mark.timeout(180)
async def test_a_holder_takes_its_lease_again_before_its_next_write(
    restartable_postgres: RestartableServer, dsn: str
) -> None:
    a = PostgresStorage(dsn_env=DSN_ENV, redactor=Redactor(), reconnect_timeout_ms=30_000)
    b = PostgresStorage(dsn_env=DSN_ENV, redactor=Redactor(), reconnect_timeout_ms=30_000)
    await a.open()
    await b.open()
    try:
        sid, aid = await new_session(a)
        rid = await new_run(a, sid, aid)
        async with a.session_lease(sid):
            await asyncio.to_thread(restartable_postgres.restart)
            await a.append(sid, events=[_event(rid, 0)])  # the writer reconnects: the lease is taken again
            waiter = asyncio.create_task(b.session_lease(sid).__aenter__())
            await asyncio.sleep(1.0)
            assert not waiter.done(), "the lease is held again: the other store waits"
            await a.append(sid, events=[_event(rid, 1)])
        lease = await asyncio.wait_for(waiter, 30)  # released: the waiter gets it
        await lease.__aexit__(None, None, None)
        assert [e.seq for e in await a.list_events(sid)] == [1, 2]
    finally:
        await a.close()
        await b.close()


@pytest.mark.timeout(180)
async def test_a_lease_taken_by_another_store_refuses_all_but_the_runs_end(
    restartable_postgres: RestartableServer, dsn: str
) -> None:
    a = PostgresStorage(dsn_env=DSN_ENV, redactor=Redactor(), reconnect_timeout_ms=30_000)
    b = PostgresStorage(dsn_env=DSN_ENV, redactor=Redactor(), reconnect_timeout_ms=30_000)
    await a.open()
    await b.open()
    try:
        sid, aid = await new_session(a)
        rid = await new_run(a, sid, aid)
        async with a.session_lease(sid):
            await asyncio.to_thread(restartable_postgres.restart)
            async with asyncio.timeout(30), b.session_lease(sid):  # A's lock went with the server
                with pytest.raises(AgentCoreError) as info:
                    await a.append(sid, events=[_event(rid, 0)])
                assert info.value.code == ErrorCode.session_active
                assert info.value.details["session_id"] == sid
                # the run's end is still written, whole
                await a.append(
                    sid,
                    events=[_event(rid, 1)],
                    run_update=(rid, {"status": RunStatus.failed.value}),
                )
                await b.append(sid, events=[_event(rid, 2)])
        events = await a.list_events(sid)
        assert [(e.seq, e.data["k"]) for e in events] == [(1, 1), (2, 2)], "nothing half-written"
        run = await a.get_run(rid)
        assert run is not None and run.status == RunStatus.failed
        async with a.session_lease(sid):  # a new lease of the same session writes again
            await a.append(sid, events=[_event(rid, 3)])
    finally:
        await a.close()
        await b.close()


@pytest.mark.timeout(300)
async def test_two_runtimes_never_run_one_session_at_once_across_a_restart(
    restartable_postgres: RestartableServer, dsn: str, soong_env: SoongEnv
) -> None:
    gate_a, gate_b = asyncio.Event(), asyncio.Event()
    fake_a = FakeProvider(text("a0"), hang(gate_a, then=text("a-late")))
    fake_b = FakeProvider(hang(gate_b, then=text("b-answer")))
    async with contextlib.AsyncExitStack() as stack:
        rt_a = await stack.enter_async_context(open_runtime(soong_env, fake_a, config=_pg_config()))
        rt_b = await stack.enter_async_context(open_runtime(soong_env, fake_b, write_config=False))
        first = await rt_a.start("zero")
        await collect(first, timeout=60)
        sid = first.session_id
        run_a = await rt_a.start("one", session_id=sid)
        await _hanging(fake_a, run_a.run_id, sid)  # A holds the session's lease, inside its model call
        await asyncio.to_thread(restartable_postgres.restart)
        run_b = await rt_b.start("two", session_id=sid)  # another process: its lease is free now
        await _hanging(fake_b)  # B runs
        gate_a.set()  # A's answer arrives: its writer reconnects and finds the lease taken
        await collect(run_a, timeout=90)
        assert run_a.status == RunStatus.failed
        assert run_a.error is not None and run_a.error.code == ErrorCode.session_active
        gate_b.set()
        await collect(run_b, timeout=90)
        assert run_b.status == RunStatus.completed, run_b.error
    store = PostgresStorage(dsn_env=DSN_ENV, redactor=Redactor())
    await store.open()
    try:
        nodes = await store.list_nodes(sid)
        texts = [n.content[0].text for n in nodes]  # type: ignore[union-attr]
        assert "a-late" not in texts, "A wrote nothing after B took the session"
        assert texts[-2:] == ["two", "b-answer"]
        assert [n.node_seq for n in nodes] == list(range(1, len(nodes) + 1))
        events = await store.list_events(sid)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        b_start = min(e.seq for e in events if e.run_id == run_b.run_id)
        late_a = {e.event_type for e in events if e.run_id == run_a.run_id and e.seq > b_start}
        assert late_a <= {"error", "loop_failed"}, f"A wrote beside B: {late_a}"
        runs = {r.run_id: r.status for r in await store.list_runs(sid)}
        assert runs[run_a.run_id] == RunStatus.failed and runs[run_b.run_id] == RunStatus.completed
        assert all(RunStatus(s).terminal for s in runs.values())
    finally:
        await store.close()


def _event(run_id: str, k: int) -> EventDraft:
    return EventDraft(event_type=EventType.loop_started, run_id=run_id, payload={"k": k})

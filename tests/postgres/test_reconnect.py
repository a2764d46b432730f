"""Lost connections on ``[storage] backend = "postgres"``: after a real server restart the store and a
runtime reconnect (the next run succeeds, nothing duplicated or lost); a transaction interrupted by the
loss runs again whole; with the server down, calls fail with a structured error naming the DSN
variable and never showing the password."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import psycopg
import pytest

from agent_core import RunStatus
from agent_core._redaction import Redactor
from agent_core._storage.drafts import EventDraft
from agent_core._storage.postgres.store import PostgresStorage
from agent_core._storage.writer import Txn
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

PASSWORD = "pw-n0t-pr1nted"


@pytest.fixture
def dsn(restartable_postgres: RestartableServer, monkeypatch: pytest.MonkeyPatch) -> str:
    dsn = f"{restartable_postgres.server.new_schema()} password={PASSWORD}"
    monkeypatch.setenv(DSN_ENV, dsn)
    return dsn


def _pg_config(timeout_ms: int = 30_000) -> dict[str, Any]:
    return {
        "storage": {
            "backend": "postgres",
            "postgres": {"dsn_env": DSN_ENV, "reconnect_timeout_ms": timeout_ms},
        }
    }


@pytest.mark.timeout(180)
async def test_a_store_recovers_after_a_server_restart(
    restartable_postgres: RestartableServer, dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = PostgresStorage(dsn_env=DSN_ENV, redactor=Redactor(), reconnect_timeout_ms=30_000)
    await store.open()
    try:
        sid, aid = await new_session(store)
        rid = await new_run(store, sid, aid)
        await store.append(sid, events=[_event(rid, 0)])
        await asyncio.to_thread(restartable_postgres.restart)
        with caplog.at_level(logging.WARNING, logger="agent_core._storage.postgres.connection"):
            await store.append(sid, events=[_event(rid, 1)])  # the writer reconnects
            runs = await store.list_runs(sid)  # the reader reconnects
        assert [r.run_id for r in runs] == [rid]
        events = await store.list_events(sid)
        assert [e.data.get("k") for e in events] == [0, 1], "nothing lost or duplicated"
        assert [e.seq for e in events] == [1, 2]
        assert any("re-established" in r.getMessage() for r in caplog.records)
        assert PASSWORD not in caplog.text
        # the store's runs still count as live for other processes (its owner lock was taken again)
        other = PostgresStorage(dsn_env=DSN_ENV, redactor=Redactor())
        await other.open()
        try:
            assert await other.runs_live_elsewhere([rid]) == {rid}
        finally:
            await other.close()
    finally:
        await store.close()


async def test_a_transaction_interrupted_by_a_lost_connection_runs_again_whole(dsn: str) -> None:
    store = PostgresStorage(dsn_env=DSN_ENV, redactor=Redactor(), reconnect_timeout_ms=30_000)
    await store.open()
    attempts: list[int] = []

    def op(txn: Txn) -> int:
        attempts.append(1)
        txn.execute("INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)", (9001, "x"))
        if len(attempts) == 1:  # the server drops this connection mid-transaction
            pid = txn.scalar("SELECT pg_backend_pid()")
            with psycopg.connect(dsn, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            txn.execute("SELECT 1")
        return len(attempts)

    try:
        assert await store.write(op) == 2
        rows = await store.query("SELECT version FROM schema_migrations WHERE version = 9001")
        assert rows == [(9001,)], "the first attempt left nothing behind, the second committed once"
    finally:
        await store.close()


@pytest.mark.timeout(240)
async def test_a_runtime_continues_a_session_across_a_server_restart(
    restartable_postgres: RestartableServer, dsn: str, soong_env: SoongEnv
) -> None:
    gate = asyncio.Event()
    fake = FakeProvider(text("first"), hang(gate, then=text("second")), text("third"))
    async with open_runtime(soong_env, fake, config=_pg_config()) as rt:
        run1 = await rt.start("one")
        await collect(run1, timeout=60)
        assert run1.status == RunStatus.completed
        # a run in flight (in its model call) while the server restarts still ends, completed
        run2 = await rt.start("two", session_id=run1.session_id)
        async with asyncio.timeout(30):
            while len(fake.requests) < 2:
                await asyncio.sleep(0.02)
        await asyncio.to_thread(restartable_postgres.restart)
        gate.set()
        await collect(run2, timeout=90)
        assert run2.status == RunStatus.completed, run2.error
        await asyncio.to_thread(restartable_postgres.restart)
        run3 = await rt.start("three", session_id=run1.session_id)  # the next run succeeds
        await collect(run3, timeout=90)
        assert run3.status == RunStatus.completed, run3.error
        replay = await rt.replay_session(run1.session_id)
    assert [r.status for r in replay.runs] == [RunStatus.completed] * 3
    store = PostgresStorage(dsn_env=DSN_ENV, redactor=Redactor())
    await store.open()
    try:
        nodes = await store.list_nodes(run1.session_id)
        assert [(n.role, n.content[0].text) for n in nodes] == [  # type: ignore[union-attr]
            ("user", "one"),
            ("assistant", "first"),
            ("user", "two"),
            ("assistant", "second"),
            ("user", "three"),
            ("assistant", "third"),
        ], "nothing duplicated or lost"
        assert [n.node_seq for n in nodes] == list(range(1, 7))
        events = await store.list_events(run1.session_id)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert [e.event_type for e in events].count("loop_completed") == 3
    finally:
        await store.close()


@pytest.mark.timeout(180)
async def test_with_the_server_down_calls_fail_with_a_structured_error_then_recover(
    restartable_postgres: RestartableServer, dsn: str, soong_env: SoongEnv
) -> None:
    fake = FakeProvider(text("first"), text("after the outage"))
    async with open_runtime(soong_env, fake, config=_pg_config(timeout_ms=1500)) as rt:
        run1 = await rt.start("one")
        await collect(run1, timeout=60)
        await asyncio.to_thread(restartable_postgres.stop)
        try:
            with pytest.raises(AgentCoreError) as info:
                await rt.list_sessions()
        finally:
            await asyncio.to_thread(restartable_postgres.start)
        error = info.value
        assert error.code == ErrorCode.storage_error
        assert f"${DSN_ENV}" in error.message and error.details["env"] == DSN_ENV
        assert error.details["config_key"] == "storage.postgres.reconnect_timeout_ms"
        assert PASSWORD not in error.message and PASSWORD not in repr(error.details)
        assert PASSWORD not in repr(error.to_payload())
        run2 = await rt.start("two", session_id=run1.session_id)  # the server is back: runs work again
        await collect(run2, timeout=90)
        assert run2.status == RunStatus.completed, run2.error


def _event(run_id: str, k: int) -> EventDraft:
    return EventDraft(event_type=EventType.loop_started, run_id=run_id, payload={"k": k})

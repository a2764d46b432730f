"""Writes are fenced by the session lease (docs/scale-out.md#2-production-postgresql-and-a-temporal-cluster):
a store whose lease another process took over (here: its lease connection was ended, so the lock went with it,
and another store took the lease) can no longer append Task WAL records, update its runs or append nodes and
events, even though it never noticed; each refusal is ``session_active`` with the lease's owner and epoch, the
current ones and the config key, and nothing of the refused write is stored."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest

from agent_core._redaction import Redactor
from agent_core._storage.postgres.connection import RECONNECT_CONFIG_KEY
from agent_core._storage.postgres.lease import LEASE_NAMESPACE
from agent_core._storage.postgres.store import PostgresStorage
from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.types.enums import EventType
from tests.conformance.helpers import event, new_run, new_session, node
from tests.fixtures.postgres_server import DSN_ENV
from tests.fixtures.task_harness import ManualClock, TaskHarness, claim, create, step

pytestmark = pytest.mark.postgres


@pytest.fixture
async def stores(postgres_dsn: str) -> AsyncIterator[list[PostgresStorage]]:
    """Two stores on one database: what two runtime processes would open."""
    opened = [PostgresStorage(dsn_env=DSN_ENV, redactor=Redactor()) for _ in range(2)]
    for store in opened:
        await store.open()
    yield opened
    for store in opened:
        await store.close()


def _end_lease_connection(dsn: str, session_id: str) -> None:
    """Ends the backend holding ``session_id``'s lease lock (as a network cut would): the lock is free."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid::bigint = %s"
            " AND objid = hashtext(%s)::oid AND objsubid = 2",
            (LEASE_NAMESPACE, session_id),
        ).fetchall()
        assert len(rows) == 1, rows
        conn.execute("SELECT pg_terminate_backend(%s)", (rows[0][0],))


def _wal_rows(dsn: str) -> list[tuple[int, str]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute("SELECT wal_seq, event_type FROM task_wal ORDER BY wal_path, wal_seq").fetchall()
    return [(int(r[0]), str(r[1])) for r in rows]


def _assert_taken_over(exc: AgentCoreError, session_id: str) -> None:
    assert exc.code == ErrorCode.session_active, exc
    assert exc.details["session_id"] == session_id
    assert exc.details["config_key"] == RECONNECT_CONFIG_KEY
    assert exc.details["lease_owner"] and exc.details["lease_epoch"] >= 1


async def test_a_store_whose_lease_was_taken_over_cannot_write_the_task_wal_or_its_runs(
    stores: list[PostgresStorage], postgres_dsn: str, tmp_path: Path
) -> None:
    a, b = stores
    sid, aid = await new_session(a)
    rid = await new_run(a, sid, aid)
    async with contextlib.AsyncExitStack() as held:
        lease_a = await held.enter_async_context(a.session_lease(sid))
        harness = TaskHarness(
            project=tmp_path.resolve(), session_id=sid, clock=ManualClock(), writer=a.task_wal_writer()
        )
        await create(harness, step("a"), step("b"))  # while the lease is a's, its writes go through
        await a.update_run(rid, metadata_json={"turn": 1})
        stored = _wal_rows(postgres_dsn)

        await asyncio.to_thread(_end_lease_connection, postgres_dsn, sid)
        async with asyncio.timeout(30):  # the server frees the lock as the backend exits
            lease_b = await held.enter_async_context(b.session_lease(sid))
        assert lease_b.epoch == lease_a.epoch + 1  # type: ignore[attr-defined]

        # a never noticed (its writer connection is fine), but every write of the session is refused
        worker = harness.worker("t1", name="w1")
        exc = await harness.err(worker, "agent.task_claim_step", task_id="t1", step_id="a")
        _assert_taken_over(exc, sid)
        assert exc.details["current_epoch"] == lease_b.epoch  # type: ignore[attr-defined]
        assert _wal_rows(postgres_dsn) == stored, "nothing of the refused Task WAL commit is stored"
        failed = harness.events(worker, EventType.task_wal_failed)
        assert failed and failed[-1].payload["error"]["code"] == "session_active"
        dag = next(d for d in harness.service.active_dags() if d.task_id == "t1")
        held_step = dag.step("a")
        assert held_step is not None and held_step.status.value == "ready", "memory is unchanged"

        with pytest.raises(AgentCoreError) as refused:
            await a.update_run(rid, metadata_json={"turn": 2})
        _assert_taken_over(refused.value, sid)  # known lost now: refused before any round trip
        record = await a.get_run(rid)
        assert record is not None and json.loads(record.metadata_json or "") == {"turn": 1}, "unchanged"

        draft = node(aid, "late")
        with pytest.raises(AgentCoreError) as refused:
            await a.append(sid, nodes=[draft], events=[event(draft)])
        _assert_taken_over(refused.value, sid)
        assert await a.list_nodes(sid) == [], "no node of the refused append is stored"

        # only the run's end is still written (it ends failed and never writes beside b's run)
        await a.update_run(rid, status="failed")

        # b, the holder now, writes as usual: the step a refused is claimed once, by b
        harness_b = TaskHarness(
            project=tmp_path.resolve(), session_id=sid, clock=ManualClock(), writer=b.task_wal_writer()
        )
        await claim(harness_b, "a", name="w2")
        await b.update_run(rid, metadata_json={"turn": 3})
        claims = [r for r in _wal_rows(postgres_dsn) if r[1] == "task_step_claimed"]
        assert len(claims) == 1


async def test_the_first_write_after_a_takeover_reads_the_fencing_token_in_its_own_transaction(
    stores: list[PostgresStorage], postgres_dsn: str
) -> None:
    a, b = stores
    sid, aid = await new_session(a)
    rid = await new_run(a, sid, aid)
    async with contextlib.AsyncExitStack() as held:
        await held.enter_async_context(a.session_lease(sid))
        await asyncio.to_thread(_end_lease_connection, postgres_dsn, sid)
        async with asyncio.timeout(30):
            lease_b = await held.enter_async_context(b.session_lease(sid))
        with pytest.raises(AgentCoreError) as refused:
            await a.update_run(rid, status="running", metadata_json={"late": True})
        _assert_taken_over(refused.value, sid)
        assert refused.value.details["current_epoch"] == lease_b.epoch  # type: ignore[attr-defined]
        assert refused.value.details["current_owner"] == lease_b.owner  # type: ignore[attr-defined]
        record = await b.get_run(rid)
        assert record is not None and record.metadata_json is None
    # released by both: a later lease of a is a new epoch, and its writes go through again
    async with a.session_lease(sid):
        await a.update_run(rid, metadata_json={"turn": 2})

"""Runtimes on ``[storage] backend = "postgres"``: several runtimes (as separate processes would) share one
database; one root run runs per session cluster-wide, in FIFO order, and nobody recovers a live run."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack

import pytest

from agent_core import RunStatus
from agent_core._redaction import Redactor
from agent_core._storage.postgres.store import PostgresStorage
from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.types.enums import EventType
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, hang, text, tool_calls
from tests.fixtures.orchestrator import Router, create_args, roomy, step
from tests.fixtures.postgres_server import DSN_ENV
from tests.fixtures.runtime import collect, open_runtime, types

pytestmark = pytest.mark.postgres

PG_CONFIG = {"storage": {"backend": "postgres", "postgres": {"dsn_env": DSN_ENV}}}


async def _until(predicate: object, timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():  # type: ignore[operator]
            await asyncio.sleep(0.01)


async def test_two_runtimes_run_one_session_one_root_run_at_a_time(
    soong_env: SoongEnv, postgres_dsn: str
) -> None:
    gate = asyncio.Event()
    fake1 = FakeProvider(hang(gate, then=text("first done")))
    fake2 = FakeProvider(text("second done"))
    async with AsyncExitStack() as stack:
        rt1 = await stack.enter_async_context(open_runtime(soong_env, fake1, config=PG_CONFIG))
        rt2 = await stack.enter_async_context(open_runtime(soong_env, fake2, write_config=False))
        run1 = await rt1.start("one")
        await _until(lambda: len(fake1.requests) == 1)
        run2 = await rt2.start("two", session_id=run1.session_id)  # loads the session from the shared store
        await asyncio.sleep(0.5)
        assert fake2.requests == [], "the second runtime waits for the session's running root run"
        assert run1.status == RunStatus.running, "loading the session did not 'recover' a live run"
        gate.set()
        events1 = await collect(run1)
        events2 = await collect(run2)
    assert run1.status == RunStatus.completed and run2.status == RunStatus.completed
    assert "loop_failed" not in types(events1)
    first_end = events1[-1].seq or 0
    loop2 = next(e for e in events2 if e.event_type == EventType.loop_started)
    assert (loop2.seq or 0) > first_end, "the second run started after the first one ended"
    store = PostgresStorage(dsn_env=DSN_ENV, redactor=Redactor())
    await store.open()
    try:
        events = await store.list_events(run1.session_id)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        nodes = await store.list_nodes(run1.session_id)
        users = [n for n in nodes if n.role == "user"]
        assistants = [n for n in nodes if n.role == "assistant"]
        # the second runtime continued from the first runtime's answer, not from its stale view
        assert users[1].parent_id == assistants[0].node_id
        assert [n.node_seq for n in nodes] == list(range(1, len(nodes) + 1))
    finally:
        await store.close()


async def test_a_missing_dsn_variable_is_a_structured_error(
    soong_env: SoongEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(DSN_ENV, raising=False)
    with pytest.raises(AgentCoreError) as info:
        async with open_runtime(soong_env, FakeProvider(), config=PG_CONFIG):
            pass
    assert info.value.code == ErrorCode.storage_error
    assert info.value.details["config_key"] == "storage.postgres.dsn_env"
    assert DSN_ENV in info.value.message


async def test_an_unreachable_server_never_shows_the_dsn(
    soong_env: SoongEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "hunter2-s3cr3t"
    monkeypatch.setenv(DSN_ENV, f"host=127.0.0.1 port=1 user=u password={secret} connect_timeout=2")
    with pytest.raises(AgentCoreError) as info:
        async with open_runtime(soong_env, FakeProvider(), config=PG_CONFIG):
            pass
    assert info.value.code == ErrorCode.storage_error
    assert secret not in str(info.value) and secret not in repr(info.value.details)
    monkeypatch.setenv(DSN_ENV, f"not a dsn {secret}")
    with pytest.raises(AgentCoreError) as info:
        async with open_runtime(soong_env, FakeProvider(), config=PG_CONFIG):
            pass
    assert secret not in str(info.value)


async def test_a_run_waiting_for_the_session_lease_can_be_cancelled(
    soong_env: SoongEnv, postgres_dsn: str
) -> None:
    gate = asyncio.Event()
    fake1 = FakeProvider(hang(gate, then=text("first done")))
    fake2 = FakeProvider(strict=False)
    async with AsyncExitStack() as stack:
        rt1 = await stack.enter_async_context(
            open_runtime(soong_env, fake1, config={**PG_CONFIG, "runtime": {"cancel_timeout_ms": 5000}})
        )
        rt2 = await stack.enter_async_context(open_runtime(soong_env, fake2, write_config=False))
        run1 = await rt1.start("one")
        await _until(lambda: len(fake1.requests) == 1)
        run2 = await rt2.start("two", session_id=run1.session_id)
        await asyncio.sleep(0.3)
        result = await run2.cancel()
        assert result.cancelled and not result.timed_out and run2.status == RunStatus.cancelled
        assert fake2.requests == [] and run1.status == RunStatus.running
        gate.set()
        await collect(run1)
        assert run1.status == RunStatus.completed
        fake2.script(text("third done"))
        run3 = await rt2.start("three", session_id=run1.session_id)  # the withdrawn waiter holds nothing
        await asyncio.wait_for(collect(run3), 20)
        assert run3.status == RunStatus.completed


async def test_replay_in_another_runtime_reads_the_task_board_from_the_table(
    soong_env: SoongEnv, postgres_dsn: str
) -> None:
    """``replay_session`` in a runtime that never loaded the session's Task board reads its Tasks from the
    postgres ``task_wal`` table (it once built a JSONL reader there and showed no Task)."""
    fake = FakeProvider()
    Router(fake).orch(
        tool_calls(("agent.task_create", create_args("t1", step("s1")), "c1")),
        text("created"),
    )
    async with open_runtime(soong_env, fake, config=roomy(PG_CONFIG)) as rt1:
        run = await rt1.start("plan it", mode="orchestrator")
        await collect(run)
        assert run.status == RunStatus.completed
        local = await rt1.replay_session(run.session_id)
    async with open_runtime(soong_env, FakeProvider(), write_config=False) as rt2:
        remote = await rt2.replay_session(run.session_id)
    assert [t.task_id for t in local.tasks] == ["t1"]
    assert [(t.task_id, t.status) for t in remote.tasks] == [(t.task_id, t.status) for t in local.tasks]
    assert remote.tasks[0].wal_events, "the WAL records were read back from the table"

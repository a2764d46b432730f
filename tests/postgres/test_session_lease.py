"""Cluster-wide session leases and run ownership on a shared PostgreSQL store
(docs/scale-out.md#2-production-postgresql-and-a-temporal-cluster)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from agent_core._redaction import Redactor
from agent_core._storage.postgres.store import PostgresStorage
from tests.conformance.helpers import new_run, new_session
from tests.fixtures.postgres_server import DSN_ENV

pytestmark = pytest.mark.postgres


@pytest.fixture
async def stores(postgres_dsn: str) -> AsyncIterator[list[PostgresStorage]]:
    """Three stores on one database: what three runtime processes would open."""
    opened = [PostgresStorage(dsn_env=DSN_ENV, redactor=Redactor()) for _ in range(3)]
    for store in opened:
        await store.open()
    yield opened
    for store in opened:
        await store.close()


async def test_one_lease_holder_per_session_and_waiters_in_fifo_order(stores: list[PostgresStorage]) -> None:
    a, b, c = stores
    order: list[str] = []
    release = {name: asyncio.Event() for name in "abc"}

    async def run(store: PostgresStorage, name: str) -> None:
        async with store.session_lease("sess_shared"):
            order.append(f"{name}+")
            await release[name].wait()
            order.append(f"{name}-")

    first = asyncio.create_task(run(a, "a"))
    while order != ["a+"]:
        await asyncio.sleep(0.01)
    second = asyncio.create_task(run(b, "b"))
    await asyncio.sleep(0.3)  # b is queued on the server before c
    third = asyncio.create_task(run(c, "c"))
    await asyncio.sleep(0.3)
    async with a.session_lease("sess_other"):  # other sessions are not blocked
        pass
    assert order == ["a+"], "nobody else holds the lease while a runs"
    for name in "abc":
        release[name].set()
    await asyncio.wait_for(asyncio.gather(first, second, third), 30)
    assert order == ["a+", "a-", "b+", "b-", "c+", "c-"]


async def test_a_cancelled_waiter_withdraws_its_request(stores: list[PostgresStorage]) -> None:
    a, b, c = stores
    held = asyncio.Event()
    done = asyncio.Event()

    async def hold() -> None:
        async with a.session_lease("sess_x"):
            held.set()
            await done.wait()

    holder = asyncio.create_task(hold())
    await held.wait()
    waiter = asyncio.create_task(b.session_lease("sess_x").__aenter__())
    await asyncio.sleep(0.3)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    done.set()
    await holder
    async with asyncio.timeout(10):  # the cancelled request holds nothing: c gets the lease at once
        async with c.session_lease("sess_x"):
            pass


async def test_runs_of_a_live_store_are_not_orphans_until_it_closes(stores: list[PostgresStorage]) -> None:
    a, b, _ = stores
    sid, aid = await new_session(a)
    rid = await new_run(a, sid, aid)
    assert await b.runs_live_elsewhere([rid]) == {rid}
    assert await a.runs_live_elsewhere([rid]) == set(), "its own runs are not 'elsewhere'"
    other, other_agent = await new_session(a)
    gone = await new_run(a, other, other_agent)
    await a.delete_session_rows(other)
    assert await a.query("SELECT run_id FROM run_owners ORDER BY run_id") == [(rid,)], (
        "owners of deleted runs go"
    )
    assert gone not in await b.runs_live_elsewhere([gone])
    await a.close()
    async with asyncio.timeout(10):  # the server ends the closed connection's backend asynchronously
        while await b.runs_live_elsewhere([rid]):
            await asyncio.sleep(0.05)

"""Conformance: several stores (processes) on one database (issue 40; every backend) — the session lease
names its holder, another store's writes are noticed, run owners tell live runs from orphans."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agent_core._storage.protocol import SessionStore
from tests.conformance.conftest import make_store
from tests.conformance.helpers import new_run, new_session
from tests.fixtures.storage_env import make_redactor


async def test_session_busy_names_the_lease_holder_and_is_none_when_the_lease_is_free(
    store: SessionStore,
) -> None:
    sid, _ = await new_session(store)
    other, _ = await new_session(store)
    assert await store.session_busy(sid) is None
    async with store.session_lease(sid):
        assert await store.session_busy(sid)
        assert await store.session_busy(other) is None
    assert await store.session_busy(sid) is None


async def test_another_stores_writes_are_noticed_and_its_runs_are_live_until_it_closes(
    store: SessionStore, backend: str, tmp_path: Path
) -> None:
    sid, aid = await new_session(store)
    mine = await new_run(store, sid, aid)
    before = await store.writes_elsewhere()
    second = make_store(backend, tmp_path, make_redactor())
    await second.open()
    try:
        theirs = await new_run(second, sid, aid)
        assert await store.writes_elsewhere() != before
        assert await store.runs_live_elsewhere([mine, theirs]) == {theirs}
        assert await second.runs_live_elsewhere([mine, theirs]) == {mine}
    finally:
        await second.close()
    for _ in range(100):  # PostgreSQL drops a closed store's owner lock when its server process ends
        if await store.runs_live_elsewhere([mine, theirs]) == set():
            break
        await asyncio.sleep(0.05)
    assert await store.runs_live_elsewhere([mine, theirs]) == set()

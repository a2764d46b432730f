"""Several runtime processes on one PostgreSQL database (docs/storage.md#backends): contiguous sequences, no
lost event, one store per process."""

from __future__ import annotations

import asyncio
import os
import sys
from collections import Counter
from pathlib import Path

import pytest

from agent_core._redaction import Redactor
from agent_core._storage.postgres.store import PostgresStorage
from tests.conformance.helpers import new_run, new_session
from tests.fixtures.postgres_server import DSN_ENV

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[2]


async def _spawn(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        *args,
        cwd=ROOT,
        env=dict(os.environ),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


@pytest.mark.timeout(180)
@pytest.mark.slow
async def test_processes_appending_to_one_session_keep_sequences_contiguous(postgres_dsn: str) -> None:
    store = PostgresStorage(dsn_env=DSN_ENV, redactor=Redactor())
    await store.open()
    try:
        sid, aid = await new_session(store)
        runs = [await new_run(store, sid, aid) for _ in range(2)]
        procs, appends = 6, 40
        children = [
            await _spawn("tests.postgres.append_child", sid, aid, runs[k % 2], str(appends), f"p{k}")
            for k in range(procs)
        ]
        for child in children:
            out, err = await child.communicate()
            assert child.returncode == 0, err.decode()
            assert out.decode().strip() == f"DONE {appends}"
        nodes = await store.list_nodes(sid)
        assert [n.node_seq for n in nodes] == list(range(1, procs * appends + 1))
        events = await store.list_events(sid)
        assert [e.seq for e in events] == list(range(1, 2 * procs * appends + 1)), "a gap or a lost event"
        for rid in runs:
            assert [e.run_seq for e in await store.list_events(sid, run_id=rid)] == list(
                range(1, procs // 2 * appends + 1)
            )
        tags = Counter(e.data["tag"] for e in events if "tag" in e.data)
        assert tags == {f"p{k}": appends for k in range(procs)}
        # each process's own appends keep their order
        for k in range(procs):
            mine = [e.data["k"] for e in events if e.data.get("tag") == f"p{k}"]
            assert mine == list(range(appends))
        session = await store.get_session(sid)
        assert session is not None and session.active_node_id in {n.node_id for n in nodes}
    finally:
        await store.close()


async def test_stores_in_two_processes_see_each_others_sessions(postgres_dsn: str) -> None:
    a = PostgresStorage(dsn_env=DSN_ENV, redactor=Redactor())
    b = PostgresStorage(dsn_env=DSN_ENV, redactor=Redactor())
    await asyncio.gather(a.open(), b.open())  # concurrent migrations apply once
    try:
        sid, aid = await new_session(a)
        rid = await new_run(b, sid, aid)
        assert (await a.get_run(rid)) is not None
        assert [s.session_id for s in await b.list_sessions()] == [sid]
        await b.delete_session_rows(sid)
        assert await a.get_session(sid) is None
    finally:
        await asyncio.gather(a.close(), b.close())

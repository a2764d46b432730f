"""A process that loaded a session while another process ran it recovers the session when that process
dies mid tool call, before its own next run's model request (docs/scale-out.md#3-what-a-workflow-does crash
semantics)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agent_core import RunStatus
from agent_core._redaction import Redactor
from agent_core._storage.postgres.store import PostgresStorage
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, text
from tests.fixtures.postgres_server import DSN_ENV
from tests.fixtures.runtime import collect, open_runtime

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PG_CONFIG = {"storage": {"backend": "postgres", "postgres": {"dsn_env": DSN_ENV}}}


def _start_owner(env: SoongEnv) -> tuple[subprocess.Popen[str], str]:
    """Process A: runs a session on postgres and hangs inside a tool call (``READY <session_id>``)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fixtures.crash_child", str(env.home), str(env.project)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("READY "), line
    return proc, line.split()[1]


@pytest.mark.timeout(180)
async def test_a_run_waiting_for_a_killed_owner_recovers_the_session_first(
    soong_env: SoongEnv, postgres_dsn: str
) -> None:
    soong_env.write_config(**PG_CONFIG)
    owner, session_id = _start_owner(soong_env)
    try:
        fake = FakeProvider(text("recovered"))
        async with open_runtime(soong_env, fake, write_config=False) as rt:
            # B loads the session while A owns its run: nothing is recovered, B's run waits for the lease
            run = await rt.start("continue", session_id=session_id)
            await asyncio.sleep(1.0)
            assert fake.requests == [], "B's run must wait for A's running root run"
            owner.send_signal(signal.SIGKILL)
            owner.wait(10)
            await collect(run, timeout=60)
            assert run.status == RunStatus.completed, run.error
            replay = await rt.replay_session(session_id)
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait(10)
    statuses = [r.status for r in replay.runs]
    assert statuses == [RunStatus.failed, RunStatus.completed], "A's orphaned run is terminal"
    assert len(fake.requests) == 1
    request = fake.requests[0]
    calls = [b.tool_call_id for m in request.messages for b in m.content if b.type == "tool_call"]
    results = {b.tool_call_id: b for m in request.messages for b in m.content if b.type == "tool_result"}
    assert sorted(calls) == ["call_fast", "call_hang"] == sorted(results), "every tool call has its result"
    assert not results["call_fast"].is_error, "the completed call keeps its real result"
    hung = results["call_hang"]
    assert hung.is_error and hung.error is not None and hung.error.type == "interrupted"
    store = PostgresStorage(dsn_env=DSN_ENV, redactor=Redactor())
    await store.open()
    try:
        nodes = await store.list_nodes(session_id)
        tool_results = [b.tool_call_id for n in nodes for b in n.content if b.type == "tool_result"]
        assert sorted(tool_results) == ["call_fast", "call_hang"], "nothing duplicated"
        events = await store.list_events(session_id)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert [e.event_type for e in events].count("loop_failed") == 1
    finally:
        await store.close()

"""A session whose process was killed mid-turn is repaired when it is loaded again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from agent_core import RunStatus
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, text
from tests.fixtures.runtime import collect, open_runtime, rows

ROOT = Path(__file__).resolve().parents[2]


def start_child(env: SoongEnv) -> tuple[subprocess.Popen[str], str]:
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


async def test_killed_run_is_closed_and_dangling_call_gets_an_interrupted_result(soong_env: SoongEnv) -> None:
    soong_env.write_config()
    proc, session_id = start_child(soong_env)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    before = rows(soong_env, "SELECT status FROM runs WHERE session_id = ?", session_id)
    assert [r["status"] for r in before] == ["running"]
    fake = FakeProvider(text("recovered"))
    async with open_runtime(soong_env, fake, write_config=False) as rt:
        run = await rt.start("continue", session_id=session_id)
        await collect(run)
        assert run.status == RunStatus.completed, run.error
        replay = await rt.replay_session(session_id)
    statuses = {r.run_id: r.status for r in replay.runs}
    assert list(statuses.values()).count(RunStatus.failed) == 1
    request = fake.requests[0]
    calls = {b.tool_call_id for m in request.messages for b in m.content if b.type == "tool_call"}
    results = {b.tool_call_id: b for m in request.messages for b in m.content if b.type == "tool_result"}
    assert calls == {"call_fast", "call_hang"} == set(results)
    interrupted = results["call_hang"]
    assert interrupted.is_error and interrupted.error is not None and interrupted.error.type == "interrupted"
    assert not results["call_fast"].is_error

"""Superseded work of a frozen worker (docs/scale-out.md#3-what-a-workflow-does crash semantics; issue 21).

A worker frozen (SIGSTOP: what a starved process on a loaded machine looks like) past its heartbeat
timeout loses its activity, which Temporal retries on another worker, while the frozen one still holds the
work in memory and resumes it when it is continued:

* a tool call: the retry on the other worker waits on the call's claim in the store while the frozen
  worker is alive, the resumed worker completes the call, and the call is executed exactly once;
* a model step: the retry waits until the resumed worker stopped its superseded attempt (cancelled, and
  recorded in the store), so that attempt writes nothing after its successor started.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from agent_core import AgentRuntime, RunStatus
from agent_core.testing import ScriptedOpenAIServer, ScriptedRequest
from agent_core.types.base import parse_ts
from tests.engine._temporal_harness import (
    CALLS,
    Model,
    Worker,
    assert_each_call_ran_once,
    model_server,
    run_summary,
    start_worker,
    stop_workers,
    tool_log,
    wait_for,
    worker_env,
)
from tests.fixtures.env import SoongEnv
from tests.fixtures.runtime import rows
from tests.fixtures.temporal_server import TemporalServer

pytestmark = pytest.mark.temporal

__all__ = ["model_server"]  # the fixture, imported for pytest

FROZEN_S = 4.0
"""How long the first worker stays frozen: past the heartbeat timeout (1.5 s), so its activity is lost."""


def starts(env: SoongEnv, n: int) -> int:
    return sum(1 for line in tool_log(env) if line.startswith(f"start {n} "))


@pytest.mark.timeout(300)
async def test_a_tool_call_of_a_frozen_worker_retried_on_another_worker_is_executed_once(
    soong_env: SoongEnv,
    temporal_server: TemporalServer,
    model_server: tuple[ScriptedOpenAIServer, Model],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, _model = model_server
    extra_env = worker_env(soong_env, temporal_server, server.base_url, monkeypatch)
    first = start_worker(soong_env, extra_env)
    second: Worker | None = None
    hold = soong_env.home / "release.hold2"
    hold.touch()
    try:
        async with AgentRuntime(project_dir=soong_env.project) as rt:
            run = await rt.start("do the steps")
            await wait_for(lambda: starts(soong_env, 2) == 1, 60, "the second tool call")
            second = start_worker(soong_env, extra_env)
            first.freeze()  # the worker only: its tool process keeps running
            waiting = "waiting for tool calls still executed by"
            await wait_for(
                lambda w=second: waiting in w.output() or starts(soong_env, 2) > 1,
                60,
                "the retry of the frozen worker's tool turn on the second worker",
            )
            await asyncio.sleep(FROZEN_S)  # without the claim, the second worker runs the call meanwhile
            assert starts(soong_env, 2) == 1, (tool_log(soong_env), second.output()[-3000:])
            first.resume()
            hold.unlink()
            assert await asyncio.wait_for(run.wait(), 90) == RunStatus.completed, run.error
            summary = run_summary(soong_env, run.session_id, run.run_id)
    finally:
        stop_workers(first, second)
    assert_each_call_ran_once(soong_env, summary, first.output())
    claims = rows(
        soong_env, "SELECT tool_call_id, status, attempts FROM tool_call_claims WHERE run_id = ?", run.run_id
    )
    assert sorted((c["tool_call_id"], c["status"], c["attempts"]) for c in claims) == [
        (f"call_{n}", "done", 1) for n in range(1, CALLS + 1)
    ]


@pytest.mark.timeout(300)
async def test_a_superseded_model_step_of_a_frozen_worker_stops_before_its_retry_starts(
    soong_env: SoongEnv,
    temporal_server: TemporalServer,
    model_server: tuple[ScriptedOpenAIServer, Model],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, model = model_server
    requested: dict[int, list[float]] = {}
    reply = model.reply

    def timed_reply(request: ScriptedRequest) -> Any:
        messages = request.json["messages"]
        turn = 1 + sum(1 for m in messages if m.get("role") == "tool")
        requested.setdefault(turn, []).append(time.time())
        return reply(request)

    server.handler(timed_reply)
    turn = 2
    model.hold_turns = {turn}  # its first request is held open mid-stream
    extra_env = worker_env(soong_env, temporal_server, server.base_url, monkeypatch)
    first = start_worker(soong_env, extra_env)
    second: Worker | None = None
    try:
        async with AgentRuntime(project_dir=soong_env.project) as rt:
            run = await rt.start("do the steps")
            await wait_for(model.held.is_set, 60, f"the held model stream of turn {turn}")
            second = start_worker(soong_env, extra_env)
            first.freeze()
            waiting = "waiting for the superseded step attempt"
            await wait_for(
                lambda w=second: waiting in w.output() or len(requested.get(turn, [])) > 1,
                60,
                "the retry of the frozen worker's model step on the second worker",
            )
            await asyncio.sleep(FROZEN_S)  # without the wait, the retry requests the model meanwhile
            assert len(requested[turn]) == 1, second.output()[-3000:]
            continued = time.time()
            first.resume()
            assert await asyncio.wait_for(run.wait(), 90) == RunStatus.completed, run.error
            summary = run_summary(soong_env, run.session_id, run.run_id)
    finally:
        stop_workers(first, second)
    assert summary == {
        "status": "completed",
        "end_reason": "completed",
        "results": {f"call_{n}": 1 for n in range(1, CALLS + 1)},
        "errors": [],
    }
    stopped = rows(soong_env, "SELECT stopped_at FROM stopped_attempts WHERE run_id = ?", run.run_id)
    assert len(stopped) >= 1, first.output()[-3000:]
    stopped_at = min(parse_ts(r["stopped_at"]).timestamp() for r in stopped)
    # the superseded attempt stopped once its worker was continued, and only then was the model asked again
    assert len(requested[turn]) == 2 and continued <= stopped_at <= requested[turn][1], (
        continued,
        stopped_at,
        requested[turn],
    )
    assists = rows(
        soong_env,
        f'SELECT metadata_json FROM "nodes_{run.session_id}" WHERE run_id = ? AND role = ?',
        run.run_id,
        "assistant",
    )
    assert len(assists) == CALLS + 1 and not any(
        '"partial": true' in (a["metadata_json"] or "") for a in assists
    )

"""Crash semantics of the temporal engine (docs/scale-out.md; issue 21 item 4).

``soong-agent worker`` processes execute the runs; the model is a scripted OpenAI wire server and the
tool a declarative command that logs its start and completion. Each seeded repetition SIGKILLs the worker
(its process group: the tool's process dies with it) in the middle of a run — during a model stream, during a
tool, or while a permission request waits for its answer — after starting a replacement worker, which must finish the run: every tool call has
exactly one result, a call completed before the kill is not executed again, an interrupted call is
executed again and completes once, and the run ends as the uncrashed run does.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal

import pytest

from agent_core import AgentRuntime, RunStatus
from agent_core.testing import ScriptedOpenAIServer
from agent_core.types.permissions import PermissionDecision, PermissionRequest
from tests.engine._temporal_harness import (
    CALLS,
    Model,
    Worker,
    assert_each_call_ran_once,
    model_server,
    replace_worker,
    run_summary,
    start_worker,
    stop_workers,
    tool_log,
    wait_for,
    worker_env,
)
from tests.fixtures.env import SoongEnv
from tests.fixtures.temporal_server import TemporalServer

pytestmark = pytest.mark.temporal

__all__ = ["model_server"]  # the fixture, imported for pytest

REPEATS = int(os.environ.get("SOONG_TEST_CRASH_REPEATS", "20"))
"""Seeded kills per kind (issue 21 asks for 20; fewer only while developing)."""
KINDS = ("model", "tool", "permission")


@pytest.mark.timeout(2400)
async def test_a_killed_worker_is_replaced_and_the_run_ends_as_without_the_crash(
    soong_env: SoongEnv,
    temporal_server: TemporalServer,
    model_server: tuple[ScriptedOpenAIServer, Model],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, model = model_server
    extra_env = worker_env(soong_env, temporal_server, server.base_url, monkeypatch)
    worker = start_worker(soong_env, extra_env)
    killed = 0
    try:
        asked: list[str] = []
        answer = asyncio.Event()

        async def callback(request: PermissionRequest) -> PermissionDecision:
            asked.append(str(request.metadata.get("tool_call_id")))
            await answer.wait()
            return PermissionDecision(decision="allow_once")

        async with AgentRuntime(project_dir=soong_env.project, permission_callback=callback) as rt:
            baseline = await rt.start("do the steps")
            assert await asyncio.wait_for(baseline.wait(), 60) == RunStatus.completed, baseline.error
            expected = run_summary(soong_env, baseline.session_id, baseline.run_id)
            assert expected == {
                "status": "completed",
                "end_reason": "completed",
                "results": {f"call_{n}": 1 for n in range(1, CALLS + 1)},
                "errors": [],
            }
            for seed in range(len(KINDS) * REPEATS):
                rng = random.Random(seed)
                kind = KINDS[seed % len(KINDS)]
                turn = rng.randint(1, CALLS + 1) if kind == "model" else rng.randint(1, CALLS)
                model.write_turn = turn if kind == "permission" else None
                asked.clear()
                answer.clear()
                (soong_env.home / "tool.log").unlink(missing_ok=True)
                model.requests.clear()
                model.held.clear()
                model.hold_turns = {turn} if kind == "model" else set()
                hold = soong_env.home / f"release.hold{turn}"
                if kind == "tool":
                    hold.touch()
                run = await rt.start(f"do the steps ({seed})")
                print(f"seed {seed}: kill the worker during the {kind} of turn {turn}", flush=True)
                if kind == "model":
                    await wait_for(model.held.is_set, 30, f"the held model stream of turn {turn}")
                elif kind == "tool":
                    await wait_for(
                        lambda t=turn: f"start {t}" in " ".join(tool_log(soong_env)), 30, "the tool"
                    )
                else:
                    await wait_for(lambda: bool(asked), 30, "the permission request")
                interrupted = turn if kind == "tool" else None
                worker, before_kill = replace_worker(soong_env, worker, extra_env, interrupted)
                killed += 1
                hold.unlink(missing_ok=True)
                answer.set()
                status = await asyncio.wait_for(run.wait(), 60)
                summary = run_summary(soong_env, run.session_id, run.run_id)
                assert status == RunStatus.completed, (seed, kind, turn, run.error)
                assert summary == expected, (seed, kind, turn, summary)
                log = tool_log(soong_env)
                done = [line for line in log if line.startswith("done")]
                assert sorted(done) == [f"done {n}" for n in range(1, CALLS + 1)], (seed, kind, log)
                starts = [line.split()[1] for line in log if line.startswith("start")]
                completed_before = {line.split()[1] for line in before_kill if line.startswith("done")}
                for n in completed_before:  # a call completed before the kill is not executed again
                    assert starts.count(n) == 1, (seed, kind, turn, log)
                if kind == "tool":  # the interrupted call ran again on the replacement
                    assert starts.count(str(turn)) == 2, (seed, turn, log)
                elif kind == "model":  # the interrupted model call was made again
                    assert model.requests[turn] == 2, (seed, turn, model.requests)
                else:  # the pending request was asked once and its answer reached the replacement
                    assert asked == [f"call_{turn}"], (seed, turn, asked)
                    assert starts.count(str(turn)) == 1, (seed, turn, log)
    finally:
        worker.stop()
    assert killed == len(KINDS) * REPEATS


@pytest.mark.timeout(300)
async def test_a_stopped_worker_finishes_its_step_and_another_continues_the_run(
    soong_env: SoongEnv,
    temporal_server: TemporalServer,
    model_server: tuple[ScriptedOpenAIServer, Model],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SIGTERM (graceful stop): the tool in flight completes and is not executed again elsewhere."""
    server, _model = model_server
    extra_env = worker_env(soong_env, temporal_server, server.base_url, monkeypatch)
    first = start_worker(soong_env, extra_env)
    second: Worker | None = None
    hold = soong_env.home / "release.hold2"
    hold.touch()
    try:
        async with AgentRuntime(project_dir=soong_env.project) as rt:
            run = await rt.start("do the steps")
            await wait_for(lambda: "start 2" in " ".join(tool_log(soong_env)), 60, "the second tool call")
            second = start_worker(soong_env, extra_env)
            os.killpg(first.proc.pid, signal.SIGTERM)
            await asyncio.sleep(1.0)
            hold.unlink()
            assert await asyncio.wait_for(run.wait(), 90) == RunStatus.completed, run.error
            summary = run_summary(soong_env, run.session_id, run.run_id)
        assert first.proc.wait(30) == 0, first.output()
    finally:
        stop_workers(first, second)
    assert_each_call_ran_once(soong_env, summary)


@pytest.mark.timeout(300)
async def test_a_paused_worker_whose_tool_activity_timed_out_does_not_run_the_call_twice(
    soong_env: SoongEnv,
    temporal_server: TemporalServer,
    model_server: tuple[ScriptedOpenAIServer, Model],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker frozen past its heartbeat timeout during a tool (what a loaded machine does): the call's
    activity is lost and the turn is staged again, but the call still runs on that worker, so the replan
    waits for it; the call is executed once and the run ends as without the pause."""
    server, _model = model_server
    extra_env = worker_env(soong_env, temporal_server, server.base_url, monkeypatch)
    worker = start_worker(soong_env, extra_env)
    hold = soong_env.home / "release.hold2"
    hold.touch()
    try:
        async with AgentRuntime(project_dir=soong_env.project) as rt:
            run = await rt.start("do the steps")
            await wait_for(lambda: "start 2" in " ".join(tool_log(soong_env)), 60, "the second tool call")
            worker.freeze()
            await asyncio.sleep(4.0)  # > heartbeat_timeout_ms (1.5 s): the call's activity times out
            worker.resume()
            await asyncio.sleep(3.0)  # the turn is staged again on this worker while the call still runs
            hold.unlink()
            assert await asyncio.wait_for(run.wait(), 90) == RunStatus.completed, run.error
            summary = run_summary(soong_env, run.session_id, run.run_id)
    finally:
        stop_workers(worker)
    assert_each_call_ran_once(soong_env, summary, worker.output())

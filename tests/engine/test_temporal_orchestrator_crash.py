"""A dispatched worker run survives the SIGKILL of its worker process (docs/scale-out.md; issue 21).

One ``soong-agent worker`` process executes the Orchestrator run and the worker run it dispatched (a child
workflow on the pool's task queue). Each seeded repetition SIGKILLs that process in the middle of the worker
run — during one of its two tool calls, or during one of its model streams — after starting a
replacement. The replacement continues the worker run (a completed tool call is not executed again, the
interrupted call or model request is made again) and the Orchestrator's retried dispatch step attaches to
the running worker run instead of dispatching again: the session ends with the same runs, tool results and
Task WAL records as the uncrashed session.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Iterator
from typing import Any

import pytest

from agent_core import AgentRuntime, RunStatus
from agent_core.testing import ScriptedOpenAIServer
from tests.engine._temporal_harness import (
    Script,
    replace_worker,
    scripted_server,
    start_worker,
    tool_log,
    wait_for,
    worker_env,
)
from tests.fixtures.env import SoongEnv
from tests.fixtures.orchestrator import wal_lines
from tests.fixtures.runtime import rows
from tests.fixtures.temporal_server import TemporalServer

pytestmark = pytest.mark.temporal

REPEATS = 4
KINDS = ("tool", "model")
WORKER_TURNS = 5
"""Worker turns: claim, tool 1, tool 2, complete the step, final answer."""


@pytest.fixture
def scripted() -> Iterator[tuple[ScriptedOpenAIServer, Script]]:
    script = Script()
    with scripted_server(script) as server:
        yield server, script


def session_summary(env: SoongEnv, session_id: str) -> dict[str, Any]:
    """Runs (status, end reason), each tool call's result count and errors, the Task WAL records."""
    runs = rows(
        env,
        "SELECT run_id, status, end_reason FROM runs WHERE session_id = ? ORDER BY created_at",
        session_id,
    )
    results: dict[str, int] = {}
    errors: list[Any] = []
    for node in rows(env, f'SELECT content_json FROM "nodes_{session_id}" ORDER BY node_seq'):
        for block in json.loads(node["content_json"]):
            if block.get("type") == "tool_result":
                results[block["tool_call_id"]] = results.get(block["tool_call_id"], 0) + 1
                if block.get("is_error"):
                    errors.append(block)
    wal = [(r["event_type"], r["step_id"]) for r in wal_lines(env, session_id, "t1-work")]
    return {
        "runs": [(r["status"], r["end_reason"]) for r in runs],
        "results": results,
        "errors": errors,
        "wal": wal,
    }


@pytest.mark.timeout(1800)
async def test_a_killed_worker_of_a_dispatched_run_is_replaced_and_the_session_ends_as_without_the_crash(
    soong_env: SoongEnv,
    temporal_server: TemporalServer,
    scripted: tuple[ScriptedOpenAIServer, Script],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, script = scripted
    # the baseline's pool "default" has worker w1
    extra_env = worker_env(soong_env, temporal_server, server.base_url, monkeypatch)
    config = dict(soong_env.config)
    config["model"] = {**config["model"], "context_window": 200_000}  # the Orchestrator's prompt is long
    # the dispatch outlives the replacement worker's start (seconds on a loaded machine; the baseline's 20 s
    # child timeout cancelled the worker run before the kill there)
    config["agents"] = {**config.get("agents", {}), "default_child_timeout_ms": 300_000}
    soong_env.write_config(**config)
    worker = start_worker(soong_env, extra_env)
    killed = 0
    try:
        async with AgentRuntime(project_dir=soong_env.project) as rt:
            baseline = await rt.start("do the task", mode="orchestrator")
            assert await asyncio.wait_for(baseline.wait(), 90) == RunStatus.completed, baseline.error
            expected = session_summary(soong_env, baseline.session_id)
            assert expected["runs"] == [("completed", "completed")] * 2 and not expected["errors"], rows(
                soong_env, "SELECT group_concat(error_json) AS e FROM runs"
            )[0]["e"]
            assert set(expected["results"].values()) == {1}
            for seed in range(len(KINDS) * REPEATS):
                rng = random.Random(seed)
                kind = KINDS[seed % len(KINDS)]
                turn = rng.randint(1, 2) if kind == "tool" else rng.randint(0, WORKER_TURNS - 1)
                (soong_env.home / "tool.log").unlink(missing_ok=True)
                script.requests.clear()
                script.held.clear()
                script.hold_turn = turn if kind == "model" else None
                hold = soong_env.home / f"release.hold{turn}"
                if kind == "tool":
                    hold.touch()
                run = await rt.start(f"do the task ({seed})", mode="orchestrator")
                print(f"seed {seed}: kill the worker during the {kind} of worker turn {turn}", flush=True)
                if kind == "tool":
                    await wait_for(
                        lambda t=turn: f"start {t}" in " ".join(tool_log(soong_env)), 60, "the tool"
                    )
                else:
                    await wait_for(script.held.is_set, 60, f"the held model stream of worker turn {turn}")
                interrupted = turn if kind == "tool" else None
                worker, before_kill = replace_worker(soong_env, worker, extra_env, interrupted)
                killed += 1
                hold.unlink(missing_ok=True)
                status = await asyncio.wait_for(run.wait(), 120)
                assert status == RunStatus.completed, (seed, kind, turn, run.error)
                summary = session_summary(soong_env, run.session_id)
                diff = {k: (summary[k], expected[k]) for k in expected if summary[k] != expected[k]}
                assert not diff, (seed, kind, turn, diff, tool_log(soong_env), script.requests)
                log = tool_log(soong_env)
                assert sorted(x for x in log if x.startswith("done")) == ["done 1", "done 2"], (seed, log)
                starts = [line.split()[1] for line in log if line.startswith("start")]
                for n in {line.split()[1] for line in before_kill if line.startswith("done")}:
                    assert starts.count(n) == 1, (seed, kind, turn, log)  # completed: not executed again
                if kind == "tool":  # the interrupted call ran again on the replacement
                    assert starts.count(str(turn)) == 2, (seed, turn, log)
                else:  # the interrupted model request was made again
                    assert script.requests[turn] == 2, (seed, turn, script.requests)
    finally:
        worker.stop()
    assert killed == len(KINDS) * REPEATS

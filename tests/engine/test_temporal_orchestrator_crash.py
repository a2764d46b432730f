"""A dispatched worker run survives the SIGKILL of its worker process (surfaces.md §3; issue 21).

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
import contextlib
import json
import os
import random
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from agent_core import AgentRuntime, RunStatus
from agent_core.testing import (
    OpenAIWire,
    ScriptedOpenAIServer,
    ScriptedRequest,
    advertised_tool_name,
    hold_open,
    stream,
)
from tests.engine.test_temporal_crash import TOOL, Worker, configure, tool_log, wait_for
from tests.fixtures.env import SoongEnv
from tests.fixtures.orchestrator import wal_lines
from tests.fixtures.runtime import rows
from tests.fixtures.temporal_server import TemporalServer

pytestmark = pytest.mark.temporal

REPEATS = 4
KINDS = ("tool", "model")
WORKER_TURNS = 5
"""Worker turns: claim, tool 1, tool 2, complete the step, final answer."""
STEPS = [{"step_id": "s1", "title": "Step", "summary": "Do it", "depends_on_step_ids": []}]


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else ""


@dataclass
class Script:
    """The Orchestrator creates a one-step Task, dispatches w1, completes the Task; the worker claims the
    step, calls the step tool twice, completes the step. ``hold_turn`` of the worker is held open
    mid-stream on its first request (the worker process is killed there)."""

    hold_turn: int | None = None
    requests: dict[int, int] = field(default_factory=dict)
    held: threading.Event = field(default_factory=threading.Event)

    def __call__(self, req: ScriptedRequest) -> Any:
        messages = req.json["messages"]
        turn = sum(1 for m in messages if m["role"] == "assistant")
        if any(_text(m).startswith("<worker_dispatch>") for m in messages if m["role"] == "user"):
            self.requests[turn] = self.requests.get(turn, 0) + 1
            frames = self.worker(req, turn)
            if turn == self.hold_turn and self.requests[turn] == 1:
                self.held.set()
                return hold_open(frames[:2])
            return stream(frames)
        return stream(self.orchestrator(req, turn))

    @staticmethod
    def call(req: ScriptedRequest, call_id: str, tool: str, args: dict[str, Any]) -> list[str]:
        return OpenAIWire.tool_stream([(call_id, advertised_tool_name(req, tool), args)], text=f"{call_id} ")

    def orchestrator(self, req: ScriptedRequest, turn: int) -> list[str]:
        if turn == 0:
            args = {"task_id": "t1", "wal_name": "t1-work", "title": "T", "summary": "S", "steps": STEPS}
            return self.call(req, "o_create", "task_create", args)
        if turn == 1:
            args = {
                "task_id": "t1",
                "instruction": "job:s1 do it",
                "worker_agent_id": "w1",
                "allowed_tools": ["agent.task_get", "agent.task_claim_step", "agent.task_update_step", TOOL],
            }
            return self.call(req, "o_dispatch", "dispatch_worker", args)
        if turn == 2:
            return self.call(req, "o_done", "task_complete", {"task_id": "t1", "result_summary": "done"})
        return OpenAIWire.text_stream("the task ", "is done")

    def worker(self, req: ScriptedRequest, turn: int) -> list[str]:
        if turn == 0:
            return self.call(req, "w_claim", "task_claim_step", {"task_id": "t1", "step_id": "s1"})
        if turn in (1, 2):
            return self.call(req, f"call_{turn}", "probe__step", {"n": turn})
        if turn == 3:
            args = {"task_id": "t1", "step_id": "s1", "status": "completed", "result_summary": "s1 ok"}
            return self.call(req, "w_update", "task_update_step", args)
        return OpenAIWire.text_stream(json.dumps({"status": "completed", "summary": "finished s1"}))


@pytest.fixture
def scripted() -> Iterator[tuple[ScriptedOpenAIServer, Script]]:
    script = Script()
    server = ScriptedOpenAIServer(strict=False)
    server.handler(script)
    server.start()
    try:
        yield server, script
    finally:
        server.stop()


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
    monkeypatch.setenv("SOONG_TEST_API_KEY", "sk-test")
    configure(soong_env, temporal_server, server.base_url)  # the baseline's pool "default" has worker w1
    config = dict(soong_env.config)
    config["model"] = {**config["model"], "context_window": 200_000}  # the Orchestrator's prompt is long
    # the dispatch outlives the replacement worker's start (seconds on a loaded machine; the baseline's 20 s
    # child timeout cancelled the worker run before the kill there)
    config["agents"] = {**config.get("agents", {}), "default_child_timeout_ms": 300_000}
    soong_env.write_config(**config)
    extra_env = {"SOONG_AGENT_HOME": str(soong_env.home), "SOONG_TEST_API_KEY": "sk-test"}
    worker = Worker(soong_env, extra_env)
    worker.wait_ready()
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
                before_kill = tool_log(soong_env)
                replacement = Worker(soong_env, extra_env)
                replacement.wait_ready()
                worker.kill()
                for line in before_kill:  # the interrupted tool dies too, wherever its process group is
                    if kind == "tool" and line.startswith(f"start {turn} "):
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(int(line.split()[2]), signal.SIGKILL)
                killed += 1
                worker = replacement
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

"""The harness of the temporal engine's crash tests: ``soong-agent worker`` processes, a scripted OpenAI
wire model and a declarative tool that logs its start and completion (and waits while ``release.hold<n>``
exists in the home).

Used by ``test_temporal_crash``, ``test_temporal_zombies``, ``test_temporal_orchestrator_crash`` and
``test_temporal_dispatch_worktree``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from agent_core.testing import (
    OpenAIWire,
    ScriptedOpenAIServer,
    ScriptedRequest,
    advertised_tool_name,
    hold_open,
    stream,
)
from tests.fixtures.env import SoongEnv
from tests.fixtures.runtime import rows
from tests.fixtures.temporal_server import TemporalServer

CALLS = 3
"""The tool calls of :class:`Model`'s run (one a turn)."""
TOOL = "probe.step"
WRITE_TOOL = "probe.write_step"
TOOL_SCRIPT = """
import json, os, sys, time
request = json.loads(sys.stdin.read())
n = request["arguments"]["n"]
log, release = sys.argv[1], sys.argv[2]
with open(log, "a") as fh:
    fh.write(f"start {n} {os.getpid()}\\n")
deadline = time.monotonic() + 110
while os.path.exists(release + f".hold{n}") and time.monotonic() < deadline:
    time.sleep(0.02)
with open(log, "a") as fh:
    fh.write(f"done {n}\\n")
print(json.dumps({"content": [{"type": "text", "text": f"step {n} done"}]}))
"""
STEPS = [{"step_id": "s1", "title": "Step", "summary": "Do it", "depends_on_step_ids": []}]
"""The one-step Task of :class:`Script`."""


@dataclass
class Model:
    """The scripted model: call ``n`` in turn ``n`` (one per turn), then a final answer. A turn listed in
    ``hold_turns`` is held open mid-stream on its first request (the worker is killed there)."""

    hold_turns: set[int] = field(default_factory=set)
    write_turn: int | None = None
    """The turn whose call goes to the write tool (it asks for permission)."""
    requests: dict[int, int] = field(default_factory=dict)
    held: threading.Event = field(default_factory=threading.Event)

    def reply(self, request: ScriptedRequest) -> Any:
        messages = request.json["messages"]
        turn = 1 + sum(1 for m in messages if m.get("role") == "tool")
        self.requests[turn] = self.requests.get(turn, 0) + 1
        tool = "write_step" if turn == self.write_turn else "probe__step"
        if turn <= CALLS:
            frames = OpenAIWire.tool_stream(
                [(f"call_{turn}", advertised_tool_name(request, tool), {"n": turn})], text=f"step {turn}"
            )
        else:
            frames = OpenAIWire.text_stream("all ", "steps ", "done")
        if turn in self.hold_turns and self.requests[turn] == 1:
            self.held.set()
            return hold_open(frames[:2])
        return stream(frames)


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else ""


@dataclass
class Script:
    """An Orchestrator session: the Orchestrator creates a one-step Task, dispatches w1, completes the
    Task; the worker claims the step, calls the step tool twice, completes the step. ``hold_turn`` of the
    worker is held open mid-stream on its first request (the worker process is killed there)."""

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


@contextlib.contextmanager
def scripted_server(handler: Callable[[ScriptedRequest], Any]) -> Iterator[ScriptedOpenAIServer]:
    """A scripted OpenAI wire server answering with ``handler``, stopped on exit."""
    server = ScriptedOpenAIServer(strict=False)
    server.handler(handler)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def model_server() -> Iterator[tuple[ScriptedOpenAIServer, Model]]:
    model = Model()
    with scripted_server(model.reply) as server:
        yield server, model


class Worker:
    """A ``soong-agent worker`` process in its own process group."""

    def __init__(self, env: SoongEnv, extra_env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agent_core.cli", "worker", "--path", str(env.project)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**os.environ, **extra_env},
            start_new_session=True,
            text=True,
        )
        self.lines: list[str] = []
        self.ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            if line.startswith("worker polling"):
                self.ready.set()

    def output(self) -> str:
        return "".join(self.lines)

    def wait_ready(self, timeout: float = 60) -> None:
        if not self.ready.wait(timeout):
            self.stop()
            pytest.fail(f"the worker did not start polling:\n{''.join(self.lines)}")

    def freeze(self) -> None:
        """SIGSTOP of the worker only (what a starved process looks like): its tool processes keep running."""
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT of a frozen worker (nothing when it ended)."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL of the worker and everything it started (its tool processes)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


def start_worker(env: SoongEnv, extra_env: dict[str, str]) -> Worker:
    """A worker process, once it polls its task queue."""
    worker = Worker(env, extra_env)
    worker.wait_ready()
    return worker


def stop_workers(*workers: Worker | None) -> None:
    """Resumes (if frozen) and stops each worker started."""
    for worker in workers:
        if worker is not None:
            worker.resume()
            worker.stop()


def replace_worker(
    env: SoongEnv, worker: Worker, extra_env: dict[str, str], interrupted: int | None = None
) -> tuple[Worker, list[str]]:
    """Starts a replacement of ``worker``, then SIGKILLs ``worker``; the tool process of the interrupted
    call ``interrupted`` dies too, wherever its process group is. Returns the replacement and the tool
    log as it was before the kill."""
    before_kill = tool_log(env)
    replacement = start_worker(env, extra_env)
    worker.kill()
    for line in before_kill:
        if interrupted is not None and line.startswith(f"start {interrupted} "):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(line.split()[2]), signal.SIGKILL)
    return replacement, before_kill


def configure(env: SoongEnv, server: TemporalServer, base_url: str) -> None:
    env.write_config(
        model={
            "provider": "openai",
            "base_url": base_url,
            "api_key_env": "SOONG_TEST_API_KEY",
            "timeout_ms": 60000,
        },
        tools={"default_timeout_ms": 120000},  # the held tool outlasts the replacement worker's start
        engine={
            "kind": "temporal",
            "temporal": {
                "address": server.address,
                "task_queue": f"soong-crash-{uuid.uuid4().hex[:8]}",
                "heartbeat_timeout_ms": 1500,
            },
        },
    )
    script = env.home / "probe_step.py"
    script.write_text(TOOL_SCRIPT, encoding="utf-8")
    spec = {
        "name": TOOL,
        "description": "One step of the work.",
        "permission": "readonly",
        "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        "command": sys.executable,
        "args": [str(script), str(env.home / "tool.log"), str(env.home / "release")],
    }
    env.write_home("tools/step.json", json.dumps(spec))
    write = {**spec, "name": WRITE_TOOL, "permission": "write", "description": "One step that writes."}
    env.write_home("tools/write_step.json", json.dumps(write))


def worker_env(
    env: SoongEnv, server: TemporalServer, base_url: str, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    """Configures ``env`` (:func:`configure`) and returns the environment of its worker processes."""
    monkeypatch.setenv("SOONG_TEST_API_KEY", "sk-test")
    configure(env, server, base_url)
    return {"SOONG_AGENT_HOME": str(env.home), "SOONG_TEST_API_KEY": "sk-test"}


def tool_log(env: SoongEnv) -> list[str]:
    path = env.home / "tool.log"
    return path.read_text().splitlines() if path.exists() else []


def run_summary(env: SoongEnv, session_id: str, run_id: str) -> dict[str, Any]:
    nodes = rows(
        env, f'SELECT role, content_json FROM "nodes_{session_id}" WHERE run_id = ? ORDER BY node_seq', run_id
    )
    results: dict[str, int] = {}
    errors: list[Any] = []
    for node in nodes:
        for block in json.loads(node["content_json"]):
            if block.get("type") == "tool_result":
                results[block["tool_call_id"]] = results.get(block["tool_call_id"], 0) + 1
                if block.get("is_error"):
                    errors.append(block)
    run = rows(env, "SELECT status, end_reason FROM runs WHERE run_id = ?", run_id)[0]
    return {"status": run["status"], "end_reason": run["end_reason"], "results": results, "errors": errors}


def assert_each_call_ran_once(env: SoongEnv, summary: dict[str, Any], output: str = "") -> None:
    """The tool log shows each call of :class:`Model`'s run started once, in order, and the run has one
    result of each, none an error (``output``, a worker's, is shown when it fails)."""
    log = tool_log(env)
    assert [line.split()[0:2] for line in log if line.startswith("start")] == [
        ["start", str(n)] for n in range(1, CALLS + 1)
    ], (log, output[-3000:])
    assert summary["results"] == {f"call_{n}": 1 for n in range(1, CALLS + 1)} and not summary["errors"]


async def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)

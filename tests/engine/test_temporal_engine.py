"""The temporal engine end to end against the Temporal dev server (docs/scale-out.md; issue 21 item 3).

A run started through ``AgentRuntime.start`` with ``[engine] kind = "temporal"`` executes as a workflow on
a worker (here: a second runtime in this process, on the same home and project) and yields the same
``RunHandle`` outcome, the same stored events and the same nodes as the same script on the local engine.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from agent_core import AgentRuntime, ProviderRegistry, RunStatus, ToolDefinition
from agent_core.engine.temporal.worker import run_worker
from agent_core.types.enums import EventType
from agent_core.types.permissions import PermissionDecision, PermissionRequest
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, hang, text, tool_calls
from tests.fixtures.runtime import collect, open_runtime, rows
from tests.fixtures.temporal_server import TemporalServer

pytestmark = pytest.mark.temporal

Tools = Callable[[AgentRuntime], None]


def engine_config(server: TemporalServer) -> dict[str, Any]:
    return {
        "engine": {
            "kind": "temporal",
            "temporal": {
                "address": server.address,
                "task_queue": f"soong-test-{uuid.uuid4().hex[:8]}",
                "heartbeat_timeout_ms": 2000,
            },
        }
    }


def echo_tools(calls: list[str]) -> Tools:
    async def echo(args: dict[str, Any], ctx: Any) -> str:
        """Deterministic order: "one" and "two" both start, then "one" completes before "two"."""
        calls.append(ctx.tool_call_id)
        await ctx.emit_progress({"echoing": args.get("text", "")})  # a live event (never stored)
        if args.get("text") in ("one", "two"):
            for _ in range(200):
                if {"call_1", "call_2"} <= set(calls):
                    break
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.0 if args["text"] == "one" else 0.2)
        return f"echo {args.get('text', '')}"

    def register(rt: AgentRuntime) -> None:
        rt.register_tool(
            ToolDefinition(
                name="probe.echo",
                description="Echoes its text.",
                input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
                permission="readonly",
            ),
            echo,
        )

    return register


@asynccontextmanager
async def worker(
    env: SoongEnv, fake: FakeProvider, tools: Tools, queues: list[str] | None = None
) -> AsyncIterator[AgentRuntime]:
    """A worker runtime on ``env`` (the config already written) executing this test's task queue(s)."""
    rt = AgentRuntime(project_dir=env.project, provider_registry=ProviderRegistry({"fake": fake.factory}))
    tools(rt)
    async with rt:
        stop, ready = asyncio.Event(), asyncio.Event()
        task = asyncio.create_task(run_worker(rt, stop, lambda _queue, _address: ready.set(), queues=queues))
        waiter = asyncio.create_task(ready.wait())
        await asyncio.wait({task, waiter}, timeout=20, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            task.result()
        assert ready.is_set(), "the worker did not start polling"
        try:
            yield rt
        finally:
            stop.set()
            await asyncio.wait_for(task, 20)


def stored(env: SoongEnv, session_id: str) -> tuple[list[str], list[tuple[str, str, Any]]]:
    """The session's persisted event types and its nodes (role, type, content) in order."""
    events = rows(env, f'SELECT event_type FROM "events_{session_id}" ORDER BY seq')
    nodes = rows(env, f'SELECT role, node_type, content_json FROM "nodes_{session_id}" ORDER BY node_seq')
    return (
        [r["event_type"] for r in events],
        [(r["role"], r["node_type"], json.loads(r["content_json"])) for r in nodes],
    )


def script() -> FakeProvider:
    return FakeProvider(
        tool_calls(("probe.echo", {"text": "one"}, "call_1"), ("probe.echo", {"text": "two"}, "call_2")),
        tool_calls(("probe.echo", {"text": "three"}, "call_3")),
        text("all echoed"),
    )


async def run_local(env: SoongEnv, calls: list[str]) -> tuple[Any, list[str], Any]:
    fake = script()
    async with open_runtime(env, fake) as rt:
        echo_tools(calls)(rt)
        run = await rt.start("echo please")
        events = await collect(run)
        await run.wait()
    return run, [e.event_type.value for e in events], stored(env, run.session_id)


async def test_a_run_with_tools_as_a_workflow_matches_the_local_engine(
    tmp_path: Any, temporal_server: TemporalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    local_env = _env(tmp_path / "local", monkeypatch)
    local_calls: list[str] = []
    local_run, local_stream, local_store = await run_local(local_env, local_calls)
    assert local_run.status == RunStatus.completed

    env = _env(tmp_path / "temporal", monkeypatch)
    env.write_config(**engine_config(temporal_server))
    fake, calls = script(), []
    async with worker(env, fake, echo_tools(calls)):
        async with open_runtime(env, FakeProvider(), write_config=False) as rt:
            echo_tools([])(rt)
            run = await rt.start("echo please")
            events = await collect(run, timeout=60)
            await run.wait()
            assert run.status == RunStatus.completed, run.error
            assert run.end_reason == local_run.end_reason
            replay = await rt.replay_run(run.run_id)
    assert calls == local_calls == ["call_1", "call_2", "call_3"]
    assert stored(env, run.session_id) == local_store
    # the handle streams the stored events and the worker's live deltas (never stored), as locally
    assert [e.event_type.value for e in events] == local_stream
    assert {"message_delta", "tool_progress"} <= set(local_stream)
    assert [e.event_type.value for e in replay.events] == local_store[0]
    assert len(fake.requests) == 3


async def test_cancel_is_workflow_cancellation(
    tmp_path: Any, temporal_server: TemporalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = _env(tmp_path / "cancel", monkeypatch)
    env.write_config(**engine_config(temporal_server))
    gate = asyncio.Event()
    fake = FakeProvider(hang(gate, lead_text="thinking"))
    async with worker(env, fake, echo_tools([])):
        async with open_runtime(env, FakeProvider(), write_config=False) as rt:
            run = await rt.start("wait")
            await collect(run, until=EventType.message_created, timeout=30)
            for _ in range(600):  # the worker's model stream is inside its hang
                if fake.hanging:
                    break
                await asyncio.sleep(0.05)
            assert fake.hanging == 1
            result = await run.cancel()
            await run.wait()
    assert result.cancelled, result
    assert run.status == RunStatus.cancelled
    events, _nodes = stored(env, run.session_id)
    assert events[-3:] == ["aborted_streaming", "loop_aborted", "run_cancelled"]


def _env(root: Any, monkeypatch: pytest.MonkeyPatch) -> SoongEnv:
    home, project = (root / "home").resolve(), (root / "project").resolve()
    home.mkdir(parents=True)
    project.mkdir(parents=True)
    monkeypatch.setenv("SOONG_AGENT_HOME", str(home))
    return SoongEnv(home=home, project=project)


async def test_a_permission_request_is_a_signal_answered_by_the_starting_runtime(
    tmp_path: Any, temporal_server: TemporalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = _env(tmp_path / "permission", monkeypatch)
    env.write_config(**engine_config(temporal_server))
    executed: list[str] = []

    async def write(args: dict[str, Any], ctx: Any) -> str:
        executed.append(ctx.tool_call_id)
        return "written"

    def tools(rt: AgentRuntime) -> None:
        rt.register_tool(
            ToolDefinition(
                name="probe.write",
                description="Writes.",
                input_schema={"type": "object", "properties": {}},
                permission="write",
            ),
            write,
        )

    asked: list[PermissionRequest] = []

    async def callback(request: PermissionRequest) -> PermissionDecision:
        asked.append(request)
        decision = "allow_once" if len(asked) == 1 else "deny"
        return PermissionDecision(decision=decision, reason=None if len(asked) == 1 else "not twice")

    fake = FakeProvider(
        tool_calls(("probe.write", {}, "call_w1")), tool_calls(("probe.write", {}, "call_w2")), text("done")
    )
    async with worker(env, fake, tools):
        async with open_runtime(env, FakeProvider(), write_config=False, permission_callback=callback) as rt:
            tools(rt)
            run = await rt.start("write twice")
            await asyncio.wait_for(run.wait(), 60)
    assert run.status == RunStatus.completed, run.error
    assert [r.tool_name for r in asked] == ["probe.write", "probe.write"]
    assert [r.metadata["tool_call_id"] for r in asked] == ["call_w1", "call_w2"]
    assert executed == ["call_w1"]  # the second call was denied by the starting runtime's callback
    events, _nodes = stored(env, run.session_id)
    assert events.count("tool_completed") == 1 and events.count("tool_denied") == 1


def replayed(result: Any) -> tuple[list[str], list[tuple[str, str, Any]]]:
    """A run's event types and nodes (role, type, content) from ``replay_run`` (any storage backend)."""
    return (
        [e.event_type.value for e in result.events],
        [(n.role, n.node_type, [b.model_dump(mode="json") for b in n.content]) for n in result.nodes],
    )


async def test_with_postgres_storage_a_run_matches_the_local_engine(
    tmp_path: Any,
    temporal_server: TemporalServer,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    local_env = _env(tmp_path / "local", monkeypatch)
    fake = script()
    async with open_runtime(local_env, fake) as rt:
        echo_tools([])(rt)
        local = await rt.start("echo please")
        local_stream = [e.event_type.value for e in await collect(local)]
        await local.wait()
        expected = replayed(await rt.replay_run(local.run_id))

    env = _env(tmp_path / "pg", monkeypatch)
    request.getfixturevalue("postgres_dsn")  # a fresh schema, its DSN in $SOONG_TEST_PG_DSN
    storage = {"backend": "postgres", "postgres": {"dsn_env": "SOONG_TEST_PG_DSN"}}
    env.write_config(storage=storage, **engine_config(temporal_server))
    calls: list[str] = []
    async with worker(env, script(), echo_tools(calls)):
        async with open_runtime(env, FakeProvider(), write_config=False) as rt:
            echo_tools([])(rt)
            run = await rt.start("echo please")
            stream = [e.event_type.value for e in await collect(run, timeout=60)]
            await asyncio.wait_for(run.wait(), 60)
            assert run.status == RunStatus.completed, run.error
            got = replayed(await rt.replay_run(run.run_id))
    assert calls == ["call_1", "call_2", "call_3"]
    assert got == expected
    # the worker's live deltas reach the handle through LISTEN/NOTIFY, in the local engine's order
    assert stream == local_stream and {"message_delta", "tool_progress"} <= set(stream)

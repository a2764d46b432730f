"""Each tool call of the temporal engine is its own activity (docs/scale-out.md; issue 21 item 3).

The workflow runs one ``soong.tool_call`` activity per executed call, scheduled as the local executor
schedules the calls (docs/tools.md#scheduling: a parallel batch concurrently, a serial call alone, a failed
serial call skips the rest), and the run stores the same events and nodes as on the local engine — also when
the run is cancelled while a call runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from temporalio.client import Client

from agent_core import AgentRuntime, RunStatus, ToolDefinition
from agent_core.engine.temporal._client import workflow_id
from agent_core.engine.temporal._payloads import MODEL, TOOL_CALL, TOOLS_END
from tests.engine.test_temporal_engine import _env, engine_config, stored, worker
from tests.fixtures.fake_provider import FakeProvider, text, tool_calls
from tests.fixtures.runtime import open_runtime
from tests.fixtures.temporal_server import TemporalServer

pytestmark = pytest.mark.temporal


class Probe:
    """The test's tools: ``probe.read`` (parallel; "slow" waits for another read to finish first, "after
    wait" for ``probe.wait`` to run),
    ``probe.serial`` (serial; "fail" raises) and ``probe.wait`` (waits until the run is cancelled)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.finished: list[str] = []
        self.waiting = asyncio.Event()

    async def read(self, args: dict[str, Any], ctx: Any) -> str:
        self.calls.append(ctx.tool_call_id)
        if args["text"] == "slow":
            for _ in range(500):
                if self.finished:
                    break
                await asyncio.sleep(0.01)
        if args["text"] == "after wait":  # deterministic: completes once probe.wait runs
            await asyncio.wait_for(self.waiting.wait(), 30)
        self.finished.append(ctx.tool_call_id)
        return f"read {args['text']}"

    async def serial(self, args: dict[str, Any], ctx: Any) -> str:
        self.calls.append(ctx.tool_call_id)
        if args["text"] == "fail":
            raise RuntimeError("the serial step failed")
        return f"serial {args['text']}"

    async def wait(self, args: dict[str, Any], ctx: Any) -> str:
        self.calls.append(ctx.tool_call_id)
        self.waiting.set()
        await ctx.cancel_event.wait()
        return "stopped"

    async def running_alone(self) -> None:
        """Until ``probe.wait`` runs and every other call of its batch finished."""
        await asyncio.wait_for(self.waiting.wait(), 30)
        for _ in range(3000):
            if len(self.finished) == len(self.calls) - 1:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"calls {self.calls} finished {self.finished}")

    def register(self, rt: AgentRuntime) -> None:
        schema = {"type": "object", "properties": {"text": {"type": "string"}}}
        tools: list[tuple[str, dict[str, Any], Callable[[dict[str, Any], Any], Awaitable[str]]]] = [
            ("probe.read", {}, self.read),
            ("probe.serial", {"concurrency": "serial"}, self.serial),
            ("probe.wait", {}, self.wait),
        ]
        for name, metadata, handler in tools:
            definition = ToolDefinition(
                name=name,
                description=f"The test's {name}.",
                input_schema=schema,
                permission="readonly",
                metadata=metadata,
            )
            rt.register_tool(definition, handler)


def skip_script() -> FakeProvider:
    return FakeProvider(
        tool_calls(
            ("probe.read", {"text": "slow"}, "call_a"),
            ("probe.read", {"text": "fast"}, "call_b"),
            ("probe.serial", {"text": "fail"}, "call_w"),
            ("probe.read", {"text": "after"}, "call_c"),
        ),
        tool_calls(("probe.serial", {"text": "ok"}, "call_s"), ("probe.read", {"text": "fast"}, "call_d")),
        text("done"),
    )


async def scheduled_activities(server: TemporalServer, run_id: str) -> list[tuple[str, str]]:
    """The activities the run's workflow scheduled, in order: (activity type, activity id)."""
    client = await Client.connect(server.address)
    history = await client.get_workflow_handle(workflow_id(run_id)).fetch_history()
    found = []
    for event in history.events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            attrs = event.activity_task_scheduled_event_attributes
            found.append((attrs.activity_type.name, attrs.activity_id))
    return found


async def tool_call_activities(server: TemporalServer, run_id: str) -> list[str]:
    """The ``soong.tool_call`` activities the run's workflow scheduled (their activity ids)."""
    return [aid for kind, aid in await scheduled_activities(server, run_id) if kind == TOOL_CALL]


async def test_each_call_is_an_activity_and_a_failed_serial_call_skips_the_rest_as_locally(
    tmp_path: Any, temporal_server: TemporalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    local_env = _env(tmp_path / "local", monkeypatch)
    local = Probe()
    async with open_runtime(local_env, skip_script()) as rt:
        local.register(rt)
        local_run = await rt.start("read and write")
        assert await asyncio.wait_for(local_run.wait(), 30) == RunStatus.completed, local_run.error
    expected = stored(local_env, local_run.session_id)

    env = _env(tmp_path / "temporal", monkeypatch)
    env.write_config(**engine_config(temporal_server))
    probe = Probe()
    async with worker(env, skip_script(), probe.register):
        async with open_runtime(env, FakeProvider(), write_config=False) as rt:
            probe.register(rt)
            run = await rt.start("read and write")
            assert await asyncio.wait_for(run.wait(), 60) == RunStatus.completed, run.error
    assert probe.calls == local.calls == ["call_a", "call_b", "call_w", "call_s", "call_d"]
    assert probe.finished == local.finished == ["call_b", "call_a", "call_d"]
    assert stored(env, run.session_id) == expected
    events, _nodes = expected
    assert events.count("tool_failed") == 2  # the failed serial call and the skipped call after it
    # one activity per executed call; the skipped call ran none
    assert len(await tool_call_activities(temporal_server, run.run_id)) == 5
    # each model step also begins the run, stages the answer's calls or ends the run (no other steps)
    kinds = [kind for kind, _ in await scheduled_activities(temporal_server, run.run_id)]
    assert kinds == [MODEL, *[TOOL_CALL] * 3, TOOLS_END, MODEL, *[TOOL_CALL] * 2, TOOLS_END, MODEL]


def wait_script() -> FakeProvider:
    return FakeProvider(
        tool_calls(
            ("probe.read", {"text": "after wait"}, "call_a"),
            ("probe.wait", {"text": "x"}, "call_b"),
            ("probe.serial", {"text": "ok"}, "call_c"),
        ),
        text("never"),
    )


async def test_a_cancel_during_a_tool_call_stores_what_the_local_engine_stores(
    tmp_path: Any, temporal_server: TemporalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    local_env = _env(tmp_path / "local", monkeypatch)
    local = Probe()
    async with open_runtime(local_env, wait_script()) as rt:
        local.register(rt)
        local_run = await rt.start("wait")
        await local.running_alone()
        await local_run.cancel()
        assert await asyncio.wait_for(local_run.wait(), 30) == RunStatus.cancelled
    expected = stored(local_env, local_run.session_id)
    assert expected[0][-4:] == ["tool_failed", "aborted_tools", "loop_aborted", "run_cancelled"]

    env = _env(tmp_path / "temporal", monkeypatch)
    env.write_config(**engine_config(temporal_server))
    probe = Probe()
    async with worker(env, wait_script(), probe.register):
        async with open_runtime(env, FakeProvider(), write_config=False) as rt:
            probe.register(rt)
            run = await rt.start("wait")
            await probe.running_alone()
            await run.cancel()
            assert await asyncio.wait_for(run.wait(), 60) == RunStatus.cancelled
    assert probe.calls == local.calls == ["call_a", "call_b"]
    assert stored(env, run.session_id) == expected

"""Parallel children, limits, result schemas, timeouts and cancellation (docs/multi-agent.md#child-results,
docs/multi-agent.md#concurrency, docs/multi-agent.md#cancellation-and-timeouts).

Traceability: the case ids (``I5``, ``D9``) of docs/testing.md#case-catalogue are in the test docstrings.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from agent_core import ErrorCode, RunStatus, ToolDefinition
from agent_core.types.content import JsonBlock
from agent_core.types.enums import EventType
from agent_core.types.model import ModelEvent, ModelRequest
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, Turn, fail, hang, text, tool_calls
from tests.fixtures.multi_agent import ChildRouter, child_done, message_text, routed_fake, tool_results
from tests.fixtures.runtime import collect, open_runtime, rows, types, wait_for


def at_barrier(barrier: asyncio.Barrier, turn: Turn) -> Turn:
    """A turn that first waits until all parties reached ``barrier`` (fails after 2 s)."""

    async def gated(fake: FakeProvider, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        await asyncio.wait_for(barrier.wait(), 2)
        async for event in turn(fake, request):
            yield event

    return gated


def delayed(seconds: float, turn: Turn) -> Turn:
    async def later(fake: FakeProvider, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        await asyncio.sleep(seconds)
        async for event in turn(fake, request):
            yield event

    return later


def results_by_id(request: ModelRequest) -> dict[str, Any]:
    out = {}
    for block in tool_results(request):
        data = next((b.data for b in block.content if isinstance(b, JsonBlock)), None)
        out[block.tool_call_id] = (block.is_error, data, block.error)
    return out


def main_requests(fake: FakeProvider) -> list[ModelRequest]:
    return [r for r in fake.requests if r.metadata["agent_type"] in ("main", "orchestrator")]


async def test_three_parallel_sub_agents_one_fails(soong_env: SoongEnv) -> None:
    """Case D9: The issue's required test: three children run concurrently, one fails, the parent's next
    request carries all three results and nothing of the child transcripts."""
    soong_env.write_project("data.txt", "FILE-SECRET-CONTENT\n")
    barrier = asyncio.Barrier(3)
    router = (
        ChildRouter()
        .add(
            "MARK-A",
            at_barrier(
                barrier, tool_calls(("code.read_file", {"path": "data.txt"}, "ra"), lead_text="A-THINKING")
            ),
            child_done("A finished", findings=["a1"]),
        )
        .add("MARK-B", at_barrier(barrier, fail(after_text="B-PARTIAL")))
        .add(
            "MARK-C",
            at_barrier(
                barrier, tool_calls(("code.read_file", {"path": "data.txt"}, "rc"), lead_text="C-THINKING")
            ),
            delayed(0.1, child_done("C finished")),
        )
    )
    fake = routed_fake(
        router,
        tool_calls(
            ("agent.create_sub_agent", {"task": "MARK-A"}, "c1"),
            ("agent.create_sub_agent", {"task": "MARK-B"}, "c2"),
            ("agent.create_sub_agent", {"task": "MARK-C"}, "c3"),
        ),
        text("summary of three"),
    )
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("fan out")
        events = await collect(run)
        assert run.status == RunStatus.completed, run.error
    _first, second = main_requests(fake)
    results = results_by_id(second)
    assert set(results) == {"c1", "c2", "c3"}
    assert results["c1"][0] is False and results["c1"][1]["result"]["summary"] == "A finished"
    assert results["c3"][0] is False and results["c3"][1]["result"]["summary"] == "C finished"
    failed, data, error = results["c2"]
    assert failed and error.code == ErrorCode.provider_error
    assert data["result"]["status"] == "failed" and data["child_run_id"]
    prompt = "\n".join(message_text(m) for m in second.messages)
    for transcript in ("FILE-SECRET-CONTENT", "A-THINKING", "C-THINKING", "B-PARTIAL", "<delegated_task>"):
        assert transcript not in prompt, transcript
    names = types(events)
    assert names.count("child_agent_created") == 3 and names.count("child_agent_completed") == 2
    assert names.count("child_agent_failed") == 1 and "child_agent_cancelled" not in names
    statuses = sorted(
        r["status"] for r in rows(soong_env, "SELECT status FROM agents WHERE parent_agent_id IS NOT NULL")
    )
    assert statuses == ["completed", "completed", "failed"]


async def test_max_children_per_run(soong_env: SoongEnv) -> None:
    """Case D10."""
    router = (
        ChildRouter().add("MARK-ONE", delayed(0.3, child_done("one"))).add("MARK-THREE", child_done("three"))
    )
    fake = routed_fake(
        router,
        tool_calls(
            ("agent.create_sub_agent", {"task": "MARK-ONE"}, "c1"),
            ("agent.create_sub_agent", {"task": "MARK-TWO"}, "c2"),
        ),
        tool_calls(("agent.create_sub_agent", {"task": "MARK-THREE"}, "c3")),
        text("done"),
    )
    async with open_runtime(soong_env, fake, config={"agents": {"max_children_per_run": 1}}) as rt:
        run = await rt.start("go")
        events = await collect(run)
        assert run.status == RunStatus.completed
    requests = main_requests(fake)
    results = results_by_id(requests[1])
    assert results["c1"][0] is False
    assert results["c2"][0] is True and results["c2"][2].code == ErrorCode.child_agent_limit_exceeded
    assert results["c2"][2].details["limit"] == "max_children_per_run"
    assert results_by_id(requests[2])["c3"][0] is False
    assert set(router.requests) == {"MARK-ONE", "MARK-THREE"}
    created = [e for e in events if e.event_type == EventType.child_agent_created]
    assert (
        len(created) == 2
        and len(rows(soong_env, "SELECT 1 FROM agents WHERE parent_agent_id IS NOT NULL")) == 2
    )


async def test_max_concurrent_children_per_session(soong_env: SoongEnv) -> None:
    """Case D10."""
    router = ChildRouter().add("MARK-ONE", delayed(0.3, child_done("one")))
    fake = routed_fake(
        router,
        tool_calls(
            ("agent.fork_agent", {"task": "MARK-ONE"}, "c1"),
            ("agent.create_sub_agent", {"task": "MARK-TWO"}, "c2"),
        ),
        text("done"),
    )
    config = {"agents": {"max_concurrent_children_per_session": 1}}
    async with open_runtime(soong_env, fake, config=config) as rt:
        run = await rt.start("go")
        await collect(run)
        assert run.status == RunStatus.completed
    results = results_by_id(main_requests(fake)[1])
    assert results["c1"][0] is False
    assert results["c2"][2].code == ErrorCode.child_agent_limit_exceeded
    assert results["c2"][2].details["limit"] == "max_concurrent_children_per_session"


async def test_result_schema_validation(soong_env: SoongEnv) -> None:
    """Case I29."""
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    router = (
        ChildRouter()
        .add("MARK-BAD", child_done("no answer field"))
        .add("MARK-GOOD", child_done("has answer", answer="42"))
        .add("MARK-PLAIN", text("just prose, no JSON"))
        .add("MARK-SELF-FAILED", child_done("could not do it", status="failed"))
    )
    fake = routed_fake(
        router,
        tool_calls(
            ("agent.create_sub_agent", {"task": "MARK-BAD", "expected_output_schema": schema}, "c1"),
            ("agent.create_sub_agent", {"task": "MARK-GOOD", "expected_output_schema": schema}, "c2"),
            ("agent.create_sub_agent", {"task": "MARK-PLAIN", "expected_output_schema": schema}, "c3"),
            ("agent.create_sub_agent", {"task": "MARK-SELF-FAILED"}, "c4"),
            (
                "agent.create_sub_agent",
                {"task": "MARK-UNSUPPORTED", "expected_output_schema": {"anyOf": []}},
                "c5",
            ),
        ),
        text("done"),
    )
    async with open_runtime(soong_env, fake, config={"agents": {"max_children_per_run": 8}}) as rt:
        run = await rt.start("go")
        events = await collect(run, debug=True)
        assert run.status == RunStatus.completed
    results = results_by_id(main_requests(fake)[1])
    bad_error, bad, error = results["c1"]
    assert bad_error and error.code == ErrorCode.schema_error
    assert bad["result"]["status"] == "failed" and bad["result"]["summary"] == "no answer field"
    assert bad["errors"] == [{"path": "$.answer", "message": "is required"}]
    assert results["c2"][0] is False and results["c2"][1]["result"]["metadata"]["output"]["answer"] == "42"
    assert results["c3"][2].code == ErrorCode.schema_error
    assert "no structured JSON output" in results["c3"][1]["errors"][0]["message"]
    self_failed = results["c4"]
    assert self_failed[0] is False and self_failed[1]["result"]["status"] == "failed"
    assert results["c5"][2].code == ErrorCode.validation_error and "MARK-UNSUPPORTED" not in router.requests
    schema_events = [e for e in events if e.event_type == EventType.child_result_schema_validation_failed]
    assert len(schema_events) == 2
    assert {e.data["child_run_id"] for e in schema_events} == {
        results["c1"][1]["child_run_id"],
        results["c3"][1]["child_run_id"],
    }
    assert all(e.data["errors"] for e in schema_events)
    completed = {
        e.data["child_run_id"]: e.data for e in events if e.event_type == EventType.child_agent_completed
    }
    assert completed[self_failed[1]["child_run_id"]]["status"] == "failed"
    failed_runs = {e.data["child_run_id"] for e in events if e.event_type == EventType.child_agent_failed}
    assert failed_runs == {e.data["child_run_id"] for e in schema_events}


async def test_child_timeout_aborts_with_timeout_code(soong_env: SoongEnv) -> None:
    gate = asyncio.Event()
    router = ChildRouter().add("MARK-SLOW", hang(gate)).add("MARK-CLAMP", child_done("clamped"))
    fake = routed_fake(
        router,
        tool_calls(
            ("agent.create_sub_agent", {"task": "MARK-SLOW", "timeout_ms": 200}, "c1"),
            ("agent.create_sub_agent", {"task": "MARK-CLAMP", "timeout_ms": 10_000_000}, "c2"),
        ),
        text("continued after the timeout"),
    )
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("go")
        started = time.monotonic()
        events = await collect(run, debug=True)
        assert time.monotonic() - started < 3
        assert run.status == RunStatus.completed
    results = results_by_id(main_requests(fake)[1])
    timed_out, data, error = results["c1"]
    assert timed_out and error.code == ErrorCode.timeout and data["result"]["status"] == "failed"
    child = rows(
        soong_env, "SELECT status, error_json, end_reason FROM runs WHERE run_id = ?", data["child_run_id"]
    )[0]
    assert child["status"] == "aborted" and json.loads(child["error_json"])["code"] == "timeout"
    agent = rows(soong_env, "SELECT status FROM agents WHERE agent_id = ?", data["child_agent_id"])[0]
    assert agent["status"] == "failed"
    ids = data["child_run_id"]
    mine = [e for e in events if e.data.get("child_run_id") == ids]
    assert types(mine) == [
        "child_agent_created",
        "child_agent_cancel_requested",
        "child_agent_cancelled",
        "child_agent_failed",
    ]
    assert mine[1].data["reason"] == "timeout" and mine[3].data["error"]["code"] == "timeout"
    assert fake.cancelled == 1
    clamped = rows(
        soong_env, "SELECT metadata_json FROM runs WHERE run_id = ?", results["c2"][1]["child_run_id"]
    )[0]
    meta = json.loads(clamped["metadata_json"])
    assert (
        meta["timeout_ms"] == 20000
        and meta["timeout_clamped"] is True
        and meta["requested_timeout_ms"] == 10_000_000
    )


async def test_parent_cancel_reaches_children(soong_env: SoongEnv) -> None:
    gate = asyncio.Event()
    router = ChildRouter().add("MARK-HANG", hang(gate, lead_text="working"))
    fake = routed_fake(router, tool_calls(("agent.create_sub_agent", {"task": "MARK-HANG"}, "c1")))
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("go")
        events = []
        async for event in run.events(debug=True):
            events.append(event)
            if event.event_type == EventType.child_agent_created:
                # the child's stream is inside its hang: the cancel reaches it there (not before it waits)
                await wait_for(lambda: "MARK-HANG" in router.requests and fake.hanging >= 1)
                result = await run.cancel()
                assert result.cancelled and not result.timed_out
        assert run.status == RunStatus.cancelled
    names = types(events)
    order = ["child_agent_created", "child_agent_cancel_requested", "child_agent_cancelled", "run_cancelled"]
    assert [names.index(n) for n in order] == sorted(names.index(n) for n in order)
    requested = next(e for e in events if e.event_type == EventType.child_agent_cancel_requested)
    assert requested.data["reason"] == "parent_cancelled"
    child_run = requested.data["child_run_id"]
    assert rows(soong_env, "SELECT status FROM runs WHERE run_id = ?", child_run)[0]["status"] == "cancelled"
    assert (
        rows(soong_env, "SELECT status FROM agents WHERE agent_id = ?", requested.data["child_agent_id"])[0][
            0
        ]
        == "cancelled"
    )
    tool_node = rows(soong_env, f"SELECT content_json FROM \"nodes_{run.session_id}\" WHERE role = 'tool'")[0]
    content = json.loads(tool_node["content_json"])[0]
    assert content["is_error"] and content["error"]["code"] == "cancelled"
    assert child_run in tool_node["content_json"]
    assert fake.cancelled == 1


async def test_cancel_timeout_keeps_the_child_running(soong_env: SoongEnv) -> None:
    """Case D10."""
    marker = soong_env.project / "stubborn.done"

    def stubborn(args: dict[str, Any], ctx: Any) -> str:
        time.sleep(1.0)  # a synchronous handler cannot be interrupted
        marker.write_text("finished")
        return "finished"

    router = (
        ChildRouter()
        .add("MARK-STUCK", tool_calls(("demo.stubborn", {}, "s1")), child_done("never reached"))
        .add("MARK-LATER", child_done("later child"))
    )
    fake = routed_fake(
        router,
        tool_calls(("agent.create_sub_agent", {"task": "MARK-STUCK", "timeout_ms": 100}, "c1")),
        text("first run done"),
        tool_calls(("agent.create_sub_agent", {"task": "MARK-BLOCKED"}, "c2")),
        text("second run done"),
        tool_calls(("agent.create_sub_agent", {"task": "MARK-LATER"}, "c3")),
        text("third run done"),
    )
    config = {"agents": {"child_cancel_timeout_ms": 200, "max_concurrent_children_per_session": 1}}
    async with open_runtime(soong_env, fake, config=config) as rt:
        rt.register_tool(
            ToolDefinition(
                name="demo.stubborn",
                description="Ignores cancellation.",
                input_schema={"type": "object", "properties": {}},
                permission="readonly",
            ),
            stubborn,
        )
        run1 = await rt.start("one")
        events1 = await collect(run1, debug=True)
        assert run1.status == RunStatus.completed and not marker.exists()
        names = types(events1)
        assert names.index("child_agent_cancel_requested") < names.index("child_agent_cancel_timeout")
        assert "child_agent_cancelled" not in names
        timeout_event = next(e for e in events1 if e.event_type == EventType.child_agent_cancel_timeout)
        assert timeout_event.data["child_cancel_timeout_ms"] == 200
        stuck_run = timeout_event.data["child_run_id"]
        # the lingering child still counts toward the session limit
        run2 = await rt.start("two", session_id=run1.session_id)
        await collect(run2)
        blocked = results_by_id(main_requests(fake)[3])["c2"]
        assert blocked[2].code == ErrorCode.child_agent_limit_exceeded
        # nothing was force-killed: the tool finishes and the child ends by itself
        await wait_for(marker.exists, timeout=5)
        await wait_for(
            lambda: rows(soong_env, "SELECT status FROM runs WHERE run_id = ?", stuck_run)[0][0] == "aborted",
            timeout=5,
        )
        await wait_for(
            lambda: (
                rows(soong_env, "SELECT status FROM agents WHERE created_by_run_id = ?", run1.run_id)[0][0]
                == "failed"
            ),
            timeout=5,
        )
        run3 = await rt.start("three", session_id=run1.session_id)
        await collect(run3)
        assert results_by_id(main_requests(fake)[5])["c3"][0] is False
    first = results_by_id(main_requests(fake)[1])["c1"]
    assert first[2].code == ErrorCode.timeout


async def test_runtime_close_cancels_running_children(soong_env: SoongEnv) -> None:
    gate = asyncio.Event()
    router = ChildRouter().add("MARK-CLOSE", hang(gate))
    fake = routed_fake(router, tool_calls(("agent.create_sub_agent", {"task": "MARK-CLOSE"}, "c1")))
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("go")
        await wait_for(lambda: "MARK-CLOSE" in router.requests)
        # the child's stream is inside its hang once its model_started event is persisted
        await wait_for(
            lambda: bool(
                rows(
                    soong_env,
                    f'SELECT 1 FROM "events_{run.session_id}" WHERE event_type = ? AND run_id != ?',
                    "model_started",
                    run.run_id,
                )
            )
        )
        await asyncio.sleep(0.05)
        started = time.monotonic()
    assert time.monotonic() - started < 3
    assert run.status == RunStatus.cancelled and fake.cancelled == 1
    child = rows(soong_env, "SELECT status FROM runs WHERE run_id != ?", run.run_id)
    assert [r["status"] for r in child] == ["cancelled"]
    assert rows(soong_env, "SELECT status FROM agents WHERE parent_agent_id IS NOT NULL")[0][0] == "cancelled"


async def test_slow_child_outlives_the_tool_grace_but_not_the_cancel_timeout(
    soong_env: SoongEnv,
) -> None:
    """The parent's pipeline cancels the agent-tool handler after its grace period; the handler still waits
    for the child (bounded by ``child_cancel_timeout_ms``) and records its cancellation."""

    def slow(args: dict[str, Any], ctx: Any) -> str:
        time.sleep(3.0)
        return "slow done"

    router = ChildRouter().add("MARK-SLOW", tool_calls(("demo.slow", {}, "s1")))
    fake = routed_fake(router, tool_calls(("agent.create_sub_agent", {"task": "MARK-SLOW"}, "c1")))
    config = {"agents": {"child_cancel_timeout_ms": 4500}}
    async with open_runtime(soong_env, fake, config=config) as rt:
        rt.register_tool(
            ToolDefinition(
                name="demo.slow",
                description="Slow.",
                input_schema={"type": "object", "properties": {}},
                permission="readonly",
            ),
            slow,
        )
        run = await rt.start("go")
        events = []
        async for event in run.events(debug=True):
            events.append(event)
            if event.event_type == EventType.tool_started and event.run_id == run.run_id:
                await wait_for(lambda: "MARK-SLOW" in router.requests)
                await asyncio.sleep(0.2)
                result = await run.cancel()
                assert result.timed_out  # runtime.cancel_timeout_ms (2 s) < the child's 3 s
        assert run.status == RunStatus.cancelled
    names = types(events)
    assert "child_agent_cancel_timeout" not in names
    order = ["child_agent_cancel_requested", "child_agent_cancelled", "run_cancelled"]
    assert [names.index(n) for n in order] == sorted(names.index(n) for n in order)
    child = next(e for e in events if e.event_type == EventType.child_agent_cancelled).data
    assert (
        rows(soong_env, "SELECT status FROM agents WHERE agent_id = ?", child["child_agent_id"])[0][0]
        == "cancelled"
    )
    tool_node = rows(
        soong_env,
        f"SELECT content_json FROM \"nodes_{run.session_id}\" WHERE role = 'tool' AND run_id = ?",
        run.run_id,
    )[0]
    assert child["child_run_id"] in tool_node["content_json"]

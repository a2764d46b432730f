"""The loop through the public API with the fake stream helper (docs/runs.md, cases area D)."""

from __future__ import annotations

import asyncio

from agent_core import AgentRuntime, EndReason, RunStatus, ToolDefinition, ToolResult, UserMessage
from agent_core.types.enums import EventType
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, hang, text, tool_calls
from tests.fixtures.runtime import collect, open_runtime, rows, types


async def test_normal_run_event_order_and_persistence(soong_env: SoongEnv) -> None:
    """Case D1."""
    fake = FakeProvider(text("Hello world", chunks=3))
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("hello")
        events = await collect(run)
        assert run.status == RunStatus.completed and run.end_reason == EndReason.completed
        names = types(events)
        assert names[0] == "loop_started" and names[-1] == "run_completed"
        order = ["loop_started", "message_created", "message_delta", "message_completed", "loop_completed"]
        positions = [names.index(n) for n in order]
        assert positions == sorted(positions)
        assert (
            "".join(e.data["text"] for e in events if e.event_type == EventType.message_delta)
            == "Hello world"
        )
        assert not {"context_built", "model_text_delta", "model_started"} & set(names)
        assert all(e.seq is None for e in events if e.event_type == EventType.message_delta)
        persisted = [e for e in events if e.seq is not None]
        assert [e.seq for e in persisted] == sorted(e.seq for e in persisted)
    sid = run.session_id
    ev = rows(soong_env, f'SELECT seq, run_seq, event_type FROM "events_{sid}" ORDER BY seq')
    assert [r["run_seq"] for r in ev] == list(range(1, len(ev) + 1))
    assert "message_delta" not in {r["event_type"] for r in ev}
    run_row = rows(soong_env, "SELECT status, end_reason, turn_count FROM runs WHERE run_id = ?", run.run_id)[
        0
    ]
    assert (run_row["status"], run_row["end_reason"], run_row["turn_count"]) == ("completed", "completed", 1)
    session = rows(soong_env, "SELECT active_node_id FROM sessions WHERE session_id = ?", sid)[0]
    final = rows(soong_env, f"SELECT node_id FROM \"nodes_{sid}\" WHERE role = 'assistant'")[0]
    assert session["active_node_id"] == final["node_id"]


async def test_debug_stream_includes_model_events(soong_env: SoongEnv) -> None:
    """Case D1."""
    fake = FakeProvider(text("Hi"))
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("hello")
        names = types(await collect(run, debug=True))
        for name in ("model_started", "model_text_delta", "model_completed", "context_built"):
            assert name in names
        assert names.index("model_started") < names.index("message_completed")


async def test_tool_round_trip_with_registered_tool(soong_env: SoongEnv) -> None:
    calls: list[dict[str, object]] = []

    async def handler(args: dict[str, object], ctx: object) -> str:
        calls.append(args)
        return f"echo {args['x']}"

    fake = FakeProvider(tool_calls(("demo.echo", {"x": "1"}, "call_1")), text("done"))
    async with open_runtime(soong_env, fake) as rt:
        rt.register_tool(
            ToolDefinition(
                name="demo.echo",
                description="Echo x.",
                input_schema={"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]},
                permission="readonly",
            ),
            handler,
        )
        run = await rt.start("use the tool")
        events = await collect(run)
        assert run.status == RunStatus.completed, run.error
        assert calls == [{"x": "1"}]
        assert "tool_started" in types(events) and "tool_completed" in types(events)
        second = fake.requests[1]
        tool_msgs = [m for m in second.messages if m.role == "tool"]
        assert tool_msgs and tool_msgs[0].content[0].tool_call_id == "call_1"  # type: ignore[union-attr]
        assert "demo.echo" in {t.name for t in fake.requests[0].tools}


async def test_queue_fifo(soong_env: SoongEnv) -> None:
    """Case D3."""
    gate = asyncio.Event()
    fake = FakeProvider(hang(gate), text("two"), text("three"))
    async with open_runtime(soong_env, fake) as rt:
        run1 = await rt.start("one")
        run2 = await rt.start("two", session_id=run1.session_id)
        run3 = await rt.start("three", session_id=run1.session_id)
        assert run2.status == RunStatus.queued and run3.status == RunStatus.queued
        gate.set()
        e1, e2, e3 = await asyncio.gather(collect(run1), collect(run2), collect(run3))
        assert types(e2)[:3] == ["run_queued", "run_dequeued", "loop_started"]
        assert e2[1].data["reason"] == "started"
        assert types(e3)[0] == "run_queued"
        assert e2[2].seq > e1[-1].seq and e3[2].seq > e2[-1].seq
        assert [r.status for r in (run1, run2, run3)] == [RunStatus.completed] * 3


async def test_cancel_queued_run(soong_env: SoongEnv) -> None:
    """Case D4."""
    gate = asyncio.Event()
    fake = FakeProvider(hang(gate))
    async with open_runtime(soong_env, fake) as rt:
        run1 = await rt.start("one")
        run2 = await rt.start("two", session_id=run1.session_id)
        result = await run2.cancel()
        assert result.was_queued and result.cancelled and run2.status == RunStatus.cancelled
        assert types(await collect(run2)) == ["run_queued", "run_dequeued", "run_cancelled"]
        gate.set()
        await collect(run1)
        assert len(fake.requests) == 1


async def test_cancel_active_stream(soong_env: SoongEnv) -> None:
    """Case D5."""
    gate = asyncio.Event()
    fake = FakeProvider(hang(gate, lead_text="partial "))
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("hello")
        seen: list[str] = []
        async for event in run.events():
            seen.append(event.event_type.value)
            if event.event_type == EventType.message_delta:
                result = await run.cancel()
                assert result.cancelled and not result.timed_out
        assert seen[-3:] == ["aborted_streaming", "loop_aborted", "run_cancelled"]
        assert run.end_reason == EndReason.aborted_streaming and fake.cancelled == 1
    sid = run.session_id
    partial = rows(soong_env, f"SELECT node_id, metadata_json FROM \"nodes_{sid}\" WHERE role = 'assistant'")
    assert len(partial) == 1 and '"partial":true' in partial[0]["metadata_json"].replace(" ", "")
    user = rows(soong_env, f"SELECT node_id FROM \"nodes_{sid}\" WHERE role = 'user'")[0]
    active = rows(soong_env, "SELECT active_node_id FROM sessions")[0]["active_node_id"]
    assert active == user["node_id"]


async def test_user_message_and_str_persist_equal_nodes(soong_env: SoongEnv) -> None:
    fake = FakeProvider(text("a"), text("b"))
    async with open_runtime(soong_env, fake) as rt:
        r1 = await rt.start("same text")
        await collect(r1)
        r2 = await rt.start(UserMessage(content="same text"), session_id=r1.session_id)
        await collect(r2)
    users = rows(soong_env, f"SELECT content_json FROM \"nodes_{r1.session_id}\" WHERE role = 'user'")
    assert users[0]["content_json"] == users[1]["content_json"]


async def test_close_twice_and_start_after_close(soong_env: SoongEnv) -> None:
    """Case A5."""
    soong_env.write_config()
    fake = FakeProvider(text("x"))
    from agent_core import ProviderRegistry

    rt = AgentRuntime(
        project_dir=soong_env.project, provider_registry=ProviderRegistry({"fake": fake.factory})
    )
    async with rt:
        await collect(await rt.start("hi"))
    await rt.close()
    assert fake.closed == 1
    try:
        await rt.start("again")
    except Exception as exc:
        assert getattr(exc, "code", None) == "validation_error"
    else:
        raise AssertionError("start after close must fail")
    assert isinstance(ToolResult(tool_call_id="c", tool_name="t", content=[]), ToolResult)

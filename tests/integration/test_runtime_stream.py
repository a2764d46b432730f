"""The event stream through the public API (cases D1, D16, docs/runs.md)."""

from __future__ import annotations

import asyncio
import json

import pytest

from agent_core import AgentCoreError, ContextBuildReport, EndReason, ErrorCode, RunStatus, ToolDefinition
from agent_core.types.enums import DEBUG_ONLY_EVENTS, EventType
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, hang, text, tool_calls
from tests.fixtures.runtime import collect, open_runtime, rows, types

STRUCTURAL_USER_VISIBLE = {
    "loop_started",
    "message_created",
    "message_completed",
    "loop_completed",
    "run_completed",
    "tool_started",
    "tool_completed",
}


def persisted_events(env: SoongEnv, session_id: str, run_id: str | None = None) -> list[dict[str, object]]:
    sql = f'SELECT * FROM "events_{session_id}"'
    params: tuple[object, ...] = ()
    if run_id is not None:
        sql += " WHERE run_id = ?"
        params = (run_id,)
    return [dict(r) for r in rows(env, sql + " ORDER BY seq", *params)]


async def test_normal_run_default_stream(soong_env: SoongEnv) -> None:
    """Case D1."""
    fake = FakeProvider(text("Hello there world", chunks=4))
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("hello")
        events = await collect(run)
    names = types(events)
    wanted = ["loop_started", "message_created", "message_delta", "message_completed", "loop_completed"]
    assert [n for n in names if n in wanted and n != "message_delta"] == [
        w for w in wanted if w != "message_delta"
    ]
    assert names[0] == "loop_started" and names[-1] == "run_completed"
    assert names.index("message_created") < names.index("message_delta") < names.index("message_completed")
    assert names.count("message_completed") == 1
    deltas = [e for e in events if e.event_type == EventType.message_delta]
    assert deltas and all(e.seq is None and e.run_seq is None for e in deltas)
    assert "".join(str(e.data["text"]) for e in deltas) == "Hello there world"
    assert not set(names) & {t.value for t in DEBUG_ONLY_EVENTS}
    assert run.status == RunStatus.completed and run.end_reason == EndReason.completed
    created = next(e for e in events if e.event_type == EventType.message_created)
    assert created.data == {"role": "user", "text_preview": "hello"} and created.node_id
    completed = next(e for e in events if e.event_type == EventType.message_completed)
    assert completed.data["text"] == "Hello there world" and completed.data["has_tool_calls"] is False
    done = events[-1]
    assert done.data["end_reason"] == "completed" and done.data["turn_count"] == 1
    assert done.data["final_node_id"] == completed.node_id
    stored = persisted_events(soong_env, run.session_id)
    assert {str(r["event_type"]) for r in stored}.isdisjoint({"message_delta", "model_text_delta"})
    assert [r["event_id"] for r in stored if r["event_type"] in names] == [
        e.event_id for e in events if e.seq is not None
    ]


async def test_debug_stream_and_visibility(soong_env: SoongEnv) -> None:
    """Case D1."""
    fake = FakeProvider(text("Hi you", chunks=2), text("again"))
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("hello")
        debug_events = await collect(run, debug=True)
        names = types(debug_events)
        for name in ("context_built", "model_started", "model_text_delta", "model_completed"):
            assert name in names
        first_loop = names.index("loop_started")
        for name in ("model_started", "model_text_delta", "model_completed"):
            assert first_loop < names.index(name) < names.index("message_completed")
        assert names.index("context_built") < names.index("model_started")
        plain = types(await collect(await rt.start("again", session_id=run.session_id)))
        assert not {n for n in plain if n.startswith("task_")}
        assert not {"context_built", "model_text_delta", "hook_started", "model_started"} & set(plain)
    # debug=False on the runtime persists no model_text_delta (deltas are live only)
    stored = {str(r["event_type"]) for r in persisted_events(soong_env, run.session_id)}
    assert "model_text_delta" not in stored and "context_built" in stored


async def test_seq_and_run_seq_across_runs(soong_env: SoongEnv) -> None:
    fake = FakeProvider(text("a"), text("b"), text("c"))
    async with open_runtime(soong_env, fake) as rt:
        first = await rt.start("one")
        await collect(first)
        second = await rt.start("two", session_id=first.session_id)
        third = await rt.start("three", session_id=first.session_id)  # queued behind the second
        await asyncio.gather(collect(second), collect(third))
    stored = persisted_events(soong_env, first.session_id)
    seqs = [int(str(r["seq"])) for r in stored]
    assert seqs == sorted(set(seqs))
    for run in (first, second, third):
        mine = [r for r in stored if r["run_id"] == run.run_id]
        assert [r["run_seq"] for r in mine] == list(range(1, len(mine) + 1))


async def test_single_consumer(soong_env: SoongEnv) -> None:
    gate = asyncio.Event()
    fake = FakeProvider(hang(gate))
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("hello")
        stream = run.events()
        first = await anext(stream)
        assert first.event_type == EventType.loop_started
        with pytest.raises(AgentCoreError) as info:
            run.events(debug=True)
        assert info.value.code == ErrorCode.validation_error
        gate.set()
        rest = [e async for e in stream]
        assert rest[-1].event_type == EventType.run_completed


async def test_attachment_buffer_and_late_subscribers(soong_env: SoongEnv) -> None:
    gate1, gate2 = asyncio.Event(), asyncio.Event()
    fake = FakeProvider(hang(gate1), hang(gate2, lead_text="abc"))
    async with open_runtime(soong_env, fake) as rt:
        run1 = await rt.start("one")
        run2 = await rt.start("two", session_id=run1.session_id)
        await asyncio.sleep(0.05)
        # run_queued was emitted before anyone subscribed: the first iterator still gets it
        stream2 = run2.events()
        assert (await anext(stream2)).event_type == EventType.run_queued
        await stream2.aclose()  # early close: later events are discarded until a new subscriber
        gate1.set()
        await collect(run1)
        await asyncio.wait_for(_until_requests(fake, 2), 5)
        late = run2.events(debug=True)
        gate2.set()
        got = types([e async for e in late])
        assert "run_queued" not in got and "run_dequeued" not in got and "loop_started" not in got
        assert got[-1] == "run_completed" and "message_completed" in got


async def _until_requests(fake: FakeProvider, n: int) -> None:
    while len(fake.requests) < n:
        await asyncio.sleep(0.005)


async def test_slow_consumer_loses_nothing(soong_env: SoongEnv) -> None:
    """Case D16."""
    reply = "".join(f"w{i} " for i in range(60))
    fake = FakeProvider(
        tool_calls(*[("demo.noop", {}, f"call_{i}") for i in range(6)]),
        text(reply, chunks=60),
    )

    async def noop(args: dict[str, object], ctx: object) -> str:
        return "ok"

    async with open_runtime(soong_env, fake) as rt:
        rt.register_tool(
            ToolDefinition(
                name="demo.noop",
                description="No-op.",
                input_schema={"type": "object", "properties": {}},
                permission="readonly",
            ),
            noop,
        )
        run = await rt.start("go")
        events = []
        async for event in run.events():
            events.append(event)
            await asyncio.sleep(0.02)
    stored = persisted_events(soong_env, run.session_id, run.run_id)
    visible = [r for r in stored if r["event_type"] not in {t.value for t in DEBUG_ONLY_EVENTS}]
    delivered = [e for e in events if e.seq is not None]
    assert [e.event_id for e in delivered] == [r["event_id"] for r in visible]
    assert [e.seq for e in delivered] == sorted(e.seq for e in delivered if e.seq is not None)
    assert types(delivered).count("tool_completed") == 6
    final = [e for e in events if e.event_type == EventType.message_completed][-1]
    last_turn = events[events.index([e for e in events if e.event_type == EventType.tool_completed][-1]) :]
    text_deltas = [str(e.data["text"]) for e in last_turn if e.event_type == EventType.message_delta]
    assert "".join(text_deltas) == final.data["text"] == reply


async def test_backpressure_bounded_queue_keeps_every_structural_event(soong_env: SoongEnv) -> None:
    """More structural events than the 256-event queue while the consumer stalls: nothing is dropped."""
    n = 140
    fake = FakeProvider(tool_calls(*[("demo.noop", {}, f"call_{i}") for i in range(n)]), text("done"))

    async def noop(args: dict[str, object], ctx: object) -> str:
        return "ok"

    async with open_runtime(soong_env, fake) as rt:
        rt.register_tool(
            ToolDefinition(
                name="demo.noop",
                description="No-op.",
                input_schema={"type": "object", "properties": {}},
                permission="readonly",
            ),
            noop,
        )
        run = await rt.start("go")
        stream = run.events(debug=True)
        first = await anext(stream)
        await asyncio.sleep(0.5)  # the producer fills the bounded queue and waits
        assert not run.status.terminal
        events = [first, *[e async for e in stream]]
    stored = persisted_events(soong_env, run.session_id, run.run_id)
    assert [e.event_id for e in events if e.seq is not None] == [r["event_id"] for r in stored]
    assert types(events).count("tool_completed") == n


async def test_unconsumed_stream_still_terminates(soong_env: SoongEnv) -> None:
    fake = FakeProvider(text("x" * 50, chunks=50), text("y"))
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("hello")
        assert await asyncio.wait_for(run.wait(), 5) == RunStatus.completed
        run2 = await rt.start("again", session_id=run.session_id)
        assert await asyncio.wait_for(run2.wait(), 5) == RunStatus.completed
        # the unconsumed stream kept everything since start (deltas coalesced) and ends
        events = await collect(run)
        assert types(events)[0] == "loop_started" and types(events)[-1] == "run_completed"
        deltas = [e for e in events if e.event_type == EventType.message_delta]
        assert "".join(str(e.data["text"]) for e in deltas) == "x" * 50
        assert len(deltas) < 50


async def test_context_built_precedes_every_request(soong_env: SoongEnv) -> None:
    fake = FakeProvider(tool_calls(("code.list_dir", {"path": "."}, "call_1")), text("done"))
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("look around")
        events = await collect(run, debug=True)
    assert len(fake.requests) == 2
    built = [e for e in events if e.event_type == EventType.context_built]
    started = [e for e in events if e.event_type == EventType.model_started]
    assert len(built) == len(started) == 2
    for index, (report_event, model_event) in enumerate(zip(built, started, strict=True), start=1):
        assert report_event.seq is not None and report_event.seq < (model_event.seq or 0)
        assert report_event.node_id is None and report_event.run_id == run.run_id
        report = ContextBuildReport.model_validate(report_event.data)
        assert report.turn == index and report.run_id == run.run_id and report.agent_id == run.agent_id
        assert report.provider == "fake" and report.model == "test-model"
        assert report.token_budget.context_window == 8192
        assert report.system_blocks and all(b.selected for b in report.system_blocks if not b.dynamic)
    second = ContextBuildReport.model_validate(built[1].data)
    node_ids = [
        r["node_id"]
        for r in rows(soong_env, f'SELECT node_id FROM "nodes_{run.session_id}" ORDER BY node_seq')
    ]
    assert second.included_node_ids == node_ids[:3]
    stored = [
        json.loads(r["payload_json"])
        for r in rows(
            soong_env,
            f"SELECT payload_json FROM \"events_{run.session_id}\" WHERE event_type = 'context_built'",
        )
    ]
    assert [ContextBuildReport.model_validate(p).turn for p in stored] == [1, 2]


async def test_secret_split_across_deltas_is_never_delivered(
    soong_env: SoongEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-test-" + "0123456789abcdef" * 2
    monkeypatch.setenv("SOONG_TEST_API_KEY", secret)
    reply = f"the key is {secret} and {secret[:10]} is only a prefix"
    fake = FakeProvider(text(reply, chunks=len(reply) // 3), text(reply, chunks=7))
    config = {"model": {"api_key_env": "SOONG_TEST_API_KEY"}}
    async with open_runtime(soong_env, fake, config=config) as rt:
        live = await rt.start("hello")
        live_events = await collect(live, debug=True)
        unconsumed = await rt.start("again", session_id=live.session_id)
        await unconsumed.wait()  # deltas coalesce in the attachment buffer before anyone reads
        buffered = await collect(unconsumed, debug=True)
    expected = reply.replace(secret, "[REDACTED]")
    for events in (live_events, buffered):
        assert all(secret not in e.model_dump_json() for e in events)
        for kind in (EventType.message_delta, EventType.model_text_delta):
            assert "".join(str(e.data["text"]) for e in events if e.event_type == kind) == expected
        final = next(e for e in events if e.event_type == EventType.message_completed)
        assert final.data["text"] == expected


async def test_debug_runtime_persists_aggregated_text_deltas(soong_env: SoongEnv) -> None:
    reply = "".join(f"{i:05d} " for i in range(1700))  # 10200 characters
    fake = FakeProvider(text(reply, chunks=300))
    async with open_runtime(soong_env, fake, debug=True) as rt:
        run = await rt.start("hello")
        live = await collect(run, debug=True)
    assert any(e.event_type == EventType.model_text_delta for e in live)
    assert all(e.seq is None for e in live if e.event_type == EventType.model_text_delta)
    stored = persisted_events(soong_env, run.session_id, run.run_id)
    chunks = [
        json.loads(str(r["payload_json"]))["text"] for r in stored if r["event_type"] == "model_text_delta"
    ]
    assert [len(c) for c in chunks] == [4096, 4096, len(reply) - 8192]
    assert "".join(chunks) == reply
    kinds = [r["event_type"] for r in stored]
    last_delta = max(i for i, k in enumerate(kinds) if k == "model_text_delta")
    assert kinds.index("model_started") < kinds.index("model_text_delta") and last_delta < kinds.index(
        "model_completed"
    )
    assert "message_delta" not in kinds


async def test_task_internals_are_debug_only(soong_env: SoongEnv) -> None:
    step = {"step_id": "s1", "title": "one", "summary": "first step", "depends_on_step_ids": []}
    create = {"task_id": "t1", "wal_name": "work", "title": "T", "summary": "S", "steps": [step]}
    fake = FakeProvider(
        tool_calls(("agent.task_create", create, "call_task"), ("code.list_dir", {"path": "."}, "call_ls")),
        tool_calls(("agent.task_create", {"task_id": "bad id!"}, "call_bad")),
        text("planned"),
    )
    # the orchestrator's prompt with every default tool outgrew the baseline's 8192-token window
    async with open_runtime(soong_env, fake, config={"model": {"context_window": 200_000}}) as rt:
        run = await rt.start("plan the work", mode="orchestrator")
        stream = run.events()
        plain = [e async for e in stream]
    assert run.status == RunStatus.completed, run.error
    tool_events = [e for e in plain if e.event_type.value.startswith("tool_")]
    assert {e.tool_call_id for e in tool_events} == {"call_ls"}
    assert not [e for e in plain if e.event_type.value.startswith("task_")]
    stored = persisted_events(soong_env, run.session_id, run.run_id)
    by_call = {(r["event_type"], r["tool_call_id"]) for r in stored}
    assert {
        ("tool_started", "call_task"),
        ("tool_completed", "call_task"),
        ("tool_failed", "call_bad"),
    } <= by_call
    assert "task_created" in {r["event_type"] for r in stored}
    assert (soong_env.project / ".soong-agent" / "tasks" / run.session_id / "work.wal.jsonl").is_file()

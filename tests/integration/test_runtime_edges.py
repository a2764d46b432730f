"""Runtime edge cases through the public API: the event catalogue (payload keys, levels, visibility,
persistence), max_tokens continuations, resuming a session in a new runtime, queue progress after failures,
cancellation while a permission prompt is open, context reports for skipped nodes, and a few argument checks
(docs/runs.md, docs/events.md)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from agent_core import AgentCoreError, EndReason, ErrorCode, RunStatus, RuntimeEvent, ToolDefinition
from agent_core._storage._reports import expand_report, ids_by_seq
from agent_core.types.enums import DEBUG_ONLY_EVENTS, TRANSIENT_EVENTS, EventType
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, fail, hang, text, tool_calls
from tests.fixtures.runtime import collect, open_runtime, rows, types

# docs/events.md#catalogue: (visibility, persisted, level, payload keys) of the events the loop itself emits
CATALOGUE: dict[str, tuple[str, str, str, set[str]]] = {
    "run_queued": ("U", "P", "info", {"queue_position", "mode"}),
    "run_dequeued": ("U", "P", "info", {"reason"}),
    "run_cancelled": ("U", "P", "warning", {"reason", "was_queued", "end_reason"}),
    "run_completed": ("U", "P", "info", {"end_reason", "turn_count", "usage", "final_node_id"}),
    "cancel_timeout": ("U", "P", "warning", {"cancel_timeout_ms"}),
    "loop_started": ("U", "P", "info", {"mode", "agent_type", "max_turns"}),
    "loop_completed": ("U", "P", "info", {"end_reason", "turn_count"}),
    "loop_aborted": ("U", "P", "warning", {"end_reason", "abort_reason"}),
    "loop_failed": ("U", "P", "error", {"end_reason", "error"}),
    "aborted_streaming": ("U", "P", "warning", {"abort_reason", "partial_node_id"}),
    "aborted_tools": ("U", "P", "warning", {"abort_reason", "tool_call_ids"}),
    "context_built": ("D", "P", "debug", {"run_id", "agent_id", "turn", "token_budget", "system_blocks"}),
    "message_created": ("U", "P", "info", {"role", "text_preview"}),
    "message_delta": ("U", "T", "info", {"text"}),
    "message_completed": ("U", "P", "info", {"role", "text", "has_tool_calls"}),
    "model_started": ("D", "P", "info", {"provider", "model", "turn"}),
    # issue 32: the status line of a model call (waiting / streaming / done), live only
    "model_progress": ("U", "T", "info", {"phase", "provider", "model", "turn", "prompt_tokens"}),
    "model_text_delta": ("D", "T", "debug", {"text"}),
    "tool_call_delta": ("D", "T", "debug", {"index", "phase", "tool_call_id", "name", "arguments_delta"}),
    "model_completed": (
        "D",
        "P",
        "info",
        {"stop_reason", "raw_stop_reason", "usage", "tool_call_count", "latency_ms", "retries"},
    ),
    "model_failed": ("U", "P", "error", {"error", "partial_node_id"}),
    "tool_started": ("U", "P", "info", {"tool_name", "args_summary", "permission", "tags"}),
    "tool_progress": ("U", "T", "info", {"tool_name", "progress"}),
    "tool_completed": ("U", "P", "info", {"tool_name", "duration_ms", "summary", "artifact_ids"}),
    "tool_failed": ("U", "P", "warning", {"tool_name", "error", "aborted"}),
    "tool_denied": ("U", "P", "warning", {"tool_name", "denied_by", "reason", "hook_summary"}),
    "error": ("U", "P", "error", {"type", "code", "message", "retryable", "details", "redacted"}),
}


def tool_def(name: str, permission: str = "readonly") -> ToolDefinition:
    return ToolDefinition(
        name=name,
        description=f"{name} test tool.",
        input_schema={"type": "object", "properties": {}},
        permission=permission,  # type: ignore[arg-type]
    )


def check_catalogue(events: list[RuntimeEvent]) -> set[str]:
    seen = set()
    for event in events:
        name = event.event_type.value
        if name not in CATALOGUE:
            continue
        seen.add(name)
        visibility, persisted, level, keys = CATALOGUE[name]
        assert keys <= set(event.data), (name, keys - set(event.data))
        assert event.level == level, (name, event.level)
        assert (event.event_type in DEBUG_ONLY_EVENTS) == (visibility == "D"), name
        assert (event.seq is None) == (persisted == "T"), name
        if event.tool_call_id is None:
            assert not name.startswith("tool_"), name
    return seen


async def test_event_catalogue_payload_keys_levels_and_persistence(soong_env: SoongEnv) -> None:
    entered = asyncio.Event()
    cancel_gate = asyncio.Event()

    async def progress(args: dict[str, Any], ctx: Any) -> str:
        await ctx.emit_progress({"pct": 50})
        return "ok"

    async def broken(args: dict[str, Any], ctx: Any) -> str:
        raise RuntimeError("nope")

    async def blocking(args: dict[str, Any], ctx: Any) -> str:
        entered.set()
        await ctx.cancel_event.wait()
        return "partial"

    fake = FakeProvider(
        tool_calls(
            ("demo.progress", {}, "call_p"), ("demo.broken", {}, "call_b"), ("demo.write", {}, "call_w")
        ),
        text("done"),
        hang(cancel_gate, lead_text="partial"),
        tool_calls(("demo.blocking", {}, "call_x")),
        fail(after_text="oops"),
    )
    all_events: list[RuntimeEvent] = []
    async with open_runtime(soong_env, fake) as rt:
        rt.register_tool(tool_def("demo.progress"), progress)
        rt.register_tool(tool_def("demo.broken"), broken)
        rt.register_tool(tool_def("demo.write", "write"), progress)  # denied: no permission callback
        rt.register_tool(tool_def("demo.blocking"), blocking)
        first = await rt.start("one")
        all_events += await collect(first, debug=True)
        sid = first.session_id
        streaming = await rt.start("two", session_id=sid)
        queued = await rt.start("three", session_id=sid)
        stream_events = asyncio.create_task(collect(streaming, debug=True))
        queued_events = asyncio.create_task(collect(queued, debug=True))
        await asyncio.sleep(0.05)
        await streaming.cancel()
        await asyncio.wait_for(entered.wait(), 5)
        await queued.cancel()
        all_events += await stream_events + await queued_events
        failing = await rt.start("four", session_id=sid)
        all_events += await collect(failing, debug=True)
    seen = check_catalogue(all_events)
    expected = set(CATALOGUE) - {"cancel_timeout"}
    assert expected <= seen, expected - seen
    # persisted events carry the same payloads as delivered (context reports: node-id lists stored as
    # node_seq ranges, expanded on read)
    stored = {r["event_id"]: r for r in rows(soong_env, f'SELECT * FROM "events_{sid}"')}
    seqs = ids_by_seq(
        [(r["node_seq"], r["node_id"]) for r in rows(soong_env, f'SELECT * FROM "nodes_{sid}"')]
    )
    compact = 0
    for event in all_events:
        if event.seq is not None:
            row = stored[event.event_id]
            assert row["seq"] == event.seq and row["event_type"] == event.event_type.value
            payload = json.loads(row["payload_json"] or "{}")
            compact += "node_seq_ranges" in (row["payload_json"] or "")
            expand_report(payload, seqs)
            assert payload == event.data
    assert compact, "long context reports are stored compactly"
    assert {t.value for t in TRANSIENT_EVENTS} == {
        "message_delta",
        "reasoning_delta",  # issue 34
        "model_text_delta",
        "tool_call_delta",
        "tool_progress",
        "provider_debug",
        "model_progress",
    }
    progress = [e.data for e in all_events if e.event_type == EventType.model_progress]
    phases = [p["phase"] for p in progress]
    assert phases[:3] == ["waiting", "streaming", "done"]  # one model call of the first run
    assert isinstance(progress[0]["prompt_tokens"], int) and progress[0]["prompt_tokens"] > 0
    assert progress[1]["waited_ms"] >= 0
    assert progress[2]["output_tokens"] >= 0 and "tokens_per_second" in progress[2]


async def test_max_tokens_continuations(soong_env: SoongEnv) -> None:
    fake = FakeProvider(
        text("part one ", stop="max_tokens"),
        text("part two", stop="end_turn"),
        *[text(f"cut {i}", stop="max_tokens") for i in range(4)],
    )
    async with open_runtime(soong_env, fake) as rt:
        ok = await rt.start("long")
        await collect(ok)
        too_long = await rt.start("longer", session_id=ok.session_id)
        events = await collect(too_long)
    assert ok.status == RunStatus.completed and ok.end_reason == EndReason.completed
    assert "part one" in json.dumps([m.model_dump(mode="json") for m in fake.requests[1].messages])
    assert too_long.status == RunStatus.failed and too_long.end_reason == EndReason.max_output_tokens_recovery
    assert len(fake.requests) == 2 + 4  # the first answer and at most 3 continuations
    assert events[-1].event_type == EventType.loop_failed
    assert events[-1].data["end_reason"] == "max_output_tokens_recovery"


async def test_a_model_repeating_itself_is_not_continued(soong_env: SoongEnv) -> None:
    """Issue 32: a weak model that loops until max_output_tokens gets one continuation at most."""
    loop = "Sure! I can help you with that. Let me know what you need. " * 20
    fake = FakeProvider(
        text("An honest start of a long answer that goes on and on about the project", stop="max_tokens"),
        text(loop, stop="max_tokens"),
        *[text(f"never asked {i}", stop="max_tokens") for i in range(3)],
    )
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("tell me everything")
        events = await collect(run)
    assert len(fake.requests) == 2  # the answer and the one continuation that looped: no more calls
    assert run.status == RunStatus.failed and run.end_reason == EndReason.max_output_tokens_recovery
    assert run.error is not None and run.error.details["cause"] == "repetition"
    assert "repeats text it already produced" in run.error.message
    assert events[-1].event_type == EventType.loop_failed
    assert events[-1].data["error"]["details"]["cause"] == "repetition"


async def test_resume_session_in_a_new_runtime(soong_env: SoongEnv) -> None:
    fake1 = FakeProvider(text("remembered answer"))
    async with open_runtime(soong_env, fake1) as rt:
        first = await rt.start("first question")
        await collect(first)
    fake2 = FakeProvider(text("second answer"))
    async with open_runtime(soong_env, fake2, write_config=False) as rt2:
        second = await rt2.start("follow up", session_id=first.session_id)
        await collect(second)
        assert second.agent_id == first.agent_id
    sent = json.dumps([m.model_dump(mode="json") for m in fake2.requests[0].messages])
    assert "first question" in sent and "remembered answer" in sent and "follow up" in sent
    nodes = rows(
        soong_env, f'SELECT node_id, parent_id, role FROM "nodes_{first.session_id}" ORDER BY node_seq'
    )
    assert nodes[2]["parent_id"] == nodes[1]["node_id"]


async def test_queue_continues_after_failed_and_cancelled_runs(soong_env: SoongEnv) -> None:
    gate = asyncio.Event()
    fake = FakeProvider(fail(), hang(gate), text("third works"))
    async with open_runtime(soong_env, fake) as rt:
        r1 = await rt.start("one")
        r2 = await rt.start("two", session_id=r1.session_id)
        r3 = await rt.start("three", session_id=r1.session_id)
        await collect(r1)
        while len(fake.requests) < 2:
            await asyncio.sleep(0.005)
        await r2.cancel()
        await collect(r3)
    assert [r.status for r in (r1, r2, r3)] == [RunStatus.failed, RunStatus.cancelled, RunStatus.completed]


async def test_cancel_while_permission_prompt_is_open(soong_env: SoongEnv) -> None:
    asked = asyncio.Event()
    released: list[str] = []

    async def never_answers(request: Any) -> Any:
        asked.set()
        try:
            await asyncio.sleep(60)
        finally:
            released.append(request.tool_name)

    executed: list[str] = []

    async def write(args: dict[str, Any], ctx: Any) -> str:
        executed.append("ran")
        return "written"

    fake = FakeProvider(tool_calls(("demo.write", {}, "call_w")))
    async with open_runtime(soong_env, fake, permission_callback=never_answers) as rt:
        rt.register_tool(tool_def("demo.write", "write"), write)
        run = await rt.start("write something")
        await asyncio.wait_for(asked.wait(), 5)
        result = await run.cancel()
        events = await collect(run)
    assert result.cancelled and not result.timed_out and run.end_reason == EndReason.aborted_tools
    assert executed == [] and released == ["demo.write"]
    assert types(events)[-3:] == ["aborted_tools", "loop_aborted", "run_cancelled"]
    tool_row = rows(soong_env, f"SELECT content_json FROM \"nodes_{run.session_id}\" WHERE role = 'tool'")[0]
    assert json.loads(tool_row["content_json"])[0]["error"]["code"] == "cancelled"


async def test_context_report_never_includes_partial_or_failed_nodes(soong_env: SoongEnv) -> None:
    gate = asyncio.Event()
    fake = FakeProvider(fail(after_text="half"), hang(gate, lead_text="cut"), text("fine"))
    async with open_runtime(soong_env, fake) as rt:
        r1 = await rt.start("one")
        await collect(r1)
        r2 = await rt.start("two", session_id=r1.session_id)
        while len(fake.requests) < 2:
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.02)
        await r2.cancel()
        r3 = await rt.start("three", session_id=r1.session_id)
        events = await collect(r3, debug=True)
    report = next(e for e in events if e.event_type == EventType.context_built).data
    nodes = rows(soong_env, f'SELECT node_id, metadata_json FROM "nodes_{r1.session_id}" ORDER BY node_seq')
    failed = next(n["node_id"] for n in nodes if '"failed":true' in (n["metadata_json"] or ""))
    aborted = next(n["node_id"] for n in nodes if '"aborted":true' in (n["metadata_json"] or ""))
    assert failed not in report["included_node_ids"] and aborted not in report["included_node_ids"]
    # they are not even on the active path: the next user node hangs off the last visible node
    parents = {
        n["node_id"]: n["parent_id"]
        for n in rows(soong_env, f'SELECT node_id, parent_id FROM "nodes_{r1.session_id}"')
    }
    users = [
        n["node_id"]
        for n in rows(
            soong_env, f"SELECT node_id FROM \"nodes_{r1.session_id}\" WHERE role = 'user' ORDER BY node_seq"
        )
    ]
    assert parents[failed] == users[0] and parents[aborted] == users[1]
    assert parents[users[1]] == users[0] and parents[users[2]] == users[1]
    sent = json.dumps([m.model_dump(mode="json") for m in fake.requests[2].messages])
    assert "half" not in sent and '"cut"' not in sent and "one" in sent and "two" in sent


async def test_message_preview_and_finished_stream(soong_env: SoongEnv) -> None:
    fake = FakeProvider(text("ok"))
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("x" * 500)
        events = await collect(run)
        assert [e async for e in run.events()] == []  # the stream already ended; nothing is replayed
    created = next(e for e in events if e.event_type == EventType.message_created)
    assert created.data["text_preview"] == "x" * 200


async def test_session_argument_checks(soong_env: SoongEnv) -> None:
    fake = FakeProvider(text("a"), text("b"))
    async with open_runtime(soong_env, fake) as rt:
        r1 = await rt.start("one")
        await collect(r1)
        r2 = await rt.start("two")
        await collect(r2)
        other_node = rows(soong_env, f'SELECT node_id FROM "nodes_{r2.session_id}"')[0]["node_id"]
        with pytest.raises(AgentCoreError) as cross:
            await rt.switch_node(r1.session_id, other_node)
        assert cross.value.code == ErrorCode.validation_error
        assert (await rt.delete_session(r2.session_id)).deleted
        with pytest.raises(AgentCoreError) as gone:
            await rt.start("again", session_id=r2.session_id)
        assert gone.value.code == ErrorCode.validation_error
        with pytest.raises(AgentCoreError) as bad_path:
            await rt.get_node_path(other_node)
        assert bad_path.value.code == ErrorCode.validation_error


async def test_prompt_too_long_when_the_static_prompt_cannot_fit(soong_env: SoongEnv) -> None:
    fake = FakeProvider()
    # 800: even system.core + one-line tool schemas + the 512-token output floor exceed it (a 3000 window
    # now runs with a degraded static prompt, issue 13)
    async with open_runtime(soong_env, fake, config={"model": {"context_window": 800}}) as rt:
        run = await rt.start("hello")
        events = await collect(run, debug=True)
    assert run.status == RunStatus.failed and run.end_reason == EndReason.prompt_too_long
    assert fake.requests == []  # nothing was sent
    names = types(events)
    assert "context_built" in names and names[-1] == "loop_failed"
    assert events[-1].data["end_reason"] == "prompt_too_long"
    row = rows(soong_env, "SELECT status, end_reason, error_json FROM runs WHERE run_id = ?", run.run_id)[0]
    assert (row["status"], row["end_reason"]) == ("failed", "prompt_too_long")
    assert json.loads(row["error_json"])["details"]["estimated_tokens"] > 3000 - 1024


async def test_huge_user_message_is_degraded_not_failed(soong_env: SoongEnv) -> None:
    fake = FakeProvider(text("read it"))
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("start " + "word " * 20000)
        events = await collect(run, debug=True)
    assert run.status == RunStatus.completed, run.error
    report = next(e for e in events if e.event_type == EventType.context_built).data
    assert report["artifact_degradations"] and report["artifact_degradations"][0]["action"] == "artifact_ref"
    sent = json.dumps([m.model_dump(mode="json") for m in fake.requests[0].messages])
    assert len(sent) < 20000 and "artifact_" in sent
    kinds = [
        json.loads(r["metadata_json"])["kind"] for r in rows(soong_env, "SELECT metadata_json FROM artifacts")
    ]
    assert kinds == ["context_degradation"]


async def test_active_node_advances_during_the_run_and_session_row(soong_env: SoongEnv) -> None:
    gate = asyncio.Event()
    fake = FakeProvider(tool_calls(("code.list_dir", {"path": "."}, "call_1")), hang(gate), fail())
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("hello")
        while len(fake.requests) < 2:
            await asyncio.sleep(0.005)
        sid = run.session_id
        tool_node = rows(soong_env, f"SELECT node_id FROM \"nodes_{sid}\" WHERE role = 'tool'")[0]["node_id"]
        active = rows(soong_env, "SELECT active_node_id FROM sessions WHERE session_id = ?", sid)[0][0]
        assert active == tool_node  # advanced while the run is still going
        gate.set()
        await collect(run)
        failed = await rt.start("again", session_id=sid)
        await collect(failed)
        replay = await rt.replay_session(sid)
    session = rows(soong_env, "SELECT cwd, status, root_agent_id FROM sessions WHERE session_id = ?", sid)[0]
    assert (session["cwd"], session["status"], session["root_agent_id"]) == (
        str(soong_env.project),
        "active",
        run.agent_id,
    )
    infos = {r.run_id: r for r in replay.runs}
    assert infos[run.run_id].status == RunStatus.completed and infos[run.run_id].turn_count == 2
    assert infos[run.run_id].usage is not None and infos[run.run_id].agent_type == "main"
    assert infos[failed.run_id].status == RunStatus.failed and infos[failed.run_id].error is not None
    assert infos[failed.run_id].error.code == "provider_error" and infos[failed.run_id].error.redacted

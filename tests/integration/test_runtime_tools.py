"""Tool calls inside the loop through the public API (cases D8, D12 (unknown name), D15; docs/runs.md;
docs/providers.md)."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

from agent_core import AgentCoreError, ErrorCode, RunStatus, TextBlock, ToolDefinition, ToolResult
from agent_core.types.content import ToolCallBlock, ToolResultBlock
from agent_core.types.enums import EventType
from agent_core.types.model import (
    ModelCompleted,
    ModelEvent,
    ModelRequest,
    ModelStarted,
    StopReason,
    ToolCall,
    Usage,
)
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, Turn, text, tool_calls, unsupported
from tests.fixtures.runtime import collect, open_runtime, rows, types
from tests.fixtures.tool_pipeline import PermissionRecorder


def tool_def(
    name: str, permission: str = "readonly", properties: dict[str, Any] | None = None
) -> ToolDefinition:
    return ToolDefinition(
        name=name,
        description=f"{name} test tool.",
        input_schema={"type": "object", "properties": properties or {}},
        permission=permission,  # type: ignore[arg-type]
    )


def tool_results(request: ModelRequest) -> dict[str, ToolResultBlock]:
    out: dict[str, ToolResultBlock] = {}
    for message in request.messages:
        for block in message.content:
            if isinstance(block, ToolResultBlock):
                out[block.tool_call_id] = block
    return out


def tool_nodes(env: SoongEnv, session_id: str) -> list[dict[str, Any]]:
    return [
        dict(r)
        for r in rows(env, f"SELECT * FROM \"nodes_{session_id}\" WHERE role = 'tool' ORDER BY node_seq")
    ]


# ---- D8: parallel readonly batch ----------------------------------------------------------


async def test_parallel_readonly_tools(soong_env: SoongEnv) -> None:
    """Case D8."""
    barrier = threading.Barrier(2, timeout=2)
    running: list[str] = []

    async def waiter(args: dict[str, Any], ctx: Any) -> str:
        running.append(ctx.tool_call_id)
        await asyncio.to_thread(barrier.wait)  # only passes when both handlers run at the same time
        await ctx.emit_progress({"step": "passed barrier"})
        return f"done {ctx.tool_call_id}"

    db_state_at_second_request: dict[str, Any] = {}

    def route(request: ModelRequest) -> Turn | None:
        if len(fake.requests) == 2:
            sid = request.metadata["session_id"]
            db_state_at_second_request["tool_nodes"] = len(tool_nodes(soong_env, sid))
            db_state_at_second_request["completed"] = rows(
                soong_env, f"SELECT count(*) AS n FROM \"events_{sid}\" WHERE event_type = 'tool_completed'"
            )[0]["n"]
        return None

    fake = FakeProvider(
        tool_calls(("demo.a", {}, "call_a"), ("demo.b", {}, "call_b")),
        text("both done"),
    ).route(route)
    async with open_runtime(soong_env, fake) as rt:
        rt.register_tool(tool_def("demo.a"), waiter)
        rt.register_tool(tool_def("demo.b"), waiter)
        run = await rt.start("go")
        events = await collect(run)
    assert run.status == RunStatus.completed, run.error
    assert sorted(running) == ["call_a", "call_b"]
    for call_id in ("call_a", "call_b"):
        for kind in (EventType.tool_started, EventType.tool_progress, EventType.tool_completed):
            assert any(e.event_type == kind and e.tool_call_id == call_id for e in events), (kind, call_id)
    progress = [e for e in events if e.event_type == EventType.tool_progress]
    assert all(e.seq is None and e.data["progress"] == {"step": "passed barrier"} for e in progress)
    assert db_state_at_second_request == {"tool_nodes": 2, "completed": 2}
    results = tool_results(fake.requests[1])
    assert {k: [b.text for b in v.content if isinstance(b, TextBlock)] for k, v in results.items()} == {
        "call_a": ["done call_a"],
        "call_b": ["done call_b"],
    }
    # the request orders the results by the assistant message's call order
    order = [
        b.tool_call_id for m in fake.requests[1].messages for b in m.content if isinstance(b, ToolResultBlock)
    ]
    assert order == ["call_a", "call_b"]


async def test_write_call_is_a_scheduling_boundary(soong_env: SoongEnv) -> None:
    """Case D8."""
    timeline: list[tuple[str, str, float]] = []

    def recorder(name: str, delay: float) -> Any:
        async def handler(args: dict[str, Any], ctx: Any) -> str:
            timeline.append((name, "start", time.monotonic()))
            await asyncio.sleep(delay)
            timeline.append((name, "end", time.monotonic()))
            return name

        return handler

    fake = FakeProvider(
        tool_calls(
            ("demo.read_a", {}, "call_a"), ("demo.write_w", {}, "call_w"), ("demo.read_b", {}, "call_b")
        ),
        text("ok"),
    )
    permissions = PermissionRecorder.always("allow_once")
    async with open_runtime(soong_env, fake, permission_callback=permissions) as rt:
        rt.register_tool(tool_def("demo.read_a"), recorder("A", 0.1))
        rt.register_tool(tool_def("demo.write_w", "write"), recorder("W", 0.05))
        rt.register_tool(tool_def("demo.read_b"), recorder("B", 0.01))
        run = await rt.start("go")
        await collect(run)
    assert run.status == RunStatus.completed
    assert [(n, k) for n, k, _ in timeline] == [
        ("A", "start"),
        ("A", "end"),
        ("W", "start"),
        ("W", "end"),
        ("B", "start"),
        ("B", "end"),
    ]
    assert [r.tool_name for r in permissions.requests] == ["demo.write_w"]


# ---- D15: result wrapping and pairing --------------------------------------------------------------


async def test_return_values_are_wrapped_and_paired(soong_env: SoongEnv) -> None:
    """Case D15."""
    values: dict[str, Any] = {
        "str": "plain",
        "dict": {"a": 1},
        "list": [1, 2],
        "int": 3,
        "bool": True,
        "none": None,
    }

    async def returning(args: dict[str, Any], ctx: Any) -> Any:
        kind = str(args["kind"])
        if kind == "result":
            return ToolResult(tool_call_id="wrong_id", tool_name="wrong", content=[TextBlock(text="direct")])
        if kind == "boom":
            raise RuntimeError("handler exploded")
        if kind == "core_error":
            raise AgentCoreError(ErrorCode.file_not_found, "no such thing")
        if kind == "sync_thread":
            return "unused"
        return values[kind]

    def sync_handler(args: dict[str, Any], ctx: Any) -> str:
        return f"sync on {threading.current_thread().name != 'MainThread'}"

    kinds = [*values, "result", "boom", "core_error"]
    calls = [("demo.ret", {"kind": k}, f"call_{k}") for k in kinds] + [("demo.sync", {}, "call_sync")]
    fake = FakeProvider(tool_calls(*calls), text("thanks"))
    async with open_runtime(soong_env, fake) as rt:
        rt.register_tool(tool_def("demo.ret", properties={"kind": {"type": "string"}}), returning)
        rt.register_tool(tool_def("demo.sync"), sync_handler)
        run = await rt.start("go")
        events = await collect(run)
    assert run.status == RunStatus.completed and len(fake.requests) == 2
    results = tool_results(fake.requests[1])
    assert set(results) == {c[2] for c in calls}
    dumped = {k: v.model_dump(mode="json") for k, v in results.items()}
    assert dumped["call_str"]["content"] == [{"type": "text", "text": "plain"}]
    for kind in ("dict", "list", "int", "bool"):
        block = dumped[f"call_{kind}"]["content"][0]
        assert block["type"] == "json" and block["data"] == values[kind]
    assert dumped["call_none"]["content"] == []
    assert dumped["call_result"]["content"] == [{"type": "text", "text": "direct"}]
    assert dumped["call_result"]["metadata"].get("handler_tool_call_id") == "wrong_id"
    assert dumped["call_boom"]["is_error"] and dumped["call_boom"]["error"]["code"] == "internal_error"
    assert dumped["call_core_error"]["error"]["code"] == "file_not_found"
    assert dumped["call_sync"]["content"] == [{"type": "text", "text": "sync on True"}]
    assert all(not dumped[f"call_{k}"]["is_error"] for k in values)
    failed = {e.tool_call_id for e in events if e.event_type == EventType.tool_failed}
    assert failed == {"call_boom", "call_core_error"}
    nodes = tool_nodes(soong_env, run.session_id)
    assert {json.loads(n["content_json"])[0]["tool_call_id"] for n in nodes} == set(results)
    assert all(json.loads(n["metadata_json"])["tool_name"] in {"demo.ret", "demo.sync"} for n in nodes)


# ---- denial stops later calls only after a write denial ---------------------------------------


async def test_write_denial_skips_rest_readonly_denial_does_not(soong_env: SoongEnv) -> None:
    executed: list[str] = []

    async def handler(args: dict[str, Any], ctx: Any) -> str:
        executed.append(ctx.tool_name)
        return "ran"

    soong_env.write_project(".env", "X=1\n")
    fake = FakeProvider(
        tool_calls(("demo.write", {}, "call_w"), ("demo.read", {}, "call_r1")),
        tool_calls(("code.read_file", {"path": ".env"}, "call_env"), ("demo.read", {}, "call_r2")),
        text("done"),
    )
    permissions = PermissionRecorder(lambda req: _deny())  # no write allowed; sensitive reads denied
    async with open_runtime(soong_env, fake, permission_callback=permissions) as rt:
        rt.register_tool(tool_def("demo.write", "write"), handler)
        rt.register_tool(tool_def("demo.read"), handler)
        run = await rt.start("go")
        events = await collect(run)
    assert run.status == RunStatus.completed
    first = tool_results(fake.requests[1])
    assert first["call_w"].error is not None and first["call_w"].error.code == "permission_denied"
    assert first["call_r1"].is_error and first["call_r1"].error is not None
    assert first["call_r1"].error.code == "cancelled"
    second = tool_results(fake.requests[2])
    assert second["call_env"].error is not None and second["call_env"].error.code == "permission_denied"
    assert not second["call_r2"].is_error
    assert executed == ["demo.read"]  # only the readonly call after the readonly denial ran
    denied = [e.tool_call_id for e in events if e.event_type == EventType.tool_denied]
    assert denied == ["call_w", "call_env"]
    assert [r.tool_name for r in permissions.requests] == ["demo.write", "code.read_file"]


def _deny() -> Any:
    from agent_core import PermissionDecision

    return PermissionDecision(decision="deny", reason="not today")


# ---- D12 (unknown name): tool outside the effective set ---------------------


async def test_tool_not_available(soong_env: SoongEnv) -> None:
    """Case D12."""
    fake = FakeProvider(
        tool_calls(("nope.tool", {}, "call_nope"), ("code.run_command", {"argv": ["true"]}, "call_disabled")),
        text("ok, I will not"),
    )
    config = {"tools": {"disabled": ["code.run_command"]}}
    async with open_runtime(
        soong_env, fake, config=config, permission_callback=PermissionRecorder.never()
    ) as rt:
        run = await rt.start("go")
        events = await collect(run)
    assert run.status == RunStatus.completed
    assert "code.run_command" not in {t.name for t in fake.requests[0].tools}
    results = tool_results(fake.requests[1])
    for call_id in ("call_nope", "call_disabled"):
        assert results[call_id].error is not None and results[call_id].error.code == "tool_not_available"
    failed = [e for e in events if e.event_type == EventType.tool_failed]
    assert {e.tool_call_id for e in failed} == {"call_nope", "call_disabled"}
    assert all(e.data["error"]["code"] == "tool_not_available" for e in failed)


# ---- max_turns --------------------------------------------------------------------------------


async def test_max_turns(soong_env: SoongEnv) -> None:
    fake = FakeProvider().route(lambda req: tool_calls(("code.list_dir", {"path": "."})))
    async with open_runtime(soong_env, fake, config={"runtime": {"max_turns": 3}}) as rt:
        run = await rt.start("loop forever")
        events = await collect(run)
    assert len(fake.requests) == 3
    assert run.status == RunStatus.failed and run.end_reason == "max_turns"
    assert types(events)[-1] == "loop_failed" and events[-1].data["end_reason"] == "max_turns"
    assert events[0].data["max_turns"] == 3
    row = rows(soong_env, "SELECT status, end_reason, turn_count FROM runs WHERE run_id = ?", run.run_id)[0]
    assert (row["status"], row["end_reason"], row["turn_count"]) == ("failed", "max_turns", 3)
    # every call got its result before the run ended
    assert len(tool_nodes(soong_env, run.session_id)) == 3


# ----: unsupported capability ------------------------------------------------


async def test_providers07_unsupported_tools_fails_without_retry(soong_env: SoongEnv) -> None:
    fake = FakeProvider(unsupported("tools"))
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("hello")
        events = await collect(run)
    assert run.status == RunStatus.failed and run.end_reason == "failed"
    assert run.error is not None and run.error.code == "unsupported_capability"
    assert len(fake.requests) == 1
    assert types(events)[-2:] == ["error", "loop_failed"]
    assert "message_completed" not in types(events)
    row = rows(soong_env, "SELECT error_json FROM runs WHERE run_id = ?", run.run_id)[0]
    error = json.loads(row["error_json"])
    assert error["code"] == "unsupported_capability"
    assert error["details"]["provider"] == "fake" and error["details"]["capability"] == "tools"
    assert error["details"]["model"] == "test-model"
    roles = [r["role"] for r in rows(soong_env, f'SELECT role FROM "nodes_{run.session_id}"')]
    assert roles == ["user"]


async def test_providers08_empty_tool_set_runs_plain_text(soong_env: SoongEnv) -> None:
    def route(request: ModelRequest) -> Turn:
        return unsupported("tools") if request.tools else text("plain answer")

    fake = FakeProvider().route(route)
    config = {"tools": {"disabled": ["code.*", "internal.*", "agent.*"]}}
    async with open_runtime(soong_env, fake, config=config) as rt:
        run = await rt.start("hello")
        await collect(run)
    assert fake.requests[0].tools == []
    assert run.status == RunStatus.completed, run.error


# ---- invalid JSON arguments ---------------------------------------------------------------


def bad_arguments_turn() -> Turn:
    async def turn(fake: FakeProvider, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        yield ModelStarted(provider=fake.provider_key, model=request.model)
        call = ToolCall(
            tool_call_id="call_bad",
            name="demo.echo",
            arguments={},
            metadata={"arguments_error": "Expecting value: line 1 column 5", "raw_arguments": '{"x": '},
        )
        yield ModelCompleted(
            content=[ToolCallBlock(tool_call_id="call_bad", name="demo.echo", arguments={})],
            tool_calls=[call],
            usage=Usage(input_tokens=1, output_tokens=1, total_tokens=2),
            stop_reason=StopReason(reason="tool_use", raw_stop_reason="tool_calls"),
            metadata={"provider": fake.provider_key, "model": request.model},
        )

    return turn


async def test_providers17_invalid_json_arguments_never_reach_the_handler(soong_env: SoongEnv) -> None:
    called: list[Any] = []

    async def echo(args: dict[str, Any], ctx: Any) -> str:
        called.append(args)
        return "echo"

    fake = FakeProvider(bad_arguments_turn(), text("sorry"))
    async with open_runtime(soong_env, fake) as rt:
        rt.register_tool(tool_def("demo.echo"), echo)
        run = await rt.start("go")
        events = await collect(run)
    assert run.status == RunStatus.completed and called == []
    result = tool_results(fake.requests[1])["call_bad"]
    assert result.is_error and result.error is not None and result.error.code == "validation_error"
    assert any(e.event_type == EventType.tool_failed and e.tool_call_id == "call_bad" for e in events)


# ---- a failing hook does not block ------------------------------------------------------------


async def test_failing_hook_is_recorded_and_tool_runs(soong_env: SoongEnv) -> None:
    script = soong_env.write_home(
        "hooks/fail.py", "import sys\nsys.stderr.write('hook broke')\nsys.exit(3)\n"
    )
    soong_env.write_home(
        "hooks.json",
        json.dumps(
            {
                "version": 1,
                "hooks": {
                    "PreToolUse": [
                        {
                            "matcher": {"tool_name": "demo.echo"},
                            "hooks": [{"type": "command", "command": f"{sys.executable} {script}"}],
                        }
                    ]
                },
            }
        ),
    )
    ran: list[str] = []

    async def echo(args: dict[str, Any], ctx: Any) -> str:
        ran.append("yes")
        return "echo"

    fake = FakeProvider(tool_calls(("demo.echo", {}, "call_1")), text("done"))
    async with open_runtime(soong_env, fake) as rt:
        rt.register_tool(tool_def("demo.echo"), echo)
        run = await rt.start("go")
        events = await collect(run, debug=True)
    assert run.status == RunStatus.completed and ran == ["yes"]
    failed = [e for e in events if e.event_type == EventType.hook_failed]
    assert len(failed) == 1 and failed[0].data["phase"] == "PreToolUse"
    names = types(events)
    assert names.index("hook_failed") < names.index("tool_completed")
    assert "tool_denied" not in names
    stored = rows(
        soong_env, f"SELECT payload_json FROM \"events_{run.session_id}\" WHERE event_type = 'hook_failed'"
    )
    assert len(stored) == 1 and json.loads(stored[0]["payload_json"])["phase"] == "PreToolUse"

"""ToolExecutor: availability, validation, execution, normalisation, artifacts, events
(docs/tools.md#execution-pipeline)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agent_core._redaction import Redactor
from agent_core.errors import AgentCoreError, ErrorCode, StorageError
from agent_core.tools.context import ToolContext
from agent_core.tools.preflight import Preflight
from agent_core.tools.registry import ToolRegistry
from agent_core.types.content import ArtifactRefBlock, JsonBlock, TextBlock
from agent_core.types.enums import AgentRole, EventType
from agent_core.types.events import ToolResultEvent
from agent_core.types.model import ToolCall
from agent_core.types.tools import ToolDefinition, ToolResult
from tests.fixtures.tool_pipeline import (
    FakeHooks,
    PermissionRecorder,
    make_executor,
    make_settings,
    tool_call,
)
from tests.fixtures.tool_sink import RecordingSink, make_scope

OBJ: dict[str, Any] = {"type": "object", "properties": {}}


def defn(name: str, schema: dict[str, Any] | None = None, **kw: Any) -> ToolDefinition:
    return ToolDefinition(
        name=name,
        description="d",
        input_schema=schema or OBJ,
        permission=kw.pop("permission", "readonly"),
        **kw,
    )


class InternalAdapter:
    """Core-namespace stand-ins registered through the privileged path."""

    def __init__(self, *defs: ToolDefinition, value: Any = "ok") -> None:
        self._defs = list(defs)
        self.value = value
        self.calls: list[ToolCall] = []

    def definitions(self) -> list[ToolDefinition]:
        return self._defs

    async def execute(self, call: ToolCall, ctx: ToolContext) -> Any:
        self.calls.append(call)
        return self.value(call) if callable(self.value) else self.value

    async def close(self) -> None:
        return None


@pytest.fixture
def sink(tmp_path: Path) -> RecordingSink:
    return RecordingSink(tmp_path / "artifacts")


def scope_for(tmp_path: Path, *names: str, **kw: Any) -> Any:
    return make_scope(tmp_path, tmp_path, effective_tools=frozenset(names), **kw)


@pytest.mark.parametrize(
    ("value", "blocks"),
    [
        ("x", [TextBlock(text="x")]),
        ({"a": 1}, [JsonBlock(data={"a": 1})]),
        ([1], [JsonBlock(data=[1])]),
        (5, [JsonBlock(data=5)]),
        (True, [JsonBlock(data=True)]),
        (None, []),
    ],
)
async def test_results_and_completed_events(
    tmp_path: Path, sink: RecordingSink, value: Any, blocks: list[Any]
) -> None:
    reg = ToolRegistry()
    reg.register_tool(defn("my.tool"), lambda args, ctx: value)
    executor, _ = make_executor(reg)
    call = tool_call("my.tool", "call_abc")
    outcome = await executor.execute_turn([call], scope_for(tmp_path, "my.tool"), sink)
    [result] = outcome.results
    assert (result.tool_call_id, result.tool_name, result.content, result.is_error) == (
        "call_abc",
        "my.tool",
        blocks,
        False,
    )
    assert not outcome.aborted and outcome.aborted_call_ids == []
    [(committed, event_type, payload)] = sink.committed
    assert committed == result and event_type == EventType.tool_completed
    assert set(payload) == {"tool_name", "duration_ms", "summary", "artifact_ids"}
    assert payload["tool_name"] == "my.tool" and payload["artifact_ids"] == []
    started = sink.of_type(EventType.tool_started)[0]
    assert started.tool_call_id == "call_abc"
    assert started.payload["permission_outcome"] == {"asked": False, "decision": "allow", "cached": False}
    assert "internal" not in started.payload


async def test_exception_result_and_debug_traceback_artifact(tmp_path: Path, sink: RecordingSink) -> None:
    secret = "tok-abcdefghijkl-secret"

    def boom(args: dict[str, Any], ctx: ToolContext) -> None:
        raise ValueError(f"bad input {secret}")

    reg = ToolRegistry()
    reg.register_tool(defn("my.boom"), boom)
    executor, _ = make_executor(reg, redactor=Redactor(["SVC_TOKEN"], environ={"SVC_TOKEN": secret}))
    [result] = (
        await executor.execute_turn([tool_call("my.boom")], scope_for(tmp_path, "my.boom"), sink)
    ).results
    assert result.is_error and result.error is not None
    assert (result.error.code, result.error.type, result.error.redacted) == (
        ErrorCode.internal_error,
        "tool_error",
        True,
    )
    assert "Traceback" not in json.dumps(result.model_dump(mode="json"))
    assert secret not in json.dumps(result.model_dump(mode="json"))
    [(_, event_type, payload)] = sink.committed
    assert event_type == EventType.tool_failed and payload["error"]["code"] == "internal_error"
    assert payload["aborted"] is False and "traceback_artifact_id" not in result.error.details

    debug_sink = RecordingSink(tmp_path / "debug")
    [dbg] = (
        await executor.execute_turn(
            [tool_call("my.boom")], scope_for(tmp_path, "my.boom", debug=True), debug_sink
        )
    ).results
    assert dbg.error is not None
    artifact = debug_sink.artifacts[dbg.error.details["traceback_artifact_id"]].read_text()
    assert "Traceback" in artifact and "ValueError" in artifact and secret not in artifact


async def test_handler_result_id_is_corrected(tmp_path: Path, sink: RecordingSink) -> None:
    reg = ToolRegistry()
    reg.register_tool(
        defn("my.tool"),
        lambda a, c: ToolResult(tool_call_id="bogus", tool_name="x", content=[TextBlock(text="t")]),
    )
    executor, _ = make_executor(reg)
    [result] = (
        await executor.execute_turn([tool_call("my.tool", "call_1")], scope_for(tmp_path, "my.tool"), sink)
    ).results
    assert result.tool_call_id == "call_1" and result.metadata["handler_tool_call_id"] == "bogus"


SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}},
    "required": ["path"],
    "additionalProperties": False,
}


async def test_validation_and_null_stripping(tmp_path: Path, sink: RecordingSink) -> None:
    """Case G26."""
    seen: list[dict[str, Any]] = []
    reg = ToolRegistry()
    reg.register_tool(defn("my.tool", SCHEMA), lambda args, ctx: seen.append(args))
    hooks = FakeHooks()
    executor, _ = make_executor(reg, callback=PermissionRecorder.never(), hooks=hooks)
    calls = [
        tool_call("my.tool", "c1", limit=0),
        tool_call("my.tool", "c2", path="a", env={"X": "1"}),
        tool_call("my.tool", "c3", path="a", limit=None),
    ]
    outcome = await executor.execute_turn(calls, scope_for(tmp_path, "my.tool"), sink)
    first, second, third = outcome.results
    assert first.error is not None and first.error.code == ErrorCode.validation_error
    assert {e["path"] for e in first.error.details["errors"]} == {"$.path", "$.limit"}
    assert second.error is not None and second.error.details["errors"] == [
        {"path": "$.env", "message": "unexpected property"}
    ]
    assert not third.is_error
    assert seen == [{"path": "a"}]  # the handler never ran for invalid calls; null behaved as omitted
    assert hooks.pre_calls == ["c3"]
    failed = [p for _, t, p in sink.committed if t == EventType.tool_failed]
    assert [p["reason"] for p in failed] == ["validation_error", "validation_error"]


async def test_provider_argument_errors_are_validation_errors(tmp_path: Path, sink: RecordingSink) -> None:
    calls: list[Any] = []
    reg = ToolRegistry()
    reg.register_tool(defn("my.tool"), lambda args, ctx: calls.append(args))
    executor, _ = make_executor(reg)
    bad = tool_call("my.tool", "c1", metadata={"arguments_error": "Expecting ',' delimiter"})
    [result] = (await executor.execute_turn([bad], scope_for(tmp_path, "my.tool"), sink)).results
    assert result.error is not None and result.error.code == ErrorCode.validation_error
    assert "delimiter" in result.error.message and calls == []


async def test_sync_handler_through_the_pipeline(tmp_path: Path, sink: RecordingSink) -> None:
    reg = ToolRegistry()

    @reg.tool("my.sync")
    def add(a: int, b: int = 2) -> int:
        """Adds two numbers."""
        return a + b

    executor, _ = make_executor(reg)
    [result] = (
        await executor.execute_turn([tool_call("my.sync", a=1)], scope_for(tmp_path, "my.sync"), sink)
    ).results
    assert result.content == [JsonBlock(data=3)]


async def test_worker_task_mutator_and_main_task_create(tmp_path: Path, sink: RecordingSink) -> None:
    adapter = InternalAdapter(
        defn("agent.task_update", tags=["agent", "internal"], metadata={"concurrency": "serial"}),
        defn("agent.task_create", tags=["agent", "internal"], metadata={"concurrency": "serial"}),
        defn("agent.task_get", tags=["agent", "internal", "readonly"]),
    )
    reg = ToolRegistry()
    reg.register_adapter(adapter, internal=True)
    hooks = FakeHooks()
    executor, _ = make_executor(reg, callback=PermissionRecorder.never(), hooks=hooks)
    worker = scope_for(tmp_path, "agent.task_get", role=AgentRole.worker)
    outcome = await executor.execute_turn(
        [tool_call("agent.task_update", "c1", task_id="t"), tool_call("agent.task_get", "c2")], worker, sink
    )
    denied, after = outcome.results
    assert denied.error is not None and denied.error.code == ErrorCode.permission_denied
    assert not after.is_error  # not a write-class failure: later calls still run
    assert [c.name for c in adapter.calls] == ["agent.task_get"]
    assert hooks.pre_calls == ["c2"]
    assert sink.committed[0][1] == EventType.tool_denied and sink.committed[0][2]["internal"] is True

    main = scope_for(tmp_path, "agent.task_get", role=AgentRole.main)
    [res] = (await executor.execute_turn([tool_call("agent.task_create", "c3")], main, sink)).results
    assert res.error is not None and res.error.code == ErrorCode.tool_not_available


async def test_unavailable_tools(tmp_path: Path, sink: RecordingSink) -> None:
    ran: list[str] = []
    reg = ToolRegistry()
    reg.register_tool(defn("my.ok"), lambda a, c: ran.append("ok"))
    reg.register_tool(defn("my.disabled", permission="write"), lambda a, c: ran.append("disabled"))
    hooks = FakeHooks()
    executor, _ = make_executor(reg, callback=PermissionRecorder.never(), hooks=hooks)
    calls = [tool_call("no.such", "c1"), tool_call("my.disabled", "c2"), tool_call("my.ok", "c3")]
    outcome = await executor.execute_turn(calls, scope_for(tmp_path, "my.ok"), sink)
    for result, name in zip(outcome.results[:2], ("no.such", "my.disabled"), strict=True):
        assert result.error is not None and result.error.code == ErrorCode.tool_not_available
        assert result.error.message == f"tool '{name}' is not available in this run"
    assert not outcome.results[2].is_error and ran == ["ok"]
    assert hooks.pre_calls == ["c3"]
    failed = [p for _, t, p in sink.committed if t == EventType.tool_failed]
    assert [p["reason"] for p in failed] == ["tool_not_available", "tool_not_available"]


class BigAdapter(InternalAdapter):
    pass


async def test_large_results_artifactised_except_read_file(tmp_path: Path, sink: RecordingSink) -> None:
    big = {"rows": ["x" * 100 for _ in range(1000)]}
    reg = ToolRegistry()
    reg.register_tool(defn("my.big"), lambda a, c: big)
    reg.register_adapter(BigAdapter(defn("code.read_file"), value={"content": "y" * 200_000}), internal=True)
    executor, _ = make_executor(reg)
    outcome = await executor.execute_turn(
        [tool_call("my.big", "c1"), tool_call("code.read_file", "c2")],
        scope_for(tmp_path, "my.big", "code.read_file"),
        sink,
    )
    [block] = outcome.results[0].content
    assert isinstance(block, JsonBlock) and block.data is None and block.summary and block.artifact_id
    assert json.loads(sink.artifacts[block.artifact_id].read_text()) == big
    completed = {p["tool_name"]: p for _, t, p in sink.committed if t == EventType.tool_completed}
    assert completed["my.big"]["artifact_ids"] == [block.artifact_id]
    assert outcome.results[1].content == [JsonBlock(data={"content": "y" * 200_000})]


async def test_python_tool_timeout(tmp_path: Path, sink: RecordingSink) -> None:
    async def slow(args: dict[str, Any], ctx: ToolContext) -> str:
        await asyncio.sleep(10)
        return "never"

    reg = ToolRegistry()
    reg.register_tool(defn("my.slow", metadata={"timeout_ms": 100}), slow)
    reg.register_tool(defn("my.capped", metadata={"timeout_ms": 60_000}), slow)
    executor, _ = make_executor(reg, make_settings(tools={"max_timeout_ms": 150, "default_timeout_ms": 100}))
    loop = asyncio.get_running_loop()
    start = loop.time()
    outcome = await executor.execute_turn(
        [tool_call("my.slow"), tool_call("my.capped")], scope_for(tmp_path, "my.slow", "my.capped"), sink
    )
    assert loop.time() - start < 2
    for result in outcome.results:
        assert result.error is not None and result.error.code == ErrorCode.timeout
    assert [p["error"]["code"] for _, _, p in sink.committed] == ["timeout", "timeout"]


class PreflightAdapter(InternalAdapter):
    def __init__(
        self, *defs: ToolDefinition, error: AgentCoreError | None = None, facts: Preflight | None = None
    ) -> None:
        super().__init__(*defs)
        self.error = error
        self.facts = facts or Preflight()

    async def preflight(self, call: ToolCall, ctx: ToolContext) -> Preflight:
        if self.error is not None:
            raise self.error
        return self.facts


async def test_preflight_hard_error_skips_hooks_and_permission(tmp_path: Path, sink: RecordingSink) -> None:
    adapter = PreflightAdapter(
        defn("code.write_file", permission="write", metadata={"concurrency": "serial"}),
        error=AgentCoreError(ErrorCode.path_conflict, "a.txt exists"),
    )
    reg = ToolRegistry()
    reg.register_adapter(adapter, internal=True)
    hooks = FakeHooks()
    executor, _ = make_executor(reg, callback=PermissionRecorder.never(), hooks=hooks)
    [result] = (
        await executor.execute_turn(
            [tool_call("code.write_file", path="a.txt")], scope_for(tmp_path, "code.write_file"), sink
        )
    ).results
    assert result.error is not None and result.error.code == ErrorCode.path_conflict
    assert adapter.calls == [] and hooks.pre_calls == []
    assert sink.committed[0][2]["reason"] == "preflight_failed"


async def test_internal_events_redaction_progress_and_post_hooks(tmp_path: Path, sink: RecordingSink) -> None:
    secret = "pw-0123456789-abc"

    async def chatty(call: ToolCall) -> Any:
        return {"echo": secret}

    class Progress(InternalAdapter):
        async def execute(self, call: ToolCall, ctx: ToolContext) -> Any:
            await ctx.emit_progress({"pct": 50})
            return await chatty(call)

    reg = ToolRegistry()
    reg.register_adapter(
        Progress(defn("internal.load_skill", SCHEMA, tags=["internal", "readonly"])), internal=True
    )
    hooks = FakeHooks()
    executor, _ = make_executor(
        reg, hooks=hooks, redactor=Redactor(["DB_PASSWORD"], environ={"DB_PASSWORD": secret})
    )
    call = tool_call("internal.load_skill", "c1", path="p", limit=None)
    [result] = (await executor.execute_turn([call], scope_for(tmp_path, "internal.load_skill"), sink)).results
    assert result.content == [JsonBlock(data={"echo": "[REDACTED]"})]
    started = sink.of_type(EventType.tool_started)[0].payload
    assert started["internal"] is True and started["args_summary"] == '{"path":"p"}'
    assert sink.committed[0][2]["internal"] is True
    assert sink.of_type(EventType.tool_progress)[0].payload == {
        "tool_name": "internal.load_skill",
        "progress": {"pct": 50},
    }
    [(post_id, post_result)] = hooks.post_calls
    assert post_id == "c1" and post_result == result  # a post-hook "deny" changes nothing
    [extras] = hooks.post_extras
    assert isinstance(extras["duration_ms"], int) and extras["preflight"] is not None


async def test_post_hooks_skip_calls_that_did_not_execute(tmp_path: Path, sink: RecordingSink) -> None:
    reg = ToolRegistry()
    reg.register_tool(defn("my.tool", SCHEMA), lambda a, c: "ok")
    hooks = FakeHooks()
    executor, _ = make_executor(reg, hooks=hooks)
    await executor.execute_turn(
        [tool_call("my.tool", "c1"), tool_call("no.such", "c2")], scope_for(tmp_path, "my.tool"), sink
    )
    assert hooks.post_calls == []


async def test_hook_dispatch_failure_fails_closed(tmp_path: Path, sink: RecordingSink) -> None:
    ran: list[int] = []
    reg = ToolRegistry()
    reg.register_tool(defn("my.tool"), lambda a, c: ran.append(1))
    executor, _ = make_executor(reg, hooks=FakeHooks(raise_on_pre=True))
    [result] = (
        await executor.execute_turn([tool_call("my.tool")], scope_for(tmp_path, "my.tool"), sink)
    ).results
    assert result.error is not None and result.error.code == ErrorCode.internal_error and ran == []


class FailingSink(RecordingSink):
    async def commit_tool_result(self, result: ToolResult, *, event: ToolResultEvent) -> str:
        raise StorageError(message="disk full")


async def test_commit_failures_propagate(tmp_path: Path) -> None:
    reg = ToolRegistry()
    reg.register_tool(defn("my.tool"), lambda a, c: "ok")
    executor, _ = make_executor(reg)
    with pytest.raises(StorageError):
        await executor.execute_turn(
            [tool_call("my.tool"), tool_call("my.tool")],
            scope_for(tmp_path, "my.tool"),
            FailingSink(tmp_path),
        )


async def test_artifact_ref_results_keep_refs(tmp_path: Path, sink: RecordingSink) -> None:
    async def make(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        ref = await ctx.create_artifact("data", "out.txt", "text/plain", "an output")
        return ToolResult(tool_call_id="x", tool_name="y", content=[ref])

    reg = ToolRegistry()
    reg.register_tool(defn("my.art"), make)
    executor, _ = make_executor(reg)
    [result] = (
        await executor.execute_turn([tool_call("my.art")], scope_for(tmp_path, "my.art"), sink)
    ).results
    [ref] = result.content
    assert isinstance(ref, ArtifactRefBlock) and ref.artifact_id in sink.artifacts
    assert sink.committed[0][2]["artifact_ids"] == [ref.artifact_id]

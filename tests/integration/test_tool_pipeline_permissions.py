"""The permission gate and PreToolUse hooks inside the pipeline (docs/permissions.md,
docs/tools.md#execution-pipeline, docs/tools.md#scheduling, docs/permissions.md#decisions).

``test.read`` / ``test.write`` / ``test.run`` are stand-ins with the code tools' permission, tags and
pre-flight behaviour acting on real files (tests/fixtures/tool_pipeline.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agent_core.errors import ErrorCode
from agent_core.tools.context import RunScope, ToolContext
from agent_core.tools.registry import ToolRegistry
from agent_core.types.enums import AgentRole, EventType
from agent_core.types.model import ToolCall
from agent_core.types.permissions import PermissionDecision, PermissionRequest
from agent_core.types.tools import ToolDefinition
from tests.fixtures.tool_pipeline import (
    FakeHooks,
    PermissionRecorder,
    StandInFileTools,
    make_executor,
    make_settings,
    tool_call,
)
from tests.fixtures.tool_sink import RecordingSink, make_scope

NAMES = frozenset({"test.read", "test.write", "test.run"})


@pytest.fixture
def project(tmp_path: Path) -> Path:
    p = tmp_path / "project"
    p.mkdir()
    (p / "a.txt").write_text("alpha")
    (p / ".env").write_text("SECRET=1")
    (p / "cert.pem").write_text("pem")
    return p


@pytest.fixture
def tools() -> StandInFileTools:
    return StandInFileTools()


@pytest.fixture
def registry(tools: StandInFileTools) -> ToolRegistry:
    reg = ToolRegistry()
    reg.register_adapter(tools)
    return reg


@pytest.fixture
def sink(tmp_path: Path) -> RecordingSink:
    return RecordingSink(tmp_path / "artifacts")


def scope_of(project: Path, **kw: Any) -> RunScope:
    return make_scope(project, project.parent, effective_tools=kw.pop("effective_tools", NAMES), **kw)


def codes(results: list[Any]) -> list[str | None]:
    return [r.error.code.value if r.error else None for r in results]


async def test_readonly_runs_without_request(
    registry: ToolRegistry, tools: StandInFileTools, project: Path, sink: RecordingSink
) -> None:
    """Case H1."""
    for callback in (None, PermissionRecorder.never()):
        executor, _ = make_executor(registry, callback=callback)
        [result] = (
            await executor.execute_turn([tool_call("test.read", path="a.txt")], scope_of(project), sink)
        ).results
        assert not result.is_error
    assert len(tools.executed) == 2


@pytest.mark.parametrize("name", [".env", "cert.pem"])
async def test_sensitive_read_asks_and_deny(
    registry: ToolRegistry, tools: StandInFileTools, project: Path, sink: RecordingSink, name: str
) -> None:
    """Case H2."""
    recorder = PermissionRecorder([PermissionDecision(decision="deny", reason="not that file")])
    executor, _ = make_executor(registry, callback=recorder)
    [result] = (
        await executor.execute_turn([tool_call("test.read", "c1", path=name)], scope_of(project), sink)
    ).results
    assert result.error is not None and result.error.code == ErrorCode.permission_denied
    assert result.error.message == "not that file"
    [request] = recorder.requests
    assert request.target_scope == str(project / name) and request.suggested_decision == "deny"
    assert request.metadata["reasons"] == ["sensitive_path"]
    assert tools.executed == []
    [(_, event_type, payload)] = sink.committed
    assert event_type == EventType.tool_denied
    audit = payload.pop("permission_audit")  # issue 14 item 10: who decided
    assert payload == {
        "tool_name": "test.read",
        "denied_by": "permission",
        "reason": "not that file",
        "hook_summary": None,
    }
    assert audit["decided_by"] == "callback" and audit["request_id"] == request.request_id
    no_callback, _ = make_executor(registry)
    [res] = (
        await no_callback.execute_turn([tool_call("test.read", path=name)], scope_of(project), sink)
    ).results
    assert res.error is not None and res.error.code == ErrorCode.permission_denied


async def test_allow_once_asks_again(
    registry: ToolRegistry, tools: StandInFileTools, project: Path, sink: RecordingSink
) -> None:
    """Case H3."""
    recorder = PermissionRecorder.always("allow_once")
    executor, _ = make_executor(registry, callback=recorder)
    scope = scope_of(project)
    for content in ("one", "two"):
        [result] = (
            await executor.execute_turn([tool_call("test.write", path="w.txt", content=content)], scope, sink)
        ).results
        assert not result.is_error
    assert (project / "w.txt").read_text() == "two" and len(recorder.requests) == 2
    outcomes = [e.payload["permission_outcome"] for e in sink.of_type(EventType.tool_started)]
    assert outcomes == [{"asked": True, "decision": "allow_once", "cached": False}] * 2


async def test_allow_for_session(registry: ToolRegistry, project: Path, sink: RecordingSink) -> None:
    """Cases H4, H5."""
    recorder = PermissionRecorder.always("allow_for_session")
    executor, gate = make_executor(registry, callback=recorder)
    scope = scope_of(project)
    for target in ("f.txt", "f.txt", "other.txt"):
        await executor.execute_turn([tool_call("test.write", path=target, content="x")], scope, sink)
    assert [r.target_scope for r in recorder.requests] == [str(project / "f.txt"), str(project / "other.txt")]
    assert sink.of_type(EventType.tool_started)[1].payload["permission_outcome"] == {
        "asked": False,
        "decision": "allow_for_session",
        "cached": True,
    }
    other_session = scope_of(project)
    await executor.execute_turn([tool_call("test.write", path="f.txt", content="y")], other_session, sink)
    assert len(recorder.requests) == 3
    gate.forget_session(scope.session_id)  # session closed / runtime closed
    await executor.execute_turn([tool_call("test.write", path="f.txt", content="z")], scope, sink)
    assert len(recorder.requests) == 4
    new_runtime, _ = make_executor(registry, callback=recorder)
    await new_runtime.execute_turn([tool_call("test.write", path="other.txt", content="z")], scope, sink)
    assert len(recorder.requests) == 5
    persisted = [p for p in project.rglob("*") if "allow_for_session" in p.name]
    assert persisted == []


async def test_no_callback_denies_writes_without_side_effects(
    registry: ToolRegistry, tools: StandInFileTools, project: Path, sink: RecordingSink
) -> None:
    """Case H6."""
    executor, _ = make_executor(registry)
    for call in (
        tool_call("test.write", path="new.txt", content="x"),
        tool_call("test.run", argv=["python", "-V"]),
    ):
        [result] = (await executor.execute_turn([call], scope_of(project), sink)).results
        assert result.error is not None and result.error.code == ErrorCode.permission_denied
    assert not (project / "new.txt").exists() and not (project / "ran.marker").exists()
    assert tools.executed == []


async def test_run_command_scope(registry: ToolRegistry, project: Path, sink: RecordingSink) -> None:
    """Case H12."""
    (project / "sub").mkdir()
    recorder = PermissionRecorder(
        ["allow_for_session", "allow_once", "allow_once", "allow_once", "allow_once"]
    )
    executor, _ = make_executor(registry, callback=recorder)
    scope = scope_of(project)
    for argv, cwd in (
        (["python", "a.py"], None),
        (["python", "a.py", "--fast"], None),  # covered: the grant remembered the argv prefix python a.py
        (["python", "b.py"], None),  # issue 14 item 9: not the whole executable
        (["python", "-c", "print(1)"], None),
        (["git", "status"], None),
        (["python", "a.py"], "sub"),
    ):
        args: dict[str, Any] = {"argv": argv} if cwd is None else {"argv": argv, "cwd": cwd}
        [result] = (await executor.execute_turn([tool_call("test.run", **args)], scope, sink)).results
        assert not result.is_error
    assert [r.target_scope for r in recorder.requests] == [
        f"python @ {project}",
        f"python @ {project}",
        f"python @ {project}",
        f"git @ {project}",
        f"python @ {project / 'sub'}",
    ]
    assert recorder.requests[0].metadata["session_argv_prefix"] == ["python", "a.py"]
    assert recorder.requests[2].metadata["session_argv_prefix"] == ["python", "-c", "print(1)"]
    assert all(r.dangerous and "dangerous" in r.tags for r in recorder.requests)
    assert recorder.requests[0].env_summary == {"PATH": "<set>", "TMPDIR": "<unset>"}


@pytest.mark.parametrize(
    ("callback_result", "failure"),
    [
        (RuntimeError("callback crashed"), "exception"),
        ({"decision": "always_allow"}, "invalid_decision"),
        ("timeout", "timeout"),
    ],
)
async def test_callback_failure_denies(
    registry: ToolRegistry,
    tools: StandInFileTools,
    project: Path,
    sink: RecordingSink,
    callback_result: Any,
    failure: str,
) -> None:
    """Case H17."""

    async def callback(request: PermissionRequest) -> Any:
        if isinstance(callback_result, BaseException):
            raise callback_result
        if callback_result == "timeout":
            await asyncio.sleep(10)
        return callback_result

    executor, _ = make_executor(registry, callback=callback, timeout_s=0.1)
    calls = [tool_call("test.read", "c1", path=".env"), tool_call("test.read", "c2", path="a.txt")]
    outcome = await executor.execute_turn(calls, scope_of(project), sink)
    denied, ok = outcome.results
    assert denied.error is not None and denied.error.code == ErrorCode.permission_denied
    assert denied.error.details["permission_failure"] == failure
    assert not ok.is_error  # the run continues
    types = [e.event_type for e in sink.events if e.tool_call_id == "c1"]
    assert types == [EventType.permission_failed, EventType.tool_denied]
    failed = sink.of_type(EventType.permission_failed)[0].payload
    assert failed["request_id"].startswith("perm_") and failed["error"]["details"] == {
        "permission_failure": failure
    }


async def test_hook_deny_on_write_skips_callback_and_rest(
    registry: ToolRegistry, tools: StandInFileTools, project: Path, sink: RecordingSink
) -> None:
    """Cases H8, H16."""
    hooks = FakeHooks(deny={"test.write"}, reason="policy says no")
    executor, _ = make_executor(registry, callback=PermissionRecorder.never(), hooks=hooks)
    calls = [
        tool_call("test.write", "c1", path="a.out", content="x"),
        tool_call("test.write", "c2", path="b.out", content="y"),
        tool_call("test.run", "c3", argv=["python"]),
    ]
    outcome = await executor.execute_turn(calls, scope_of(project), sink)
    denied, *skipped = outcome.results
    assert denied.error is not None
    assert (denied.error.code, denied.error.type) == (ErrorCode.permission_denied, "hook_denied")
    summary = {"decision": "deny", "reasons": ["policy says no"], "hook_count": 1}
    hook_event = sink.of_type(EventType.hook_denied)[0]
    assert hook_event.payload == {"phase": "PreToolUse", "reason": "policy says no", "hook_summary": summary}
    denied_event = sink.of_type(EventType.tool_denied)[0].payload
    assert denied_event["denied_by"] == "hook" and denied_event["hook_summary"] == summary
    assert codes(skipped) == ["cancelled", "cancelled"]
    assert all(r.metadata == {"skipped": True, "skip_reason": "previous_write_failed"} for r in skipped)
    assert tools.executed == [] and hooks.pre_calls == ["c1"]
    assert not (project / "a.out").exists() and not (project / "ran.marker").exists()


async def test_deny_continuation(
    registry: ToolRegistry, tools: StandInFileTools, project: Path, sink: RecordingSink
) -> None:
    """Case H16."""
    recorder = PermissionRecorder(lambda r: PermissionDecision(decision="deny"))
    executor, _ = make_executor(registry, callback=recorder)
    scope = scope_of(project)
    read_turn = await executor.execute_turn(
        [tool_call("test.read", path=".env"), tool_call("test.read", path="a.txt")], scope, sink
    )
    assert codes(read_turn.results) == ["permission_denied", None]
    write_turn = await executor.execute_turn(
        [
            tool_call("test.write", path="a.out", content="1"),
            tool_call("test.write", path="b.out", content="2"),
            tool_call("test.run", argv=["python"]),
        ],
        scope,
        sink,
    )
    assert codes(write_turn.results) == ["permission_denied", "cancelled", "cancelled"]
    skipped_events = [p for _, t, p in sink.committed if t == EventType.tool_failed]
    assert [p["skipped"] for p in skipped_events] == [True, True]
    assert [name for name, _ in tools.executed] == ["test.read"]
    hook_turn = await make_executor(registry, hooks=FakeHooks(deny={"test.read"}))[0].execute_turn(
        [tool_call("test.read", path="a.txt"), tool_call("test.read", path="a.txt")], scope, sink
    )
    assert codes(hook_turn.results) == ["permission_denied", "permission_denied"]


async def test_request_from_pipeline_cannot_patch_arguments(
    registry: ToolRegistry, tools: StandInFileTools, project: Path, sink: RecordingSink
) -> None:
    """Case H18."""

    def patching(request: PermissionRequest) -> PermissionDecision:
        request.args_summary = '{"path":"evil.txt","content":"pwned"}'
        request.target_scope = str(project / "evil.txt")
        return PermissionDecision(decision="allow_for_session", metadata={"arguments": {"path": "evil.txt"}})

    recorder = PermissionRecorder(patching)
    executor, gate = make_executor(registry, callback=recorder, hooks=FakeHooks())
    scope = scope_of(project)
    await executor.execute_turn([tool_call("test.write", path="good.txt", content="ok")], scope, sink)
    assert tools.executed == [("test.write", {"path": "good.txt", "content": "ok"})]
    assert not (project / "evil.txt").exists()
    assert gate.is_allowed_for_session(scope.session_id, "test.write", str(project / "good.txt"))
    assert not gate.is_allowed_for_session(scope.session_id, "test.write", str(project / "evil.txt"))
    [request] = recorder.requests
    assert request.hook_summary == {"decision": "allow", "reasons": [], "hook_count": 1}
    assert request.parent_agent_id is None and request.parent_run_id is None and request.agent_role == "main"


async def test_sub_agent_request_identity(registry: ToolRegistry, project: Path, sink: RecordingSink) -> None:
    recorder = PermissionRecorder.always("allow_once")
    executor, _ = make_executor(registry, callback=recorder)
    child = scope_of(project, role=AgentRole.sub, parent_agent_id="agent_p", parent_run_id="run_p")
    await executor.execute_turn([tool_call("test.write", path="c.txt", content="c")], child, sink)
    [req] = recorder.requests
    assert (req.agent_id, req.run_id, req.parent_agent_id, req.parent_run_id, req.agent_role) == (
        child.agent_id,
        child.run_id,
        "agent_p",
        "run_p",
        "sub",
    )


class InternalTools:
    def definitions(self) -> list[ToolDefinition]:
        obj: dict[str, Any] = {"type": "object", "properties": {}}
        return [
            ToolDefinition(
                name="internal.load_skill",
                description="d",
                input_schema=obj,
                permission="readonly",
                tags=["internal", "readonly"],
            ),
            ToolDefinition(
                name="agent.task_get",
                description="d",
                input_schema=obj,
                permission="readonly",
                tags=["agent", "internal", "readonly"],
            ),
            ToolDefinition(
                name="agent.task_update_step",
                description="d",
                input_schema=obj,
                permission="readonly",
                tags=["agent", "internal"],
                metadata={"concurrency": "serial"},
            ),
        ]

    async def execute(self, call: ToolCall, ctx: ToolContext) -> Any:
        return {"ok": call.name}

    async def close(self) -> None:
        return None


async def test_internal_tools_never_ask(project: Path, sink: RecordingSink) -> None:
    """Case H15."""
    reg = ToolRegistry()
    reg.register_adapter(InternalTools(), internal=True)
    executor, _ = make_executor(
        reg, make_settings(permissions={"readonly_default": "confirm"}), callback=PermissionRecorder.never()
    )
    names = ["internal.load_skill", "agent.task_get", "agent.task_update_step"]
    outcome = await executor.execute_turn(
        [tool_call(n) for n in names], scope_of(project, effective_tools=frozenset(names)), sink
    )
    assert codes(outcome.results) == [None, None, None]
    assert all(e.payload.get("internal") is True for e in sink.events)


async def test_callbacks_serialised_in_a_parallel_batch(
    registry: ToolRegistry, tools: StandInFileTools, project: Path, sink: RecordingSink
) -> None:
    recorder = PermissionRecorder.always("allow_once")
    recorder.delay = 0.05
    executor, _ = make_executor(registry, callback=recorder)
    calls = [tool_call("test.read", f"c{i}", path=p) for i, p in enumerate([".env", "cert.pem", ".env"])]
    outcome = await executor.execute_turn(calls, scope_of(project), sink)
    assert codes(outcome.results) == [None, None, None]
    assert recorder.max_active == 1
    assert [r.target_scope for r in recorder.requests] == [
        str(project / p) for p in (".env", "cert.pem", ".env")
    ]


async def test_pre_hooks_run_in_model_order_within_a_batch(
    registry: ToolRegistry, project: Path, sink: RecordingSink
) -> None:
    class SlowFirst(FakeHooks):
        async def pre_tool_use(self, **kw: Any) -> Any:
            if kw["call"].tool_call_id == "c0":
                await asyncio.sleep(0.05)
            return await super().pre_tool_use(**kw)

    hooks = SlowFirst()
    executor, _ = make_executor(registry, hooks=hooks)
    calls = [tool_call("test.read", f"c{i}", path="a.txt") for i in range(4)]
    await executor.execute_turn(calls, scope_of(project), sink)
    assert hooks.pre_calls == ["c0", "c1", "c2", "c3"]


async def test_write_outside_roots(tmp_path: Path, project: Path, sink: RecordingSink) -> None:
    """Case G21."""
    outside = tmp_path / "outside"
    outside.mkdir()
    allowed_root = tmp_path / "extra"
    allowed_root.mkdir()
    (project / "link").symlink_to(outside)
    tools = StandInFileTools(write_roots=[allowed_root])
    reg = ToolRegistry()
    reg.register_adapter(tools)
    refuse, _ = make_executor(reg)
    [res] = (
        await refuse.execute_turn(
            [tool_call("test.write", path=str(outside / "x"), content="x")], scope_of(project), sink
        )
    ).results
    assert res.error is not None and res.error.code == ErrorCode.write_outside_allowed_roots
    [res] = (
        await refuse.execute_turn(
            [tool_call("test.write", path="link/x", content="x")], scope_of(project), sink
        )
    ).results
    assert res.error is not None and res.error.code == ErrorCode.write_outside_allowed_roots
    assert not (outside / "x").exists()

    recorder = PermissionRecorder(
        [PermissionDecision(decision="deny"), "allow_once", "allow_once", "allow_once"]
    )
    ask, _ = make_executor(reg, callback=recorder)
    [res] = (
        await ask.execute_turn([tool_call("test.write", path="link/x", content="x")], scope_of(project), sink)
    ).results
    assert res.error is not None and res.error.code == ErrorCode.permission_denied
    [res] = (
        await ask.execute_turn([tool_call("test.write", path="link/x", content="x")], scope_of(project), sink)
    ).results
    assert not res.is_error and (outside / "x").read_text() == "x"
    await ask.execute_turn(
        [tool_call("test.write", path=str(allowed_root / "y"), content="y")], scope_of(project), sink
    )
    await ask.execute_turn([tool_call("test.write", path="inside.txt", content="z")], scope_of(project), sink)
    assert [r.suggested_decision for r in recorder.requests] == ["deny", "deny", "allow_once", "allow_once"]
    assert [r.metadata["reasons"] for r in recorder.requests[2:]] == [["write"], ["write"]]
    assert tools.outside_allowed == [True, False, False]


class NetworkTool:
    def __init__(self) -> None:
        self.calls = 0

    def definitions(self) -> list[ToolDefinition]:
        schema = {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}
        return [
            ToolDefinition(
                name="web.fetch",
                description="d",
                input_schema=schema,
                permission="readonly",
                tags=["network"],
            )
        ]

    def network_host(self, call: ToolCall, ctx: ToolContext) -> str | None:
        return call.arguments["url"].split("/")[2]

    async def execute(self, call: ToolCall, ctx: ToolContext) -> Any:
        self.calls += 1
        return "fetched"

    async def close(self) -> None:
        return None


async def test_network_confirm_and_allow_list(project: Path, sink: RecordingSink) -> None:
    """Case H15."""
    tool = NetworkTool()
    reg = ToolRegistry()
    reg.register_adapter(tool)
    settings = make_settings(
        tools={"network": {"allowed_hosts": ["docs.example.com"]}},
        permissions={"network_policy": {"allowed_domains": ["trusted.io"]}},
    )
    recorder = PermissionRecorder.always("allow_for_session")
    executor, _ = make_executor(reg, settings, callback=recorder)
    scope = scope_of(project, effective_tools=frozenset({"web.fetch"}))
    for url in (
        "https://docs.example.com/a",
        "https://api.trusted.io/x",
        "https://Other.dev/1",
        "https://other.dev/2",
    ):
        [res] = (await executor.execute_turn([tool_call("web.fetch", url=url)], scope, sink)).results
        assert not res.is_error
    [req] = recorder.requests
    assert (
        req.network_host == "Other.dev"
        and req.target_scope == "other.dev"
        and req.metadata["reasons"] == ["network"]
    )
    assert tool.calls == 4


async def test_internal_tool_hook_denial_events_are_marked_internal(
    project: Path, sink: RecordingSink
) -> None:
    reg = ToolRegistry()
    reg.register_adapter(InternalTools(), internal=True)
    executor, _ = make_executor(reg, hooks=FakeHooks(deny={"agent"}))
    scope = scope_of(project, effective_tools=frozenset({"agent.task_get"}))
    [result] = (await executor.execute_turn([tool_call("agent.task_get", "c1")], scope, sink)).results
    assert result.error is not None and result.error.type == "hook_denied"
    assert [e.event_type for e in sink.events] == [EventType.hook_denied, EventType.tool_denied]
    assert all(e.payload["internal"] is True for e in sink.events)

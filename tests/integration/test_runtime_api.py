"""The public surface and lifecycle of the runtime (cases A1, A3, A5, A6, A8, A9, docs/runs.md,
docs/testing.md)."""

from __future__ import annotations

import inspect
import logging
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import pydantic
import pytest

import agent_core
from agent_core import (
    AgentCoreError,
    AgentDefinition,
    AgentRuntime,
    ArtifactRefBlock,
    ConfigError,
    EndReason,
    ErrorCode,
    EventType,
    JsonBlock,
    PermissionDecision,
    PermissionDeniedError,
    PermissionRequest,
    ProviderError,
    ProviderRegistry,
    RunHandle,
    RunMode,
    RunStatus,
    RuntimeEvent,
    SchemaError,
    StorageError,
    TextBlock,
    ToolCallBlock,
    ToolDefinition,
    ToolError,
    ToolRegistry,
    ToolResult,
    ToolResultBlock,
    UserMessage,
)
from agent_core._ids import new_id, validate_id
from agent_core.types.enums import EndReason as EnumsEndReason
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, text, tool_calls
from tests.fixtures.runtime import collect, open_runtime, rows

CONTRACT_EXPORTS = {
    # docs/architecture.md#public-surface: required names
    "AgentRuntime",
    "UserMessage",
    "RunHandle",
    "RuntimeEvent",
    "PermissionRequest",
    "PermissionDecision",
    "ToolDefinition",
    "ToolResult",
    "AgentDefinition",
    # docs/architecture.md#public-surface: the only additional stable SDK types
    "ErrorCode",
    "ErrorPayload",
    "AgentCoreError",
    "ConfigError",
    "ProviderError",
    "ToolError",
    "StorageError",
    "SchemaError",
    "PermissionDeniedError",
    # issue 35: the rest of the AgentCoreError tree (one class per code family, errors.error_class)
    "AgentDefinitionError",
    "ChildAgentLimitError",
    "FileOperationError",
    "InternalError",
    "InvalidArgumentError",
    "InvalidArgumentTypeError",
    "MemoryOperationError",
    "MigrationError",
    "NotFoundError",
    "OperationCancelledError",
    "OperationTimeoutError",
    "ProviderAuthError",
    "ProviderRateLimitError",
    "ProviderTimeoutError",
    "SessionBusyError",
    "SessionNotFoundError",
    "SkillError",
    "StepError",
    "StepNotFoundError",
    "TaskError",
    "TaskNotFoundError",
    "TaskWalUnavailableError",
    "ToolNotAvailableError",
    "UnsupportedCapabilityError",
    "WorkerUnavailableError",
    # issue 35: RuntimeEvent.payload's types (the classes live in agent_core.types.events)
    "EventPayload",
    "RuntimeEventPayload",
    "TextBlock",
    "JsonBlock",
    "ToolCallBlock",
    "ToolResultBlock",
    "ArtifactRefBlock",
    "ContentBlock",
    "RunStatus",
    "RunMode",
    "EndReason",
    "EventType",
    "PermissionDecisionKind",
    "CancelResult",
    "ReplayResult",
    "InspectResult",
    "DeleteSessionResult",
    "CleanupResult",
    "Node",
    "ContextBuildReport",
    "ProviderRegistry",
    "ToolRegistry",
    # issue 34: reasoning, images and documents, attachments of a user message
    "ReasoningBlock",
    "ImageBlock",
    "DocumentBlock",
    "Attachment",
    # issue 37 item 6: in-process hooks and output guardrails (agent_core.types.hooks)
    "Hook",
    "HookContext",
    "HookResult",
    "GuardrailResult",
    "SessionStartHook",
    "UserPromptSubmitHook",
    "PreToolUseHook",
    "PostToolUseHook",
    "StopHook",
    "OutputGuardrail",
    "SessionStartInput",
    "UserPromptSubmitInput",
    "PreToolUseInput",
    "PostToolUseInput",
    "StopInput",
    "GuardrailInput",
}


def echo_tool(
    name: str = "demo.echo", permission: Literal["readonly", "write"] = "readonly"
) -> ToolDefinition:
    return ToolDefinition(
        name=name,
        description="Echo x.",
        input_schema={"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]},
        permission=permission,
    )


async def echo(args: dict[str, Any], ctx: Any) -> str:
    return str(args["x"])


# ---- A1: the public surface ---------------------------------------------------------


def test_public_surface_is_exactly_the_contract_list() -> None:
    """Case A1."""
    assert set(agent_core.__all__) == CONTRACT_EXPORTS
    for name in CONTRACT_EXPORTS:
        assert getattr(agent_core, name) is not None
    assert (Path(agent_core.__file__).parent / "py.typed").is_file()
    with pytest.raises(AttributeError):
        agent_core.StorageManager  # noqa: B018
    for name in agent_core.__all__:
        value = getattr(agent_core, name)
        module = getattr(value, "__module__", "") or ""
        assert not module.startswith(("openai", "anthropic", "ollama", "httpx")), name
        assert not module.startswith("agent_core.types.storage"), name
        assert not name.endswith("Record"), name


def test_import_pulls_no_provider_sdk_or_structlog() -> None:
    """Case A1."""
    code = (
        "import sys, agent_core\n"
        "from agent_core import AgentRuntime, RunHandle\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('structlog', 'openai', 'anthropic', 'ollama')]\n"
        "print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_library_installs_only_a_null_handler() -> None:
    handlers = logging.getLogger("agent_core").handlers
    assert any(isinstance(h, logging.NullHandler) for h in handlers)
    assert all(isinstance(h, logging.NullHandler) for h in handlers)


# ---- ------------------------------------------------------------------------


def test_enums_are_strenums_with_exact_values() -> None:
    from enum import StrEnum

    assert (
        issubclass(RunStatus, StrEnum) and issubclass(EndReason, StrEnum) and issubclass(EventType, StrEnum)
    )
    assert {m.value for m in RunStatus} == {
        "queued",
        "pending",
        "running",
        "completed",
        "failed",
        "aborted",
        "cancelled",
    }
    assert {m.value for m in EnumsEndReason} == {
        "completed",
        "max_turns",
        "aborted_streaming",
        "aborted_tools",
        "prompt_too_long",
        "max_output_tokens_recovery",
        "failed",
        "limit_reached",  # docs/runs.md#limits
        "loop_detected",
    }
    assert RunStatus.completed == "completed" and EndReason.max_turns == "max_turns"
    # docs/jobs-and-schedules.md#background-jobs (issue 22)
    jobs = {"job_started", "job_completed", "job_failed"}
    cache = {"prompt_cache_break"}  # issue 33
    status = {"model_progress"}  # issue 32: the live status line of a model call
    models = {"reasoning_delta", "model_fallback", "context_overflow"}  # issue 34: real models
    assert models <= {e.value for e in EventType}
    teams = {"inbox_delivered", "inbox_drained", "teammate_spawned", "teammate_stopped"}  # issue 36
    assert len(EventType) == 70 + len(jobs) + len(cache) + len(status) + len(teams) + len(models)
    assert EventType("run_completed") == "run_completed"


def test_ids() -> None:
    assert re.fullmatch(r"run_\d{8}_\d{6}_[0-9a-f]{12}", new_id("run_"))
    with pytest.raises(AgentCoreError) as info:
        validate_id("run_x/../y", "run_")
    assert info.value.code == ErrorCode.validation_error


def test_error_payload_and_taxonomy() -> None:
    payload = AgentCoreError(ErrorCode.timeout, "x").to_payload()
    assert (payload.code, payload.type, payload.retryable, payload.details, payload.redacted) == (
        "timeout",
        "timeout",
        False,
        {},
        True,
    )
    assert "Traceback" not in payload.model_dump_json()
    defaults = {
        ConfigError: "config_error",
        ProviderError: "provider_error",
        ToolError: "internal_error",
        StorageError: "storage_error",
        SchemaError: "schema_error",
        PermissionDeniedError: "permission_denied",
    }
    for cls, code in defaults.items():
        assert issubclass(cls, AgentCoreError) and not issubclass(cls, PermissionError)
        assert cls(message="m").code == code
        assert cls(ErrorCode.timeout, "m").code == ErrorCode.timeout


# ---- A3: boundary models forbid unknown fields ------------------------------------------


BOUNDARY: list[tuple[type[pydantic.BaseModel], dict[str, Any]]] = [
    (UserMessage, {"content": "hi"}),
    (
        PermissionRequest,
        {
            "request_id": "perm_1",
            "session_id": "sess_1",
            "agent_id": "agent_1",
            "run_id": "run_1",
            "agent_role": "main",
            "tool_name": "code.write_file",
            "permission": "write",
            "tags": ["code"],
            "args_summary": "path=a.txt",
            "cwd": "/tmp",
            "env_summary": {},
            "dangerous": False,
            "suggested_decision": "allow_once",
        },
    ),
    (PermissionDecision, {"decision": "allow_once"}),
    (
        ToolDefinition,
        {"name": "demo.x", "description": "d", "input_schema": {"type": "object"}, "permission": "readonly"},
    ),
    (ToolResult, {"tool_call_id": "c", "tool_name": "t", "content": []}),
    (AgentDefinition, {"agent_definition_id": "a", "name": "a", "description": "d", "source": "code"}),
    (RuntimeEvent, {"event_id": "evt_1", "session_id": "sess_1", "event_type": "run_completed"}),
    (TextBlock, {"text": "x"}),
    (JsonBlock, {"data": {"a": 1}}),
    (ToolCallBlock, {"tool_call_id": "c", "name": "t", "arguments": {}}),
    (ToolResultBlock, {"tool_call_id": "c", "content": []}),
    (ArtifactRefBlock, {"artifact_id": "artifact_1"}),
]


@pytest.mark.parametrize(("model", "fields"), BOUNDARY, ids=[m.__name__ for m, _ in BOUNDARY])
def test_boundary_models_forbid_extra_fields(model: type[pydantic.BaseModel], fields: dict[str, Any]) -> None:
    """Case A3."""
    instance = model(**fields)
    with pytest.raises(pydantic.ValidationError) as info:
        model(**fields, surprise_field=1)
    assert "surprise_field" in str(info.value)
    if "metadata" in type(instance).model_fields:
        with_meta = model(**{**fields, "metadata": {"anything": {"goes": [1]}}})
        assert with_meta.metadata == {"anything": {"goes": [1]}}  # type: ignore[attr-defined]


def test_tool_result_defaults_and_handler_returns() -> None:
    result = ToolResult(tool_call_id="c", tool_name="t", content=[])
    assert result.is_error is False and result.error is None and result.metadata == {}


# ---- exact signatures ------------------------------------------------------------------


def _params(fn: Any) -> list[tuple[str, Any]]:
    return [(p.name, p.default) for p in inspect.signature(fn).parameters.values()]


E = inspect.Parameter.empty


def test_signatures_match_the_contract() -> None:
    assert _params(AgentRuntime.__init__) == [
        ("self", E),
        ("project_dir", None),
        ("config_path", None),
        ("home_dir", None),
        ("session_db_path", None),
        ("permission_callback", None),
        ("provider_registry", None),
        ("tool_registry", None),
        ("debug", False),
        ("hooks", None),  # issue 37: in-process hooks and guardrails
        ("question_callback", None),  # issue 37: internal.ask_user
        ("file_access", None),  # issue 38: the host's hook for the file tools' text reads and writes
    ]
    expected: dict[str, list[tuple[str, Any]]] = {
        "close": [("self", E)],
        "start": [
            ("self", E),
            ("message", E),
            ("session_id", None),
            ("mode", "normal"),
            ("output_schema", None),  # docs/runs.md#structured-output (structured output)
            ("output_retries", 2),
            ("model_profile", None),  # issue 37: run --model
            ("max_turns", None),  # issue 37: run --max-turns
            ("permission_mode", None),  # issue 37: permission modes
            ("wait_if_busy", True),  # issue 40: a busy session (another process) is waited for
        ],
        "register_provider": [("self", E), ("key", E), ("factory", E)],
        "register_tool": [("self", E), ("definition", E), ("handler", E)],
        "register_agent_definition": [("self", E), ("definition", E), ("source", "code")],
        "replay_session": [
            ("self", E),
            ("session_id", E),
            ("from_seq", None),
            ("to_seq", None),
            ("include_sensitive", False),
        ],
        "replay_run": [("self", E), ("run_id", E), ("include_sensitive", False)],
        "get_node_path": [("self", E), ("node_id", E)],
        "delete_session": [("self", E), ("session_id", E)],
        "cleanup_project_tasks": [
            ("self", E),
            ("project", E),
            ("dry_run", True),
            ("include_failed", False),
            ("include_cancelled", False),
            ("older_than", None),
        ],
        "cleanup_artifacts": [
            ("self", E),
            ("session_id", None),
            ("dry_run", True),
            ("include_all", False),
            ("older_than", None),
            ("max_bytes", None),
        ],
        "switch_node": [("self", E), ("session_id", E), ("node_id", E)],
        # issue 37: rewind and ask_user
        "rewind": [("self", E), ("session_id", E), ("node_id", E), ("files", True), ("conversation", True)],
        "answer_question": [("self", E), ("request_id", E), ("answer", E)],
        "delete_artifact": [("self", E), ("artifact_id", E)],
    }
    for name, params in expected.items():
        assert _params(getattr(AgentRuntime, name)) == params, name
    for name in ("close", "start", "replay_session", "replay_run", "get_node_path", "delete_session"):
        assert inspect.iscoroutinefunction(getattr(AgentRuntime, name)), name
    for name in ("register_provider", "register_tool", "register_agent_definition"):
        assert not inspect.iscoroutinefunction(getattr(AgentRuntime, name)), name
    assert inspect.signature(AgentRuntime.cleanup_artifacts).parameters["older_than"].annotation in (
        "datetime | None",
        datetime | None,
    )
    handle: dict[str, list[tuple[str, Any]]] = {
        "events": [("self", E), ("debug", False), ("include_children", False)],
        "cancel": [("self", E)],
        "inspect_child": [("self", E), ("child_run_id", E), ("include_sensitive", False)],
        "child_events": [("self", E), ("child_run_id", E), ("debug", False)],
        "wait": [("self", E)],
        "output": [("self", E)],
    }
    for name, params in handle.items():
        assert _params(getattr(RunHandle, name)) == params, name


# ---- A5: lifecycle -------------------------------------------------------------------


def test_missing_config_creates_nothing(soong_env: SoongEnv) -> None:
    with pytest.raises(ConfigError) as info:
        AgentRuntime(project_dir=soong_env.project)
    assert info.value.code == ErrorCode.config_error
    assert str(soong_env.config_path) in info.value.message
    assert list(soong_env.home.iterdir()) == [] and list(soong_env.project.iterdir()) == []


async def test_lifecycle_opens_and_closes(soong_env: SoongEnv) -> None:
    """Case A5."""
    fake = FakeProvider(text("x"))
    soong_env.write_config()
    rt = AgentRuntime(
        project_dir=soong_env.project, provider_registry=ProviderRegistry({"fake": fake.factory})
    )
    assert not (soong_env.home / "sessions.sqlite").exists()
    async with rt as entered:
        assert entered is rt
        versions = rows(soong_env, "SELECT version, applied_at FROM schema_migrations")
        assert versions and all(r["applied_at"] for r in versions)
        run = await rt.start("hi")
        await collect(run)
        assert fake.closed == 0
    assert fake.closed == 1
    await rt.close()
    await rt.close()
    assert fake.closed == 1  # the adapter is closed exactly once
    for call in (rt.start("again"), rt.replay_session(run.session_id)):
        with pytest.raises(AgentCoreError) as info:
            await call
        assert info.value.code == ErrorCode.validation_error
    with pytest.raises(AgentCoreError) as reg:
        rt.register_tool(echo_tool(), echo)
    assert reg.value.code == ErrorCode.validation_error
    # a closed runtime released the database: it can be reopened by another runtime
    async with open_runtime(soong_env, FakeProvider(text("y")), write_config=False) as rt2:
        replay = await rt2.replay_session(run.session_id)
        assert [n.role for n in replay.nodes] == ["user", "assistant"]


async def test_every_instantiated_adapter_closed_once(soong_env: SoongEnv) -> None:
    main = FakeProvider(text("a"))
    other = FakeProvider(text("b"), provider_key="other")
    registry = ProviderRegistry({"fake": main.factory, "other": other.factory})
    async with open_runtime(soong_env, provider_registry=registry) as rt:
        await collect(await rt.start("one"))
    assert main.closed == 1 and other.closed == 0  # never instantiated → never closed
    assert len(main.configs) == 1


async def test_exception_inside_async_with_still_closes(soong_env: SoongEnv) -> None:
    """Case A5."""
    fake = FakeProvider(text("a"))
    with pytest.raises(RuntimeError):
        async with open_runtime(soong_env, fake) as rt:
            await collect(await rt.start("one"))
            raise RuntimeError("boom")
    assert fake.closed == 1
    with pytest.raises(AgentCoreError):
        await rt.start("x")


async def test_register_tool_name_rules(soong_env: SoongEnv) -> None:
    async with open_runtime(soong_env, FakeProvider()) as rt:
        rt.register_tool(echo_tool(), echo)
        for name in ("demo.echo", "code.read_file", "agent.mine", "internal.mine", "mcp.srv.tool"):
            with pytest.raises(AgentCoreError) as info:
                rt.register_tool(echo_tool(name), echo)
            assert info.value.code == ErrorCode.validation_error, name


async def test_code_tool_collision_from_supplied_registry_fails_open(soong_env: SoongEnv) -> None:
    registry = ToolRegistry()
    registry.register_tool(echo_tool("code.read_file"), echo)
    soong_env.write_config()
    rt = AgentRuntime(project_dir=soong_env.project, tool_registry=registry)
    with pytest.raises(AgentCoreError) as info:
        await rt.__aenter__()
    assert info.value.code == ErrorCode.validation_error
    await rt.close()


async def test_tool_registered_after_open_used_by_later_runs(soong_env: SoongEnv) -> None:
    fake = FakeProvider(text("a"), tool_calls(("demo.echo", {"x": "hi"}, "call_1")), text("b"))
    async with open_runtime(soong_env, fake) as rt:
        await collect(await rt.start("one"))
        rt.register_tool(echo_tool(), echo)
        run = await rt.start("two")
        await collect(run)
        assert run.status == RunStatus.completed
    assert "demo.echo" not in {t.name for t in fake.requests[0].tools}
    assert "demo.echo" in {t.name for t in fake.requests[1].tools}


# ---- A6: RunHandle shape -------------------------------------------------------------------------------


async def test_run_handle_shape_and_message_forms(soong_env: SoongEnv) -> None:
    """Case A6."""
    fake = FakeProvider(text("a"), text("b"))
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("same text")
        assert isinstance(run, RunHandle)
        assert run.run_id.startswith("run_") and run.session_id.startswith("sess_")
        assert run.agent_id.startswith("agent_")
        assert isinstance(run.status, RunStatus) and run.mode == RunMode.normal
        assert re.fullmatch(r"sess_[A-Za-z0-9_]+", run.session_id)
        await collect(run)
        assert await run.wait() == RunStatus.completed
        with pytest.raises(AgentCoreError) as info:
            run.child_events("run_20260101_000000_000000000000")
        assert info.value.code == ErrorCode.validation_error
        with pytest.raises(AgentCoreError) as info2:
            await run.inspect_child("run_20260101_000000_000000000000")
        assert info2.value.code == ErrorCode.validation_error
        run2 = await rt.start(UserMessage(content=[TextBlock(text="same text")]), session_id=run.session_id)
        await collect(run2)
        assert run2.agent_id == run.agent_id
    users = rows(
        soong_env,
        f"SELECT content_json, metadata_json FROM \"nodes_{run.session_id}\" WHERE role = 'user' ORDER BY node_seq",
    )
    assert len(users) == 2 and dict(users[0]) == dict(users[1])


async def test_invalid_start_arguments(soong_env: SoongEnv) -> None:
    """Case A6."""
    async with open_runtime(soong_env, FakeProvider()) as rt:
        bad: list[Any] = [
            {"message": ""},
            {"message": "   "},
            {"message": 42},
            {"message": "x", "mode": "turbo"},
            {"message": "x", "session_id": "x; DROP TABLE sessions"},
            {"message": "x", "session_id": "sess_20260101_000000_000000000000"},
        ]
        for kwargs in bad:
            with pytest.raises(AgentCoreError) as info:
                await rt.start(**kwargs)
            assert info.value.code == ErrorCode.validation_error, kwargs
    assert rows(soong_env, "SELECT count(*) AS n FROM runs")[0]["n"] == 0
    assert rows(soong_env, "SELECT count(*) AS n FROM sessions")[0]["n"] == 0


# ---- A8 / A9 (composer half) -------------------------------------------------------------------------


async def test_static_blocks_order_metadata_and_stability(soong_env: SoongEnv) -> None:
    """Case A8."""
    fake = FakeProvider(text("a"), text("b"))
    async with open_runtime(soong_env, fake) as rt:
        first = await rt.start("one")
        await collect(first)
        await collect(await rt.start("two"))
    runs = [[b for b in req.system if not b.dynamic] for req in fake.requests]
    ids = [b.block_id for b in runs[0]]
    core = ["system.core", "system.tool_protocol", "system.todo", "system.permissions"]
    assert ids[:4] == core
    assert ids[:9] == [
        *core,
        "system.multi_agent",
        "system.memory",
        "system.compact",
        "runtime.role",
        "runtime.tool_catalog",
    ]
    assert [b.priority for b in runs[0]] == sorted(b.priority for b in runs[0])
    for block in runs[0][:7]:
        assert block.metadata["template_id"] == block.block_id
        assert block.metadata["template_version"]
    assert [(b.block_id, b.priority) for b in runs[0]] == [(b.block_id, b.priority) for b in runs[1]]
    flags = [b.dynamic for b in fake.requests[0].system]
    assert flags == sorted(flags)  # every static block precedes every dynamic block
    assert all(b.priority >= 100 for b in fake.requests[0].system if b.dynamic)


async def test_unknown_plan_template_fails_startup(soong_env: SoongEnv) -> None:
    """Case A9."""
    soong_env.write_config(plan={"template_name": "nope"})
    with pytest.raises(AgentCoreError) as info:
        rt = AgentRuntime(project_dir=soong_env.project)
        async with rt:
            pass
    assert info.value.code == ErrorCode.config_error
    if (soong_env.home / "sessions.sqlite").exists():
        assert rows(soong_env, "SELECT count(*) AS n FROM sessions")[0]["n"] == 0


# ---- D2: orchestrator mode identity ------------------------------------------------------------------


async def test_orchestrator_mode_identity(soong_env: SoongEnv) -> None:
    """Case D2."""
    from tests.fixtures.tool_pipeline import PermissionRecorder

    fake = FakeProvider(
        tool_calls(("code.write_file", {"path": "out.txt", "content": "x"}, "call_w")),
        text("orchestrated"),
        text("normal"),
    )
    permissions = PermissionRecorder.always("allow_once")
    async with open_runtime(soong_env, fake, permission_callback=permissions) as rt:
        orch = await rt.start("do task", mode="orchestrator")
        assert orch.mode == RunMode.orchestrator
        await collect(orch)
        normal = await rt.start("plain", mode="normal")
        await collect(normal)
        with pytest.raises(AgentCoreError) as mixed:
            await rt.start("normal in orchestrator session", session_id=orch.session_id)
        assert mixed.value.code == ErrorCode.validation_error
    assert orch.status == RunStatus.completed, orch.error
    agents = rows(
        soong_env,
        "SELECT agent_type, parent_agent_id, metadata_json FROM agents WHERE session_id = ?",
        orch.session_id,
    )
    roots = [a for a in agents if a["parent_agent_id"] is None]
    assert [a["agent_type"] for a in roots] == ["orchestrator"]
    assert "main" not in {a["agent_type"] for a in agents}
    assert '"Orchestrator"' in roots[0]["metadata_json"]
    assert [r.agent_role for r in permissions.requests] == ["orchestrator"]
    assert fake.requests[0].metadata["agent_type"] == "orchestrator"
    normal_agents = rows(soong_env, "SELECT agent_type FROM agents WHERE session_id = ?", normal.session_id)
    assert [a["agent_type"] for a in normal_agents] == ["main"] and normal.mode == RunMode.normal


async def test_lazy_open_on_first_call_without_async_with(soong_env: SoongEnv) -> None:
    """Case A5."""
    fake = FakeProvider(text("lazy"))
    soong_env.write_config()
    rt = AgentRuntime(
        project_dir=soong_env.project, provider_registry=ProviderRegistry({"fake": fake.factory})
    )
    try:
        run = await rt.start("hi")  # opens storage lazily
        await collect(run)
        assert run.status == RunStatus.completed
    finally:
        await rt.close()
    assert fake.closed == 1
    never_opened = AgentRuntime(project_dir=soong_env.project)
    await never_opened.close()  # nothing to release; still idempotent
    await never_opened.close()


async def test_failed_open_releases_everything_and_a_later_call_retries(soong_env: SoongEnv) -> None:
    fake = FakeProvider(text("second attempt works"))
    soong_env.write_config()
    soong_env.write_home("hooks.json", "{not json")
    registry = ToolRegistry()
    registry.register_tool(echo_tool(), echo)
    rt = AgentRuntime(
        project_dir=soong_env.project,
        provider_registry=ProviderRegistry({"fake": fake.factory}),
        tool_registry=registry,
    )
    with pytest.raises(ConfigError) as info:
        await rt.start("first")
    assert info.value.code == ErrorCode.config_error and "hooks.json" in info.value.message
    assert registry.names() == ["demo.echo"]  # the failed attempt left the caller's registry as it was
    soong_env.write_home("hooks.json", '{"version": 1, "hooks": {}}')
    async with open_runtime(soong_env, FakeProvider(text("other")), write_config=False) as other:
        await collect(await other.start("another runtime uses the released database meanwhile"))
    try:
        run = await rt.start("second")
        await collect(run)
        assert run.status == RunStatus.completed, run.error
        assert "demo.echo" in {t.name for t in fake.requests[0].tools}
    finally:
        await rt.close()

"""Provider registry and provider-facing core behaviour through the runtime (case C1 runtime part;
docs/providers.md)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_core import AgentCoreError, AgentRuntime, ConfigError, ErrorCode, ProviderRegistry, RunStatus
from agent_core.config.model import ResolvedModelConfig
from agent_core.types.enums import EventType
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, fail, text, tool_calls
from tests.fixtures.runtime import collect, open_runtime, rows


def custom_config() -> dict[str, Any]:
    return {
        "model": {
            "provider": "custom",
            "name": "custom-model",
            "base_url": "http://127.0.0.1:9/v1",
            "context_window": 16000,
            "max_output_tokens": 700,
            "temperature": 0.3,
            "timeout_ms": 4321,
            "retry": {"max_attempts": 5, "initial_backoff_ms": 7, "max_backoff_ms": 70},
        }
    }


def assert_resolved(config: ResolvedModelConfig) -> None:
    assert (config.provider, config.name, config.base_url) == (
        "custom",
        "custom-model",
        "http://127.0.0.1:9/v1",
    )
    assert (config.context_window, config.max_output_tokens, config.temperature) == (16000, 700, 0.3)
    assert config.timeout_ms == 4321
    assert (config.retry.max_attempts, config.retry.initial_backoff_ms, config.retry.max_backoff_ms) == (
        5,
        7,
        70,
    )


# ---- C1: custom providers ---------------------------------------------------------------


async def test_providers04_registry_passed_to_runtime(soong_env: SoongEnv) -> None:
    """Case C1."""
    fake = FakeProvider(text("from custom"), provider_key="custom")
    registry = ProviderRegistry({"custom": fake.factory})
    async with open_runtime(soong_env, config=custom_config(), provider_registry=registry) as rt:
        run = await rt.start("hello")
        events = await collect(run, debug=True)
    assert run.status == RunStatus.completed, run.error
    assert len(fake.configs) == 1
    assert_resolved(fake.configs[0])
    assert fake.requests[0].model == "custom-model" and fake.requests[0].temperature == 0.3
    assert fake.requests[0].max_output_tokens == 700
    started = next(e for e in events if e.event_type == EventType.model_started)
    assert started.data["provider"] == "custom"
    # built-in keys stay available next to the caller's factories
    assert {"openai", "anthropic", "ollama", "custom"} <= set(registry.keys())
    assert fake.closed == 1


async def test_register_provider_before_first_start(soong_env: SoongEnv) -> None:
    """Case C1."""
    fake = FakeProvider(text("registered"), provider_key="custom")
    soong_env.write_config(**custom_config())
    rt = AgentRuntime(project_dir=soong_env.project)
    rt.register_provider("custom", fake.factory)
    async with rt:
        run = await rt.start("hello")
        await collect(run)
    assert run.status == RunStatus.completed and len(fake.requests) == 1
    assert_resolved(fake.configs[0])


async def test_runtime_re_registration_replaces_and_runtimes_are_isolated(soong_env: SoongEnv) -> None:
    """Case C1."""
    first = FakeProvider(provider_key="custom")
    second = FakeProvider(text("second wins"), provider_key="custom")
    soong_env.write_config(**custom_config())
    async with AgentRuntime(project_dir=soong_env.project) as rt1:
        rt1.register_provider("custom", first.factory)
        rt1.register_provider("custom", second.factory)
        run = await rt1.start("hello")
        await collect(run)
        assert run.status == RunStatus.completed and first.requests == []
        async with AgentRuntime(project_dir=soong_env.project) as rt2:
            with pytest.raises(ConfigError) as info:
                await rt2.start("other runtime")
            assert info.value.code == ErrorCode.config_error and "custom" in info.value.message
    assert rows(soong_env, "SELECT count(*) AS n FROM runs")[0]["n"] == 1


# ---- an unregistered provider key -------------------------------------------------------


async def test_providers03_unknown_provider_creates_nothing(soong_env: SoongEnv) -> None:
    soong_env.write_config(model={"provider": "nope"})
    with pytest.raises(AgentCoreError) as info:
        async with AgentRuntime(project_dir=soong_env.project) as rt:
            await rt.start("hello")
    assert info.value.code == ErrorCode.config_error and "nope" in info.value.message
    if (soong_env.home / "sessions.sqlite").exists():
        assert rows(soong_env, "SELECT count(*) AS n FROM sessions")[0]["n"] == 0
        assert rows(soong_env, "SELECT count(*) AS n FROM runs")[0]["n"] == 0
        names = {r["name"] for r in rows(soong_env, "SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert not {n for n in names if n.startswith(("nodes_", "events_"))}


# ---- adapter close ------------------------------------------------------------------------


async def test_providers05_close_closes_every_created_adapter(soong_env: SoongEnv) -> None:
    compact = FakeProvider(provider_key="fake")
    main = FakeProvider(text("one"), text("two"))
    created: list[FakeProvider] = []

    def factory(config: ResolvedModelConfig) -> FakeProvider:
        adapter = main if not created else compact
        created.append(adapter)
        return adapter

    async with open_runtime(soong_env, provider_registry=ProviderRegistry({"fake": factory})) as rt:
        first = await rt.start("one")
        await collect(first)
        await collect(await rt.start("two", session_id=first.session_id))
        assert len(created) == 1  # one adapter per resolved model config, reused across runs
    await rt.close()
    assert main.closed == 1 and compact.closed == 0
    await main.close()
    assert main.closed == 2


# ---- nodes and usage ---------------------------------------------------------------


async def test_providers22_failure_without_text_writes_no_assistant_node(soong_env: SoongEnv) -> None:
    fake = FakeProvider(fail("provider_timeout", type_="timeout", retryable=True))
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("hello")
        events = await collect(run)
    assert run.status == RunStatus.failed and run.error is not None and run.error.code == "provider_timeout"
    failed = next(e for e in events if e.event_type == EventType.model_failed)
    assert failed.data["partial_node_id"] is None
    assert [r["role"] for r in rows(soong_env, f'SELECT role FROM "nodes_{run.session_id}"')] == ["user"]


async def test_providers23_28_assistant_node_usage_and_token_counts(soong_env: SoongEnv) -> None:
    fake = FakeProvider(
        tool_calls(("code.list_dir", {"path": "."}, "call_1"), lead_text="Looking."), text("All done.")
    )
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("hello")
        events = await collect(run, debug=True)
    sid = run.session_id
    assistants = [
        dict(r)
        for r in rows(soong_env, f"SELECT * FROM \"nodes_{sid}\" WHERE role = 'assistant' ORDER BY node_seq")
    ]
    completed = [e for e in events if e.event_type == EventType.model_completed]
    assert len(assistants) == len(completed) == 2
    for node, event in zip(assistants, completed, strict=True):
        assert event.node_id == node["node_id"]  # written in the same transaction as its node
        metadata = json.loads(node["metadata_json"])
        assert metadata["usage"] == event.data["usage"]
        assert metadata["provider"] == "fake" and metadata["model"] == "test-model"
        assert node["token_count"] is not None and node["token_count"] != metadata["usage"]["output_tokens"]
    first_content = json.loads(assistants[0]["content_json"])
    assert first_content[0] == {"type": "text", "text": "Looking."}
    assert first_content[1]["type"] == "tool_call" and first_content[1]["tool_call_id"] == "call_1"
    usage = json.loads(
        rows(soong_env, "SELECT usage_json FROM runs WHERE run_id = ?", run.run_id)[0]["usage_json"]
    )
    assert usage["input_tokens"] == 20 and usage["output_tokens"] == 5 + len("All done.")
    assert usage["total_tokens"] == 15 + 10 + len("All done.")
    assert events[-1].data["usage"]["input_tokens"] == 20


def _turn(*events: Any) -> Any:
    async def turn(fake: FakeProvider, request: Any) -> Any:
        for event in events:
            yield event

    return turn


async def test_providers_protocol_violations_fail_the_run(soong_env: SoongEnv) -> None:
    from agent_core.types.content import ToolCallBlock
    from agent_core.types.model import (
        ModelCompleted,
        ModelStarted,
        ModelTextDelta,
        StopReason,
        ToolCall,
        Usage,
    )

    started = ModelStarted(provider="fake", model="test-model")
    mismatched = ModelCompleted(
        content=[ToolCallBlock(tool_call_id="call_a", name="code.list_dir", arguments={"path": "."})],
        tool_calls=[ToolCall(tool_call_id="call_b", name="code.list_dir", arguments={"path": "."})],
        usage=Usage(),
        stop_reason=StopReason(reason="tool_use"),
    )
    fake = FakeProvider(
        _turn(started, ModelTextDelta(text="and then nothing")),  # no terminal event
        _turn(started, mismatched),
    )
    async with open_runtime(soong_env, fake) as rt:
        first = await rt.start("one")
        await collect(first)
        second = await rt.start("two", session_id=first.session_id)
        await collect(second)
    for run in (first, second):
        assert run.status == RunStatus.failed and run.error is not None
        assert (run.error.type, run.error.code) == ("protocol", "provider_error")
    roles = [r["role"] for r in rows(soong_env, f'SELECT role FROM "nodes_{first.session_id}"')]
    assert roles.count("tool") == 0  # no tool ran for the invalid completion


async def test_long_provider_tool_call_id_is_replaced(soong_env: SoongEnv) -> None:
    from agent_core.types.content import ToolCallBlock
    from agent_core.types.model import ModelCompleted, ModelStarted, StopReason, ToolCall, Usage

    raw_id = "x" * 200
    completed = ModelCompleted(
        content=[ToolCallBlock(tool_call_id=raw_id, name="code.list_dir", arguments={"path": "."})],
        tool_calls=[ToolCall(tool_call_id=raw_id, name="code.list_dir", arguments={"path": "."})],
        usage=Usage(),
        stop_reason=StopReason(reason="tool_use"),
    )
    fake = FakeProvider(_turn(ModelStarted(provider="fake", model="test-model"), completed), text("done"))
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("go")
        await collect(run)
    assert run.status == RunStatus.completed, run.error
    assistant = rows(
        soong_env, f"SELECT content_json FROM \"nodes_{run.session_id}\" WHERE role = 'assistant'"
    )[0]
    block = json.loads(assistant["content_json"])[0]
    assert block["tool_call_id"].startswith("call_") and block["metadata"]["provider_tool_call_id"] == raw_id
    tool = rows(soong_env, f"SELECT content_json FROM \"nodes_{run.session_id}\" WHERE role = 'tool'")[0]
    assert json.loads(tool["content_json"])[0]["tool_call_id"] == block["tool_call_id"]


async def test_providers05_a_failing_adapter_close_does_not_stop_the_others(soong_env: SoongEnv) -> None:
    from agent_core import AgentDefinition

    class Broken(FakeProvider):
        async def close(self) -> None:
            self.closed += 1
            raise RuntimeError("close exploded")

    child_reply = '```json\n{"status": "completed", "summary": "done by alt"}\n```'
    broken = Broken(
        tool_calls(
            ("agent.create_sub_agent", {"agent_definition_id": "alt_agent", "task": "help"}, "call_c")
        ),
        text("parent done"),
        provider_key="broken",
    )
    fine = FakeProvider(text(child_reply))
    registry = ProviderRegistry({"broken": broken.factory, "fake": fine.factory})
    overrides = {"model": {"provider": "broken"}, "model_overrides": {"alt": {"provider": "fake"}}}
    async with open_runtime(soong_env, provider_registry=registry, config=overrides) as rt:
        rt.register_agent_definition(
            AgentDefinition(
                agent_definition_id="alt_agent",
                name="alt",
                description="Alt.",
                model_profile="alt",
                source="code",
            )
        )
        run = await rt.start("delegate")
        await collect(run)
        assert run.status == RunStatus.completed, run.error
    assert len(fine.requests) == 1 and len(broken.requests) == 2  # two adapters were instantiated
    assert broken.closed == 1 and fine.closed == 1  # the failing close was swallowed; the other still closed

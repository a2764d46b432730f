"""Declarative command tools (docs/tools.md#declarative-tools, docs/permissions.md#target-scopes; H15 for
declarative tools).

Tools run ``tests/fixtures/declarative_tool.py`` as real processes.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_core._redaction import Redactor
from agent_core.config.loader import LoadedConfig, load_config
from agent_core.errors import AgentCoreError, ConfigError, ErrorCode
from agent_core.tools._builtin import CodeToolsAdapter
from agent_core.tools._declarative import DeclarativeToolsAdapter, load_declarative_tools, render_arg
from agent_core.tools.registry import ToolRegistry
from agent_core.types.content import JsonBlock, TextBlock
from agent_core.types.enums import EventType
from agent_core.types.model import ToolCall
from tests.fixtures.env import SoongEnv
from tests.fixtures.tool_pipeline import PermissionRecorder, make_executor, tool_call
from tests.fixtures.tool_sink import RecordingSink, make_ctx, make_scope

SCRIPT = str(Path(__file__).resolve().parents[1] / "fixtures" / "declarative_tool.py")
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "count": {"type": "integer"},
        "flag": {"type": "boolean"},
        "items": {"type": "array", "items": {"type": "string"}},
    },
    "additionalProperties": False,
}


def spec(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": "demo.echo",
        "description": "echo the arguments",
        "input_schema": SCHEMA,
        "permission": "readonly",
        "command": sys.executable,
        "args": [SCRIPT, "--"],
    }
    base.update(overrides)
    return base


def write_tool(env: SoongEnv, data: Any, filename: str = "echo.json") -> Path:
    return env.write_home(f"tools/{filename}", data if isinstance(data, str) else json.dumps(data))


def loaded(env: SoongEnv, **config: Any) -> LoadedConfig:
    env.write_config(**config)
    return load_config(home_dir=env.home, project_dir=env.project)


def adapter_for(
    env: SoongEnv, *tools: dict[str, Any], redactor: Redactor | None = None, **config: Any
) -> DeclarativeToolsAdapter:
    for index, data in enumerate(tools):
        write_tool(env, data, f"t{index}.json")
    adapter = load_declarative_tools(loaded(env, **config), redactor=redactor)
    assert adapter is not None
    return adapter


def expect_config_error(env: SoongEnv, data: Any, fragment: str, **config: Any) -> None:
    path = write_tool(env, data)
    with pytest.raises(ConfigError) as info:
        load_declarative_tools(loaded(env, **config))
    assert info.value.code == ErrorCode.config_error
    assert str(path) in info.value.message, info.value.message
    assert fragment in info.value.message, info.value.message


async def run(
    adapter: DeclarativeToolsAdapter, env: SoongEnv, tmp_path: Path, tool_name: str, **args: Any
) -> tuple[Any, RecordingSink]:
    sink = RecordingSink(tmp_path / "artifacts")
    scope = make_scope(env.project, env.home)
    call = ToolCall(tool_call_id="call_d1", name=tool_name, arguments=args)
    result = await adapter.execute(call, make_ctx(scope, sink, tool_name, "call_d1"))
    return result, sink


def test_loads_only_from_home_tools_dir(soong_env: SoongEnv) -> None:
    soong_env.write_project(".soong-agent/tools/p.json", json.dumps(spec(name="proj.tool")))
    soong_env.write_project("tools/p.json", json.dumps(spec(name="proj.tool2")))
    assert load_declarative_tools(loaded(soong_env)) is None
    write_tool(soong_env, spec())
    adapter = load_declarative_tools(loaded(soong_env))
    assert adapter is not None
    (definition,) = adapter.definitions()
    assert definition.name == "demo.echo" and definition.permission == "readonly"
    assert definition.tags == ["declarative"]
    assert definition.metadata["source"] == "declarative" and definition.metadata["concurrency"] == "parallel"


def test_declarative_disabled_loads_nothing(soong_env: SoongEnv) -> None:
    write_tool(soong_env, "{invalid")
    assert load_declarative_tools(loaded(soong_env, tools={"declarative_enabled": False})) is None


def test_unknown_field_and_readonly_shell(soong_env: SoongEnv) -> None:
    expect_config_error(soong_env, spec(cwd="/tmp"), "cwd")
    expect_config_error(soong_env, spec(command_type="shell", command="echo hi", args=[]), "shell tool")
    write_tool(soong_env, spec(command_type="shell", command="echo hi", args=[], tags=["dangerous"]))
    adapter = load_declarative_tools(loaded(soong_env))
    assert adapter is not None and adapter.definitions()[0].metadata["concurrency"] == "serial"


def test_timeout_above_max(soong_env: SoongEnv) -> None:
    expect_config_error(soong_env, spec(timeout_ms=700_000), "tools.max_timeout_ms")


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (spec(name="agent.x"), "reserved namespace"),
        (spec(name="internal.x"), "reserved namespace"),
        (spec(name="mcp.x.y"), "reserved namespace"),
        (spec(name="nodot"), "canonical"),
        (spec(name="bad.na me"), "canonical"),
        (
            spec(input_schema={"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}]}}}),
            "oneOf",
        ),
        (spec(input_schema={"type": "string"}), "input_schema"),
        (spec(args=["{{args.missing}}"]), "missing"),
        (spec(args=["{{ env.HOME }}"]), "invalid template"),
        (spec(args=["x{{args.name"]), "unterminated"),
        (
            spec(command_type="shell", permission="write", command="echo {{args.name}}", args=[]),
            "placeholders",
        ),
        (spec(tags=["Net"]), "lowercase"),
        (spec(env_allowlist=["A=B"]), "env_allowlist"),
        (spec(permission="admin"), "permission"),
        (spec(command=""), "command"),
        ("[1, 2]", "<root>"),
        ("{nope", "invalid JSON"),
    ],
)
def test_invalid_files_fail_startup(soong_env: SoongEnv, data: Any, fragment: str) -> None:
    expect_config_error(soong_env, data if isinstance(data, str) else json.dumps(data), fragment)


def test_working_dir_rules(soong_env: SoongEnv, tmp_path: Path) -> None:
    outside = tmp_path / "out"
    outside.mkdir()
    expect_config_error(soong_env, spec(working_dir=str(outside)), "working_dir")
    (soong_env.project / "sub").mkdir()
    write_tool(soong_env, spec(working_dir="<project>/sub"))
    adapter = load_declarative_tools(loaded(soong_env))
    assert adapter is not None and adapter.tool("demo.echo").working_dir == soong_env.project / "sub"


def test_duplicates_fail_startup(soong_env: SoongEnv) -> None:
    write_tool(soong_env, spec(), "a.json")
    path = write_tool(soong_env, spec(), "b.json")
    with pytest.raises(ConfigError) as info:
        load_declarative_tools(loaded(soong_env))
    assert str(path) in info.value.message and "a.json" in info.value.message


def test_duplicate_of_builtin_fails_registration_with_config_error(soong_env: SoongEnv) -> None:
    path = write_tool(soong_env, spec(name="code.read_file"))
    config = loaded(soong_env)
    adapter = load_declarative_tools(config)
    assert adapter is not None
    registry = ToolRegistry()
    registry.register_adapter(CodeToolsAdapter(config.settings), internal=True)
    with pytest.raises(ConfigError) as info:
        adapter.register(registry)
    assert info.value.code == ErrorCode.config_error and str(path) in info.value.message
    assert (
        registry.get("code.read_file") is not None and registry.get("code.read_file").adapter is not adapter
    )  # type: ignore[union-attr]
    write_tool(soong_env, spec(name="code.my_tool"))
    ok = load_declarative_tools(loaded(soong_env))
    assert ok is not None
    ok.register(registry)
    assert "code.my_tool" in registry


def test_render_rules() -> None:
    args = {"name": "a; rm x", "count": 3, "flag": True, "items": ["p", "q"], "none": None}
    assert render_arg("{{args.name}}", args) == "a; rm x"
    assert render_arg("{{ args.count }}", args) == "3"
    assert render_arg("{{args.flag}}", args) == "true"
    assert render_arg("{{args.items}}", args) == '["p","q"]'
    assert render_arg("{{args.absent}}", args) is None
    assert render_arg("{{args.none}}", args) is None
    assert render_arg("--name={{args.name}}", args) == "--name=a; rm x"
    assert render_arg("--x={{args.absent}}!", args) == "--x=!"
    assert render_arg("plain", args) == "plain"


async def test_exec_tool_end_to_end(soong_env: SoongEnv, tmp_path: Path) -> None:
    tool = spec(
        args=[SCRIPT, "--", "{{args.name}}", "--count={{args.count}}", "{{args.flag}}", "{{args.items}}"]
    )
    adapter = adapter_for(soong_env, tool)
    result, _ = await run(adapter, soong_env, tmp_path, "demo.echo", name="a; rm x", count=2, items=["i j"])
    assert not result.is_error, result.error
    (block,) = result.content
    assert isinstance(block, JsonBlock)
    assert block.data["args"] == ["a; rm x", "--count=2", '["i j"]']
    assert block.data["cwd"] == str(soong_env.project)
    request = block.data["request"]
    assert request == {
        "tool_name": "demo.echo",
        "tool_call_id": "call_d1",
        "arguments": {"name": "a; rm x", "count": 2, "items": ["i j"]},
        "session_id": request["session_id"],
        "agent_id": request["agent_id"],
        "run_id": request["run_id"],
        "project_dir": str(soong_env.project),
    }
    assert result.metadata["exit_code"] == 0
    assert not (soong_env.project / "x").exists()


async def test_shell_tool_gets_positional_parameters(soong_env: SoongEnv, tmp_path: Path) -> None:
    command = f'{shlex.quote(sys.executable)} {shlex.quote(SCRIPT)} -- "$1" "$2" "$#"'
    tool = spec(
        command_type="shell", permission="write", command=command, args=["{{args.name}}", "{{args.count}}"]
    )
    adapter = adapter_for(soong_env, tool)
    result, _ = await run(
        adapter, soong_env, tmp_path, "demo.echo", name="$(touch pwned); `id` && echo x", count=5
    )
    assert not result.is_error, result.error
    assert result.content[0].data["args"] == ["$(touch pwned); `id` && echo x", "5", "2"]  # type: ignore[union-attr]
    assert not (soong_env.project / "pwned").exists()


async def test_nonzero_exit_keeps_content_but_is_error(soong_env: SoongEnv, tmp_path: Path) -> None:
    adapter = adapter_for(soong_env, spec(args=[SCRIPT, "--exit", "4", "--stderr", "it broke"]))
    result, _ = await run(adapter, soong_env, tmp_path, "demo.echo")
    assert result.is_error and result.error is not None
    assert result.error.code == ErrorCode.internal_error and result.error.type == "command_failed"
    assert result.error.details["exit_code"] == 4 and "it broke" in result.error.message
    assert isinstance(result.content[0], JsonBlock), "parsed stdout content is kept"
    assert result.metadata["stderr"] == "it broke"
    broken = adapter_for(soong_env, spec(name="demo.raw", args=[SCRIPT, "--exit", "1", "--raw", "oops"]))
    result, _ = await run(broken, soong_env, tmp_path, "demo.raw")
    assert result.is_error and result.error.type == "command_failed"  # type: ignore[union-attr]
    assert [b.text for b in result.content if isinstance(b, TextBlock)][-1] == "oops"


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--raw", "not json"], "not valid JSON"),
        (["--raw", '{"is_error": false}'], "content"),
        (["--raw", '{"content": [], "bogus": 1}'], "bogus"),
        (["--raw", ""], "empty"),
        (["--call-id", "call_other"], "tool_call_id"),
    ],
)
async def test_invalid_stdout_is_schema_error(
    soong_env: SoongEnv, tmp_path: Path, extra: list[str], fragment: str
) -> None:
    adapter = adapter_for(soong_env, spec(args=[SCRIPT, *extra]))
    result, _ = await run(adapter, soong_env, tmp_path, "demo.echo")
    assert result.is_error and result.error.code == ErrorCode.schema_error  # type: ignore[union-attr]
    assert fragment in result.error.details["reason"]  # type: ignore[union-attr]
    assert "stdout_summary" in result.error.details  # type: ignore[union-attr]


async def test_error_flag_without_error_object(soong_env: SoongEnv, tmp_path: Path) -> None:
    adapter = adapter_for(soong_env, spec(args=[SCRIPT, "--error"]))
    result, _ = await run(adapter, soong_env, tmp_path, "demo.echo")
    assert result.is_error and result.error.code == ErrorCode.internal_error  # type: ignore[union-attr]


async def test_oversized_stdout_is_artifactised_and_invalid(soong_env: SoongEnv, tmp_path: Path) -> None:
    adapter = adapter_for(soong_env, spec(args=[SCRIPT, "--size", "5000"], stdout_limit_bytes=1000))
    result, sink = await run(adapter, soong_env, tmp_path, "demo.echo")
    assert result.is_error and result.error.code == ErrorCode.schema_error  # type: ignore[union-attr]
    artifact_id = result.metadata["stdout_artifact_id"]
    assert result.error.details["stdout_artifact_id"] == artifact_id  # type: ignore[union-attr]
    assert "z" * 5000 in sink.artifacts[artifact_id].read_text()
    small = adapter_for(soong_env, spec(name="demo.small", args=[SCRIPT, "--size", "500"]))
    ok, _ = await run(small, soong_env, tmp_path, "demo.small")
    assert not ok.is_error and ok.content[1] == TextBlock(text="z" * 500)


async def test_timeout(soong_env: SoongEnv, tmp_path: Path) -> None:
    adapter = adapter_for(soong_env, spec(args=[SCRIPT, "--sleep", "30"], timeout_ms=300))
    result, _ = await run(adapter, soong_env, tmp_path, "demo.echo")
    assert result.is_error and result.error.code == ErrorCode.timeout  # type: ignore[union-attr]
    assert result.metadata["exit_code"] is None


async def test_env_allowlist_required_and_redacted(
    soong_env: SoongEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTHER_SECRET_TOKEN", "other-secret-value-1")
    log = tmp_path / "env.log"
    redactor = Redactor()
    tool = spec(
        args=[SCRIPT, "--log", str(log), "--stderr", "tok=tool-secret-value-2"],
        env_allowlist=["SOONG_TEST_TOOL_TOKEN"],
    )
    adapter = adapter_for(soong_env, tool, redactor=redactor)
    scope = make_scope(soong_env.project, soong_env.home)
    call = ToolCall(tool_call_id="c", name="demo.echo", arguments={})
    with pytest.raises(AgentCoreError) as info:
        await adapter.preflight(call, make_ctx(scope, RecordingSink(tmp_path / "a"), "demo.echo", "c"))
    assert info.value.code == ErrorCode.config_error and "SOONG_TEST_TOOL_TOKEN" in info.value.message
    assert "demo.echo" in info.value.message
    monkeypatch.setenv("SOONG_TEST_TOOL_TOKEN", "tool-secret-value-2")
    result, _ = await run(adapter, soong_env, tmp_path, "demo.echo")
    assert not result.is_error
    env = json.loads(log.read_text().splitlines()[-1])["env"]
    assert env["SOONG_TEST_TOOL_TOKEN"] == "tool-secret-value-2"
    assert "OTHER_SECRET_TOKEN" not in env
    assert "tool-secret-value-2" not in result.metadata["stderr"]
    assert "tool-secret-value-2" in redactor.secrets()


async def test_preflight_scope_format(soong_env: SoongEnv, tmp_path: Path) -> None:
    adapter = adapter_for(soong_env, spec(args=[SCRIPT, "--", "{{args.name}}"]))
    scope = make_scope(soong_env.project, soong_env.home)
    ctx = make_ctx(scope, RecordingSink(tmp_path / "a"), "demo.echo")
    first = await adapter.preflight(
        ToolCall(tool_call_id="c1", name="demo.echo", arguments={"name": "a"}), ctx
    )
    same = await adapter.preflight(
        ToolCall(tool_call_id="c2", name="demo.echo", arguments={"name": "a"}), ctx
    )
    other = await adapter.preflight(
        ToolCall(tool_call_id="c3", name="demo.echo", arguments={"name": "b"}), ctx
    )
    argv = [str(Path(sys.executable)), SCRIPT, "--", "a"]
    digest = hashlib.sha256(json.dumps(argv, separators=(",", ":")).encode()).hexdigest()[:12]
    assert first.target_scope == f"{sys.executable} @ {soong_env.project} #{digest}"
    assert first.target_scope == same.target_scope != other.target_scope
    assert first.cwd == soong_env.project and first.target_paths == []
    assert set(first.env_summary) == {"PATH", "HOME", "TMPDIR"}
    shell = adapter_for(
        soong_env, spec(name="demo.sh", command_type="shell", permission="write", command="true", args=[])
    )
    pre = await shell.preflight(ToolCall(tool_call_id="c4", name="demo.sh", arguments={}), ctx)
    assert pre.target_scope is not None and pre.target_scope.split(" @ ")[0].endswith("/sh")


async def test_declarative_write_asks_readonly_does_not(soong_env: SoongEnv, tmp_path: Path) -> None:
    """Case H15."""
    log = tmp_path / "ran.log"
    adapter = adapter_for(
        soong_env,
        spec(name="demo.read", args=[SCRIPT, "--log", str(log)]),
        spec(name="demo.write", permission="write", args=[SCRIPT, "--log", str(log)]),
    )
    config = loaded(soong_env)
    registry = ToolRegistry()
    adapter.register(registry)
    scope = make_scope(soong_env.project, soong_env.home, effective_tools=frozenset(registry.names()))
    sink = RecordingSink(tmp_path / "art")
    executor, _ = make_executor(registry, config.settings, callback=None)
    outcome = await executor.execute_turn(
        [tool_call("demo.read", "r"), tool_call("demo.write", "w")], scope, sink
    )
    read, write = outcome.results
    assert not read.is_error
    assert write.is_error and write.error.code == ErrorCode.permission_denied  # type: ignore[union-attr]
    assert len(log.read_text().splitlines()) == 1
    recorder = PermissionRecorder.always("allow_once")
    executor, _ = make_executor(registry, config.settings, callback=recorder)
    outcome = await executor.execute_turn([tool_call("demo.write", "w2")], scope, sink)
    assert not outcome.results[0].is_error
    (request,) = recorder.requests
    assert request.tool_name == "demo.write" and request.permission == "write"
    assert request.target_scope is not None and " @ " in request.target_scope
    assert request.metadata.get("allow_for_session_available") is not False
    assert any(e.event_type == EventType.tool_completed for e in sink.events)

"""Hooks, declarative tools and MCP servers wired through the public runtime (docs/hooks-and-mcp.md,
docs/tools.md#declarative-tools)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

from agent_core import RunStatus
from agent_core.types.enums import EventType
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, text, tool_calls
from tests.fixtures.runtime import collect, open_runtime, rows, types

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
HOOK = FIXTURES / "hook_script.py"
MCP_SERVER = FIXTURES / "mcp_server.py"


def hook(*args: str) -> dict[str, Any]:
    return {
        "type": "command",
        "command": " ".join(shlex.quote(a) for a in (sys.executable, str(HOOK), *args)),
    }


def log_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def test_session_prompt_and_stop_hooks_through_the_loop(soong_env: SoongEnv, tmp_path: Path) -> None:
    """Case H21."""
    log = tmp_path / "hooks.log"
    once = tmp_path / "once"
    rules = {
        "SessionStart": [{"hooks": [hook("--log", str(log))]}],
        "UserPromptSubmit": [{"hooks": [hook("--log", str(log))]}],
        "Stop": [
            {"hooks": [hook("--log", str(log), "--deny-once", str(once), "--reason", "add tests first")]}
        ],
    }
    soong_env.write_home("hooks.json", json.dumps({"version": 1, "hooks": rules}))
    fake = FakeProvider(text("first answer"), text("second answer"))
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("do it")
        events = await collect(run, debug=True)
        assert run.status == RunStatus.completed
    names = types(events)
    assert "stop_hook_prevented" in names and "hook_denied" in names
    assert names.index("stop_hook_prevented") < names.index("loop_completed")
    phases = [entry["input"]["hook_event"] for entry in log_lines(log)]
    assert phases[:2] == ["SessionStart", "UserPromptSubmit"] and phases.count("Stop") == 2
    second = fake.requests[1]
    note = [m for m in second.messages if m.metadata.get("source_node_type") == "system_note"]
    assert note and "add tests first" in note[0].content[0].text  # type: ignore[union-attr]
    assert "a Stop hook prevented completion" in note[0].content[0].text  # type: ignore[union-attr]
    notes = rows(
        soong_env,
        f'SELECT role, node_type, metadata_json FROM "nodes_{run.session_id}" WHERE node_type = ?',
        "system_note",
    )
    assert [(r["role"], r["node_type"]) for r in notes] == [("user", "system_note")]
    # docs/hooks-and-mcp.md#denials
    assert json.loads(notes[0]["metadata_json"]) == {
        "synthetic": True,
        "source": "hook",
        "hook_event": "Stop",
    }


async def test_stop_hook_that_always_denies_ends_at_max_turns(soong_env: SoongEnv) -> None:
    """Case H21."""
    rules = {"Stop": [{"hooks": [hook("--decision", "deny", "--reason", "never done")]}]}
    soong_env.write_home("hooks.json", json.dumps({"version": 1, "hooks": rules}))
    fake = FakeProvider(text("a"), text("b"), text("c"))
    async with open_runtime(soong_env, fake, config={"runtime": {"max_turns": 3}}) as rt:
        run = await rt.start("loop")
        await collect(run)
        assert run.status == RunStatus.failed and run.end_reason == "max_turns"


async def test_mcp_tools_reach_the_model_and_a_broken_server_is_isolated(
    soong_env: SoongEnv, tmp_path: Path
) -> None:
    """Cases N1, N2."""
    log = tmp_path / "mcp.log"
    servers = {
        "docs": {
            "command": sys.executable,
            "args": [str(MCP_SERVER), "--tools", json.dumps([{"name": "echo"}]), "--log", str(log)],
        },
        "broken": {"command": sys.executable, "args": [str(MCP_SERVER), "--broken"]},
    }
    soong_env.write_home("mcp.json", json.dumps({"mcpServers": servers}))
    fake = FakeProvider(tool_calls(("mcp.docs.echo", {"text": "hi"}, "call_m")), text("done"))
    async with open_runtime(soong_env, fake, permission_callback=_allow) as rt:
        assert not log.exists()  # lazy: nothing connects at startup
        run = await rt.start("use mcp")
        events = await collect(run, debug=True)
        assert run.status == RunStatus.completed, run.error
    tools = {t.name for t in fake.requests[0].tools}
    assert "mcp.docs.echo" in tools and not any(name.startswith("mcp.broken.") for name in tools)
    failed = [e for e in events if e.event_type == EventType.mcp_server_failed]
    assert [e.data["server_id"] for e in failed] == ["broken"]
    results = [m for m in fake.requests[1].messages if m.role == "tool"]
    assert results and results[0].content[0].is_error is False  # type: ignore[union-attr]


async def test_declarative_tool_through_the_runtime(soong_env: SoongEnv, tmp_path: Path) -> None:
    """Case G24."""
    script = FIXTURES / "declarative_tool.py"
    spec = {
        "name": "demo.hello",
        "description": "Says hello.",
        "permission": "readonly",
        "input_schema": {"type": "object", "properties": {"who": {"type": "string"}}, "required": ["who"]},
        "command": sys.executable,
        "args": [str(script), "--", "{{args.who}}"],
    }
    soong_env.write_home("tools/hello.json", json.dumps(spec))
    fake = FakeProvider(tool_calls(("demo.hello", {"who": "you"}, "call_d")), text("ok"))
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("say hello")
        events = await collect(run)
    assert run.status == RunStatus.completed, run.error
    assert "demo.hello" in {t.name for t in fake.requests[0].tools}
    assert "tool_completed" in types(events)
    result = next(m for m in fake.requests[1].messages if m.role == "tool").content[0]
    data = result.content[0].data  # type: ignore[union-attr]
    assert data["args"] == ["you"] and data["request"]["arguments"] == {"who": "you"}


async def _allow(request: Any) -> Any:
    from agent_core import PermissionDecision

    return PermissionDecision(decision="allow_once")

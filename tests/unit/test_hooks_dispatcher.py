"""HooksDispatcher with real hook processes (docs/hooks-and-mcp.md, docs/events.md#hooks; H20).

Hooks are ``tests/fixtures/hook_script.py`` started through the shell; events are recorded by
``RecordingSink``. Pipeline-level interplay (deny skips the callback, skipping later calls, PostToolUse on
committed results) is in ``test_hooks_pipeline.py``.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agent_core._hooks import HooksDispatcher, load_hooks
from agent_core._hooks.config import HOOKS_FILENAME
from agent_core._redaction import REDACTED, Redactor
from agent_core.config.loader import load_config
from agent_core.tools.preflight import Preflight
from agent_core.types.content import ErrorPayload, TextBlock
from agent_core.types.enums import AgentRole, EventType
from agent_core.types.model import ToolCall
from agent_core.types.tools import ToolDefinition, ToolResult
from tests.fixtures.env import SoongEnv
from tests.fixtures.tool_sink import RecordingSink, make_scope

HOOK_SCRIPT = Path(__file__).resolve().parents[1] / "fixtures" / "hook_script.py"
SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}
WRITE = ToolDefinition(
    name="code.write_file", description="w", input_schema=SCHEMA, permission="write", tags=["code", "write"]
)


def hook_cmd(*args: str) -> str:
    return " ".join(shlex.quote(a) for a in (sys.executable, str(HOOK_SCRIPT), *args))


def hook(*args: str, **extra: Any) -> dict[str, Any]:
    return {"type": "command", "command": hook_cmd(*args), **extra}


def read_log(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def make_dispatcher(
    env: SoongEnv, hooks: dict[str, Any], redactor: Redactor | None = None, **config: Any
) -> HooksDispatcher:
    env.write_home(HOOKS_FILENAME, json.dumps({"version": 1, "hooks": hooks}))
    env.write_config(**config)
    dispatcher = load_hooks(load_config(home_dir=env.home, project_dir=env.project), redactor=redactor)
    assert isinstance(dispatcher, HooksDispatcher)
    return dispatcher


def call(path: str = "a.txt", call_id: str = "call_1") -> ToolCall:
    return ToolCall(tool_call_id=call_id, name="code.write_file", arguments={"path": path})


def preflight(env: SoongEnv, path: str = "a.txt") -> Preflight:
    target = env.project / path
    return Preflight(target_scope=str(target), target_paths=[target])


def types_of(sink: RecordingSink) -> list[EventType]:
    return [e.event_type for e in sink.events]


async def test_pre_tool_use_input_fields(soong_env: SoongEnv, tmp_path: Path) -> None:
    log = tmp_path / "pre.log"
    rules = {
        "PreToolUse": [{"matcher": {"tool_name": "code.write_file"}, "hooks": [hook("--log", str(log))]}]
    }
    dispatcher = make_dispatcher(soong_env, rules)
    sink = RecordingSink(tmp_path / "art")
    scope = make_scope(soong_env.project, soong_env.home)
    outcome = await dispatcher.pre_tool_use(
        scope=scope, sink=sink, tool=WRITE, call=call(), preflight=preflight(soong_env)
    )
    assert outcome.decision == "allow" and outcome.hook_count == 1 and not outcome.denied
    assert outcome.summary() == {"decision": "allow", "reasons": [], "hook_count": 1}
    (record,) = read_log(log)
    data = record["input"]
    assert data["hook_event"] == "PreToolUse"
    assert data["tool_name"] == "code.write_file"
    assert data["tool_call_id"] == "call_1"
    assert data["arguments"] == {"path": "a.txt"}
    assert data["permission"] == "write" and data["tags"] == ["code", "write"]
    assert data["target_paths"] == [str(soong_env.project / "a.txt")]
    assert data["target_scope"] == str(soong_env.project / "a.txt")
    for key, value in {
        "session_id": scope.session_id,
        "run_id": scope.run_id,
        "agent_id": scope.agent_id,
        "agent_role": "main",
        "parent_agent_id": None,
        "parent_run_id": None,
        "mode": "normal",
        "project_dir": str(soong_env.project),
        "home_dir": str(soong_env.home),
    }.items():
        assert data[key] == value, key
    assert data["created_at"].endswith("Z")
    assert types_of(sink) == [EventType.hook_started, EventType.hook_completed]
    started, completed = sink.events
    assert started.payload["phase"] == "PreToolUse" and started.payload["hook_index"] == 0
    assert started.payload["rule_index"] == 0 and "hook_script.py" in started.payload["command"]
    assert completed.payload["decision"] == "allow" and isinstance(completed.payload["duration_ms"], int)
    assert {e.tool_call_id for e in sink.events} == {"call_1"}


async def test_env_allowlist_and_default_cwd(
    soong_env: SoongEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Case H20."""
    monkeypatch.setenv("SECRET_API_KEY", "parent-secret-value-123")
    monkeypatch.setenv("SOONG_TEST_HOOK_TOKEN", "hook-token-value-456")
    log = tmp_path / "env.log"
    rules = {
        "Stop": [
            {
                "hooks": [
                    hook(
                        "--log",
                        str(log),
                        "--reason",
                        "saw hook-token-value-456",
                        "--stderr",
                        "x hook-token-value-456",
                    )
                ]
            },
            {"hooks": [hook("--log", str(log), env_allowlist=["SOONG_TEST_HOOK_TOKEN"])]},
        ]
    }
    dispatcher = make_dispatcher(soong_env, rules, tools={"env_allowlist": ["PATH"]})
    sink = RecordingSink(tmp_path / "art")
    await dispatcher.stop(scope=make_scope(soong_env.project, soong_env.home), sink=sink, final_text="done")
    first, second = read_log(log)
    assert first["cwd"] == str(soong_env.project)
    expected = {"PATH", "SOONG_AGENT_HOME", "SOONG_AGENT_PROJECT_DIR"}
    assert set(first["env"]) - {"PWD", "SHLVL", "_", "LC_CTYPE"} == expected
    assert first["env"]["SOONG_AGENT_HOME"] == str(soong_env.home)
    assert first["env"]["SOONG_AGENT_PROJECT_DIR"] == str(soong_env.project)
    assert "SECRET_API_KEY" not in first["env"] and "HOME" not in first["env"]
    assert second["env"]["SOONG_TEST_HOOK_TOKEN"] == "hook-token-value-456"
    assert "SECRET_API_KEY" not in second["env"]
    # values of hook-level allowlisted variables are secrets: redacted in event payloads
    dumped = json.dumps([e.payload for e in sink.events])
    assert "hook-token-value-456" not in dumped
    assert REDACTED in dumped


async def test_missing_required_env_var_fails_the_hook(soong_env: SoongEnv, tmp_path: Path) -> None:
    log = tmp_path / "miss.log"
    rules = {
        "Stop": [
            {"hooks": [hook("--log", str(log), "--decision", "deny", env_allowlist=["SOONG_TEST_MISSING"])]}
        ]
    }
    dispatcher = make_dispatcher(soong_env, rules)
    sink = RecordingSink(tmp_path / "art")
    outcome = await dispatcher.stop(
        scope=make_scope(soong_env.project, soong_env.home), sink=sink, final_text=""
    )
    assert outcome.decision == "allow" and outcome.hook_count == 1
    assert not log.exists()
    (failed,) = sink.of_type(EventType.hook_failed)
    assert failed.payload["error"]["type"] == "config_error"
    assert "SOONG_TEST_MISSING" in failed.payload["error"]["message"]
    assert "hook #1 of rule #1 of Stop" in failed.payload["error"]["message"]


async def test_nonzero_exit_fails_but_explicit_deny_is_honoured(soong_env: SoongEnv, tmp_path: Path) -> None:
    rules = {
        "PreToolUse": [
            {"hooks": [hook("--exit", "3", "--stderr", "boom")]},
            {"hooks": [hook("--exit", "2", "--decision", "deny", "--reason", "nope")]},
        ]
    }
    dispatcher = make_dispatcher(soong_env, rules)
    sink = RecordingSink(tmp_path / "art")
    scope = make_scope(soong_env.project, soong_env.home)
    outcome = await dispatcher.pre_tool_use(
        scope=scope, sink=sink, tool=WRITE, call=call(), preflight=preflight(soong_env)
    )
    assert outcome.denied and outcome.reasons == ["nope"] and outcome.hook_count == 2
    failed = sink.of_type(EventType.hook_failed)
    assert len(failed) == 2 and not sink.of_type(EventType.hook_completed)
    assert failed[0].payload["error"] == {
        "type": "exit_code",
        "message": "hook exited with status 3",
        "exit_code": 3,
    }
    assert failed[0].payload["stderr_summary"] == "boom" and failed[0].payload["decision"] == "allow"
    assert failed[1].payload["error"]["exit_code"] == 2 and failed[1].payload["decision"] == "deny"


async def test_stderr_and_empty_stdout_are_success(soong_env: SoongEnv, tmp_path: Path) -> None:
    rules = {
        "PreToolUse": [{"hooks": [hook("--stderr", "warning: noisy", "--reason", "fine"), hook("--empty")]}]
    }
    dispatcher = make_dispatcher(soong_env, rules)
    sink = RecordingSink(tmp_path / "art")
    scope = make_scope(soong_env.project, soong_env.home)
    outcome = await dispatcher.pre_tool_use(
        scope=scope, sink=sink, tool=WRITE, call=call(), preflight=preflight(soong_env)
    )
    assert outcome.decision == "allow" and outcome.hook_count == 2 and outcome.reasons == ["fine"]
    assert not sink.of_type(EventType.hook_failed)
    first, second = sink.of_type(EventType.hook_completed)
    assert first.payload["stderr_summary"] == "warning: noisy" and first.payload["reason"] == "fine"
    assert second.payload["decision"] == "allow"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--raw", "not json"), "not valid JSON"),
        (("--raw", '["deny"]'), "not an object"),
        (("--raw", '{"decision": "deny", "arguments": {"path": "x"}}'), "arguments"),
        (("--raw", '{"decision": "maybe"}'), "decision"),
        (("--decision", "deny", "--big", "200"), "stdout_limit_bytes"),
    ],
)
async def test_invalid_output_is_a_failed_hook_counting_as_allow(
    soong_env: SoongEnv, tmp_path: Path, args: tuple[str, ...], fragment: str
) -> None:
    dispatcher = make_dispatcher(
        soong_env, {"PreToolUse": [{"hooks": [hook(*args)]}]}, tools={"stdout_limit_bytes": 150}
    )
    sink = RecordingSink(tmp_path / "art")
    scope = make_scope(soong_env.project, soong_env.home)
    outcome = await dispatcher.pre_tool_use(
        scope=scope, sink=sink, tool=WRITE, call=call(), preflight=preflight(soong_env)
    )
    assert outcome.decision == "allow" and outcome.hook_count == 1
    (failed,) = sink.of_type(EventType.hook_failed)
    assert failed.payload["error"]["type"] == "invalid_output"
    assert fragment in failed.payload["error"]["message"]


async def test_timeout_kills_the_hook(soong_env: SoongEnv, tmp_path: Path) -> None:
    log = tmp_path / "slow.log"
    rules = {
        "PreToolUse": [
            # 1.5 s: the hook is a Python process that must start and log before it is killed (300 ms was
            # too short on a loaded 2-core machine); far below its 30 s sleep
            {"hooks": [hook("--log", str(log), "--sleep", "30", "--decision", "deny", timeout_ms=1500)]}
        ]
    }
    dispatcher = make_dispatcher(soong_env, rules)
    sink = RecordingSink(tmp_path / "art")
    scope = make_scope(soong_env.project, soong_env.home)
    started = time.monotonic()
    outcome = await dispatcher.pre_tool_use(
        scope=scope, sink=sink, tool=WRITE, call=call(), preflight=preflight(soong_env)
    )
    assert time.monotonic() - started < 10
    assert outcome.decision == "allow"
    (failed,) = sink.of_type(EventType.hook_failed)
    assert failed.payload["error"]["type"] == "timeout" and failed.payload["error"]["exit_code"] is None
    assert read_log(log), "the hook had started"


async def test_order_and_first_deny_stops_remaining(soong_env: SoongEnv, tmp_path: Path) -> None:
    log = tmp_path / "order.log"
    rules = {
        "PreToolUse": [
            {
                "matcher": {"tag": "write"},
                "hooks": [
                    hook("--log", str(log), "--reason", "one"),
                    hook("--log", str(log), "--reason", "two"),
                ],
            },
            {
                "matcher": {"tool_name": "code.read_file"},
                "hooks": [hook("--log", str(log), "--decision", "deny")],
            },
            {"hooks": [hook("--log", str(log), "--decision", "deny", "--reason", "three")]},
            {"hooks": [hook("--log", str(log), "--reason", "four")]},
        ]
    }
    dispatcher = make_dispatcher(soong_env, rules)
    sink = RecordingSink(tmp_path / "art")
    scope = make_scope(soong_env.project, soong_env.home)
    outcome = await dispatcher.pre_tool_use(
        scope=scope, sink=sink, tool=WRITE, call=call(), preflight=preflight(soong_env)
    )
    assert outcome.denied and outcome.reasons == ["three"] and outcome.hook_count == 3
    assert outcome.summary() == {"decision": "deny", "reasons": ["three"], "hook_count": 3}
    assert [r["argv"][-1] for r in read_log(log)] == ["one", "two", "three"]
    started = [
        (e.payload["rule_index"], e.payload["hook_index"]) for e in sink.of_type(EventType.hook_started)
    ]
    assert started == [(0, 0), (0, 1), (2, 0)]
    assert not sink.of_type(EventType.hook_denied), "the caller emits hook_denied"


async def test_observe_phases_never_block(soong_env: SoongEnv, tmp_path: Path) -> None:
    """Case H20."""
    log = tmp_path / "observe.log"
    deny = hook("--log", str(log), "--decision", "deny", "--reason", "ignored")
    rules = {
        "SessionStart": [{"hooks": [deny]}],
        "UserPromptSubmit": [{"hooks": [deny, deny]}],
        "PostToolUse": [{"hooks": [deny]}],
    }
    dispatcher = make_dispatcher(soong_env, rules)
    sink = RecordingSink(tmp_path / "art")
    scope = make_scope(soong_env.project, soong_env.home)
    start = await dispatcher.session_start(scope=scope, sink=sink, source="resume")
    prompt = await dispatcher.user_prompt_submit(scope=scope, sink=sink, prompt="hello there")
    result = ToolResult(tool_call_id="call_1", tool_name="code.write_file", content=[TextBlock(text="ok")])
    post = await dispatcher.post_tool_use(scope=scope, sink=sink, tool=WRITE, call=call(), result=result)
    for outcome, count in ((start, 1), (prompt, 2), (post, 1)):
        assert not outcome.denied and outcome.decision == "allow" and outcome.hook_count == count
        assert outcome.metadata["ignored_denies"] == ["ignored"] * count
    records = read_log(log)
    assert [r["input"]["hook_event"] for r in records] == [
        "SessionStart",
        "UserPromptSubmit",
        "UserPromptSubmit",
        "PostToolUse",
    ]
    assert records[0]["input"]["source"] == "resume"
    assert records[1]["input"]["prompt"] == "hello there"
    assert records[1]["input"]["message"] == {
        "role": "user",
        "content": [{"type": "text", "text": "hello there"}],
    }
    post_input = records[3]["input"]
    assert post_input["tool_result"] == {
        "is_error": False,
        "error": None,
        "content": [{"type": "text", "text": "ok"}],
    }
    assert isinstance(post_input["duration_ms"], int)
    completed = sink.of_type(EventType.hook_completed)
    assert all(e.payload["decision"] == "deny" and e.payload["ignored"] for e in completed)


async def test_post_tool_use_remembers_preflight_and_matches_path_prefix(
    soong_env: SoongEnv, tmp_path: Path
) -> None:
    log = tmp_path / "post.log"
    rules = {
        "PostToolUse": [{"matcher": {"path_prefix": "<project>/src"}, "hooks": [hook("--log", str(log))]}]
    }
    dispatcher = make_dispatcher(soong_env, rules)
    sink = RecordingSink(tmp_path / "art")
    scope = make_scope(soong_env.project, soong_env.home)
    error = ErrorPayload(code="internal_error", message="bad")
    result = ToolResult(
        tool_call_id="c2",
        tool_name="code.write_file",
        content=[TextBlock(text="bad")],
        is_error=True,
        error=error,
    )
    for path, cid in (("src/x.py", "c2"), ("docs/y.md", "c3")):
        await dispatcher.pre_tool_use(
            scope=scope, sink=sink, tool=WRITE, call=call(path, cid), preflight=preflight(soong_env, path)
        )
        await dispatcher.post_tool_use(
            scope=scope, sink=sink, tool=WRITE, call=call(path, cid), result=result
        )
    (record,) = read_log(log)
    data = record["input"]
    assert data["target_paths"] == [str(soong_env.project / "src" / "x.py")]
    assert data["tool_result"]["is_error"] is True and data["tool_result"]["error"]["message"] == "bad"


async def test_stop_hook_input_and_deny_outcome(soong_env: SoongEnv, tmp_path: Path) -> None:
    """Case H21."""
    log = tmp_path / "stop.log"
    marker = tmp_path / "once"
    rules = {
        "Stop": [
            {"hooks": [hook("--log", str(log), "--deny-once", str(marker), "--reason", "tests missing")]}
        ]
    }
    dispatcher = make_dispatcher(soong_env, rules)
    sink = RecordingSink(tmp_path / "art")
    scope = make_scope(soong_env.project, soong_env.home, role=AgentRole.orchestrator)
    first = await dispatcher.stop(scope=scope, sink=sink, final_text="y" * 5000, turn_count=3)
    second = await dispatcher.stop(
        scope=scope, sink=sink, final_text="done", turn_count=4, stop_hook_active=True
    )
    assert first.denied and first.reasons == ["tests missing"]
    assert not second.denied
    one, two = read_log(log)
    assert one["input"]["end_reason"] == "completed" and len(one["input"]["last_assistant_text"]) == 4096
    assert one["input"]["turn_count"] == 3 and one["input"]["stop_hook_active"] is False
    assert one["input"]["mode"] == "orchestrator" and one["input"]["agent_role"] == "orchestrator"
    assert two["input"]["stop_hook_active"] is True and two["input"]["turn_count"] == 4


async def test_no_hooks_for_compact_fork_and_internal_jobs(soong_env: SoongEnv, tmp_path: Path) -> None:
    log = tmp_path / "compact.log"
    dispatcher = make_dispatcher(
        soong_env, {"Stop": [{"hooks": [hook("--log", str(log), "--decision", "deny")]}]}
    )
    sink = RecordingSink(tmp_path / "art")
    compact = make_scope(soong_env.project, soong_env.home, role=AgentRole.compact)
    memory = make_scope(soong_env.project, soong_env.home, purpose="memory_extraction")
    for scope in (compact, memory):
        outcome = await dispatcher.stop(scope=scope, sink=sink, final_text="")
        assert outcome.hook_count == 0 and outcome.summary() is None
    assert not log.exists() and not sink.events


async def test_hooks_of_one_run_never_overlap(soong_env: SoongEnv, tmp_path: Path) -> None:
    log = tmp_path / "serial.log"
    dispatcher = make_dispatcher(
        soong_env, {"PreToolUse": [{"hooks": [hook("--log", str(log), "--sleep", "0.3")]}]}
    )
    sink = RecordingSink(tmp_path / "art")
    scope = make_scope(soong_env.project, soong_env.home)
    await asyncio.gather(
        *(
            dispatcher.pre_tool_use(
                scope=scope,
                sink=sink,
                tool=WRITE,
                call=call(f"{i}.txt", f"c{i}"),
                preflight=preflight(soong_env),
            )
            for i in range(2)
        )
    )
    first, second = sorted(r["t"] for r in read_log(log))
    assert second - first >= 0.3


async def test_cancellation_abandons_a_running_hook(soong_env: SoongEnv, tmp_path: Path) -> None:
    dispatcher = make_dispatcher(
        soong_env, {"Stop": [{"hooks": [hook("--sleep", "30", "--decision", "deny")]}]}
    )
    sink = RecordingSink(tmp_path / "art")
    scope = make_scope(soong_env.project, soong_env.home)
    task = asyncio.create_task(dispatcher.stop(scope=scope, sink=sink, final_text=""))
    await asyncio.sleep(0.3)
    scope.cancel_event.set()
    outcome = await asyncio.wait_for(task, 5)
    assert outcome.decision == "allow"
    (failed,) = sink.of_type(EventType.hook_failed)
    assert failed.payload["error"]["type"] == "cancelled"

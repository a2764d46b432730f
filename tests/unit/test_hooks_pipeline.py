"""User hooks inside the real tool pipeline (ToolExecutor + built-in code tools + HooksDispatcher).

Covers H8, H9, H16 (hook variant), H19, H20 and docs/hooks-and-mcp.md. Hooks are real processes
(``tests/fixtures/hook_script.py``).
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

from agent_core._hooks import NO_HOOKS, HookDispatcher, HooksDispatcher, load_hooks
from agent_core._hooks.config import HOOKS_FILENAME
from agent_core.config.loader import LoadedConfig, load_config
from agent_core.tools._builtin import CODE_TOOL_NAMES, CodeToolsAdapter
from agent_core.tools._pipeline import ToolExecutor
from agent_core.tools.context import RunScope, ToolContext
from agent_core.tools.registry import ToolRegistry
from agent_core.types.content import ArtifactRefBlock, JsonBlock, TextBlock
from agent_core.types.enums import EventType
from agent_core.types.tools import ToolDefinition
from tests.fixtures.env import SoongEnv
from tests.fixtures.tool_pipeline import PermissionRecorder, make_executor, tool_call
from tests.fixtures.tool_sink import RecordingSink, make_scope

HOOK_SCRIPT = Path(__file__).resolve().parents[1] / "fixtures" / "hook_script.py"


def hook(*args: str, **extra: Any) -> dict[str, Any]:
    command = " ".join(shlex.quote(a) for a in (sys.executable, str(HOOK_SCRIPT), *args))
    return {"type": "command", "command": command, **extra}


def read_log(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class Harness:
    def __init__(self, env: SoongEnv, tmp_path: Path, rules: dict[str, Any] | None, **config: Any) -> None:
        if rules is not None:
            env.write_home(HOOKS_FILENAME, json.dumps({"version": 1, "hooks": rules}))
        env.write_config(**config)
        self.env = env
        self.config: LoadedConfig = load_config(home_dir=env.home, project_dir=env.project)
        self.sink = RecordingSink(tmp_path / "artifacts")
        self.hooks: HookDispatcher = load_hooks(
            self.config, artifact_path=lambda _session, artifact_id: self.sink.artifacts.get(artifact_id)
        )
        self.registry = ToolRegistry()
        self.registry.register_adapter(CodeToolsAdapter(self.config.settings), internal=True)

    def executor(self, callback: Any = None) -> ToolExecutor:
        executor, _ = make_executor(self.registry, self.config.settings, callback=callback, hooks=self.hooks)
        return executor

    def scope(self) -> RunScope:
        return make_scope(self.env.project, self.env.home, effective_tools=frozenset(self.registry.names()))


async def test_hook_deny_wins_over_an_allowing_callback(soong_env: SoongEnv, tmp_path: Path) -> None:
    """Case H8."""
    log = tmp_path / "deny.log"
    rules = {
        "PreToolUse": [
            {
                "matcher": {"tool_name": "code.write_file"},
                "hooks": [hook("--log", str(log), "--decision", "deny", "--reason", "no")],
            }
        ]
    }
    h = Harness(soong_env, tmp_path, rules)
    recorder = PermissionRecorder.always("allow_once")
    outcome = await h.executor(recorder).execute_turn(
        [tool_call("code.write_file", "call_w", path="a.txt", content="x")], h.scope(), h.sink
    )
    (result,) = outcome.results
    assert result.is_error and result.error is not None
    assert result.error.code == "permission_denied" and result.error.type == "hook_denied"
    assert "no" in result.error.message
    assert recorder.requests == [], "the permission callback must not be invoked after a hook deny"
    assert not (soong_env.project / "a.txt").exists()
    summary = {"decision": "deny", "reasons": ["no"], "hook_count": 1}
    (hook_denied,) = h.sink.of_type(EventType.hook_denied)
    (tool_denied,) = h.sink.of_type(EventType.tool_denied)
    assert hook_denied.payload["hook_summary"] == summary and hook_denied.payload["phase"] == "PreToolUse"
    assert tool_denied.payload["hook_summary"] == summary and tool_denied.payload["denied_by"] == "hook"
    assert hook_denied.tool_call_id == tool_denied.tool_call_id == "call_w"
    assert not h.sink.of_type(EventType.aborted_tools) and not outcome.aborted
    (record,) = read_log(log)
    assert record["input"]["tool_name"] == "code.write_file"
    assert record["input"]["arguments"] == {"path": "a.txt", "content": "x"}
    assert record["input"]["target_paths"] == [str(soong_env.project / "a.txt")]


async def test_hook_deny_of_write_skips_rest_readonly_deny_does_not(
    soong_env: SoongEnv, tmp_path: Path
) -> None:
    """Case H16."""
    soong_env.write_project("b.txt", "bee")
    rules = {
        "PreToolUse": [
            {
                "matcher": {"path_prefix": "<project>/locked"},
                "hooks": [hook("--decision", "deny", "--reason", "locked")],
            },
        ]
    }
    h = Harness(soong_env, tmp_path, rules)
    recorder = PermissionRecorder.always("allow_once")
    calls = [
        tool_call("code.write_file", "c1", path="locked/a.txt", content="1"),
        tool_call("code.write_file", "c2", path="b2.txt", content="2"),
        tool_call("code.run_command", "c3", argv=[sys.executable, "-c", "open('ran','w').write('1')"]),
    ]
    outcome = await h.executor(recorder).execute_turn(calls, h.scope(), h.sink)
    first, second, third = outcome.results
    assert first.error is not None and first.error.type == "hook_denied"
    for skipped in (second, third):
        assert skipped.error is not None and skipped.error.code == "cancelled" and skipped.metadata["skipped"]
    assert recorder.requests == []
    assert not (soong_env.project / "b2.txt").exists() and not (soong_env.project / "ran").exists()

    sink2 = RecordingSink(tmp_path / "art2")
    reads = [
        tool_call("code.read_file", "r1", path="locked/x.txt"),
        tool_call("code.read_file", "r2", path="b.txt"),
    ]
    outcome = await h.executor(recorder).execute_turn(reads, h.scope(), sink2)
    denied, ok = outcome.results
    assert denied.error is not None and denied.error.type == "hook_denied"
    assert not ok.is_error and isinstance(ok.content[0], JsonBlock) and ok.content[0].data["content"] == "bee"


async def test_tag_and_path_prefix_matchers_in_the_pipeline(soong_env: SoongEnv, tmp_path: Path) -> None:
    """Case H19."""
    soong_env.write_project("src/e.py", "old\n")
    soong_env.write_project("docs/r.md", "read me\n")
    tag_log, path_log, name_log = tmp_path / "tag.log", tmp_path / "path.log", tmp_path / "name.log"
    rules = {
        "PreToolUse": [
            {"matcher": {"tag": "write"}, "hooks": [hook("--log", str(tag_log))]},
            {
                "matcher": {"tag": "write", "path_prefix": "<project>/src/"},
                "hooks": [hook("--log", str(path_log))],
            },
            {
                "matcher": {"tool_name": "code.*"},
                "hooks": [hook("--log", str(name_log), "--decision", "deny")],
            },
        ]
    }
    h = Harness(soong_env, tmp_path, rules)
    calls = [
        tool_call("code.read_file", "k1", path="docs/r.md"),
        tool_call("code.write_file", "k2", path="src/new.py", content="x"),
        tool_call("code.edit_file", "k3", path="src/e.py", edits=[{"old": "old", "new": "new"}]),
        tool_call("code.write_file", "k4", path="docs/w.md", content="y"),
    ]
    outcome = await h.executor(PermissionRecorder.always("allow_once")).execute_turn(calls, h.scope(), h.sink)
    assert not any(r.is_error for r in outcome.results), [r.error for r in outcome.results]
    assert [r["input"]["tool_call_id"] for r in read_log(tag_log)] == ["k2", "k3", "k4"]
    assert [r["input"]["tool_call_id"] for r in read_log(path_log)] == ["k2", "k3"]
    assert not name_log.exists(), "a glob-looking tool_name matches nothing"


async def test_failing_and_timed_out_hooks_do_not_block(soong_env: SoongEnv, tmp_path: Path) -> None:
    """Case H20."""
    rules = {
        "PreToolUse": [
            {
                "hooks": [
                    hook("--exit", "1", "--stderr", "crash"),
                    hook("--sleep", "20", "--decision", "deny", timeout_ms=300),
                ]
            },
        ]
    }
    h = Harness(soong_env, tmp_path, rules)
    outcome = await h.executor(PermissionRecorder.always("allow_once")).execute_turn(
        [tool_call("code.write_file", "f1", path="ok.txt", content="fine")], h.scope(), h.sink
    )
    assert not outcome.results[0].is_error
    assert (soong_env.project / "ok.txt").read_text() == "fine"
    errors = [e.payload["error"]["type"] for e in h.sink.of_type(EventType.hook_failed)]
    assert errors == ["exit_code", "timeout"]


async def test_hooks_never_trigger_the_permission_callback(soong_env: SoongEnv, tmp_path: Path) -> None:
    soong_env.write_project("r.txt", "x")
    log = tmp_path / "ro.log"
    rules = {
        "PreToolUse": [{"hooks": [hook("--log", str(log))]}],
        "PostToolUse": [{"hooks": [hook("--log", str(log))]}],
    }
    h = Harness(soong_env, tmp_path, rules)
    outcome = await h.executor(PermissionRecorder.never()).execute_turn(
        [tool_call("code.read_file", "ro", path="r.txt")], h.scope(), h.sink
    )
    assert not outcome.results[0].is_error
    assert [r["input"]["hook_event"] for r in read_log(log)] == ["PreToolUse", "PostToolUse"]


async def test_post_tool_use_deny_changes_nothing(soong_env: SoongEnv, tmp_path: Path) -> None:
    log = tmp_path / "post.log"
    rules = {
        "PostToolUse": [
            {
                "matcher": {"tool_name": "code.write_file"},
                "hooks": [hook("--log", str(log), "--decision", "deny", "--reason", "too late")],
            }
        ]
    }
    h = Harness(soong_env, tmp_path, rules)
    outcome = await h.executor(PermissionRecorder.always("allow_once")).execute_turn(
        [tool_call("code.write_file", "p1", path="p.txt", content="hello")], h.scope(), h.sink
    )
    (result,) = outcome.results
    assert not result.is_error and (soong_env.project / "p.txt").read_text() == "hello"
    assert not h.sink.of_type(EventType.hook_denied) and not h.sink.of_type(EventType.tool_denied)
    committed_types = [event_type for _, event_type, _ in h.sink.committed]
    assert committed_types == [EventType.tool_completed]
    (record,) = read_log(log)
    tool_result = record["input"]["tool_result"]
    assert tool_result["is_error"] is False and tool_result["content"][0]["data"]["bytes_written"] == 5
    assert record["input"]["target_scope"] == str(soong_env.project / "p.txt")
    # PostToolUse runs after the result was committed
    types = [e.event_type for e in h.sink.events]
    assert types.index(EventType.tool_completed) < types.index(
        EventType.hook_started, types.index(EventType.tool_started)
    )


async def test_post_tool_use_gets_summary_and_artifact_ref_for_large_results(
    soong_env: SoongEnv, tmp_path: Path
) -> None:
    log = tmp_path / "big.log"
    rules = {"PostToolUse": [{"matcher": {"tool_name": "demo.big"}, "hooks": [hook("--log", str(log))]}]}
    h = Harness(soong_env, tmp_path, rules, tools={"result_limit_bytes": 2000})
    big_text = "0123456789" * 2000

    async def big(args: dict[str, Any], ctx: ToolContext) -> Any:
        return {"text": big_text}

    h.registry.register_tool(
        ToolDefinition(
            name="demo.big", description="big", input_schema={"type": "object"}, permission="readonly"
        ),
        big,
    )
    outcome = await h.executor().execute_turn([tool_call("demo.big", "b1")], h.scope(), h.sink)
    (result,) = outcome.results
    assert not result.is_error
    assert any(
        isinstance(b, JsonBlock | ArtifactRefBlock) and (getattr(b, "artifact_id", None))
        for b in result.content
    )
    (record,) = read_log(log)
    content = record["input"]["tool_result"]["content"]
    assert big_text not in json.dumps(record["input"])
    refs = [item["artifact_ref"] for item in content if "artifact_ref" in item]
    assert refs, content
    path = Path(refs[0]["path"])
    assert path.is_absolute() and path.exists() and big_text in path.read_text()
    assert refs[0]["artifact_id"] in h.sink.artifacts


async def test_project_hooks_have_no_effect(soong_env: SoongEnv, tmp_path: Path) -> None:
    """Case H9."""
    log = tmp_path / "project-hook.log"
    project_rules = {
        "version": 1,
        "hooks": {"PreToolUse": [{"hooks": [hook("--log", str(log), "--decision", "deny")]}]},
    }
    soong_env.write_project(".soong-agent/hooks.json", json.dumps(project_rules))
    h = Harness(soong_env, tmp_path, None)
    assert h.hooks is NO_HOOKS
    outcome = await h.executor(PermissionRecorder.always("allow_once")).execute_turn(
        [tool_call("code.write_file", "n1", path="n.txt", content="ok")], h.scope(), h.sink
    )
    assert not outcome.results[0].is_error and (soong_env.project / "n.txt").exists()
    assert not log.exists()


async def test_disabled_hooks_run_nothing(soong_env: SoongEnv, tmp_path: Path) -> None:
    """Case H20."""
    log = tmp_path / "off.log"
    rules = {"PreToolUse": [{"hooks": [hook("--log", str(log), "--decision", "deny")]}]}
    h = Harness(soong_env, tmp_path, rules, hooks={"enabled": False})
    assert h.hooks is NO_HOOKS
    outcome = await h.executor(PermissionRecorder.always("allow_once")).execute_turn(
        [tool_call("code.write_file", "d1", path="d.txt", content="ok")], h.scope(), h.sink
    )
    assert not outcome.results[0].is_error and not log.exists()
    enabled = Harness(soong_env, tmp_path, rules)
    assert isinstance(enabled.hooks, HooksDispatcher)
    denied = await enabled.executor(PermissionRecorder.always("allow_once")).execute_turn(
        [tool_call("code.write_file", "d2", path="d2.txt", content="ok")], enabled.scope(), enabled.sink
    )
    assert denied.results[0].is_error and len(read_log(log)) == 1


async def test_hook_text_blocks_reach_post_hooks_unchanged(soong_env: SoongEnv, tmp_path: Path) -> None:
    log = tmp_path / "text.log"
    h = Harness(soong_env, tmp_path, {"PostToolUse": [{"hooks": [hook("--log", str(log))]}]})

    async def hello(args: dict[str, Any], ctx: ToolContext) -> str:
        return "hello world"

    h.registry.register_tool(
        ToolDefinition(
            name="demo.hello", description="h", input_schema={"type": "object"}, permission="readonly"
        ),
        hello,
    )
    outcome = await h.executor().execute_turn([tool_call("demo.hello", "t1")], h.scope(), h.sink)
    assert outcome.results[0].content == [TextBlock(text="hello world")]
    (record,) = read_log(log)
    assert record["input"]["tool_result"]["content"] == [{"type": "text", "text": "hello world"}]
    assert record["input"]["target_paths"] == [] and record["input"]["target_scope"] is None
    assert CODE_TOOL_NAMES[0] in h.registry.names()

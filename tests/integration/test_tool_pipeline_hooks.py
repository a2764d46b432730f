"""The pipeline with the real hooks dispatcher and real hook processes (docs/hooks-and-mcp.md#running-a-hook,
docs/hooks-and-mcp.md#where-and-when, docs/hooks-and-mcp.md#denials, H8)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from agent_core._hooks.config import load_hooks_config
from agent_core._hooks.dispatcher import HooksDispatcher
from agent_core.tools._builtin import CODE_TOOL_NAMES, CodeToolsAdapter
from agent_core.tools.registry import ToolRegistry
from agent_core.types.enums import EventType
from tests.fixtures.tool_pipeline import PermissionRecorder, make_executor, make_settings, tool_call
from tests.fixtures.tool_sink import RecordingSink, make_scope


def write_hooks(home: Path, log: Path) -> None:
    deny = home / "deny.py"
    deny.write_text('print(\'{"decision": "deny", "reason": "no writes here"}\')\n')
    record = home / "record.py"
    record.write_text(f"import sys\nopen({str(log)!r}, 'a').write(sys.stdin.read() + chr(10))\n")
    config = {
        "PreToolUse": [
            {
                "matcher": {"tool_name": "code.write_file"},
                "hooks": [{"type": "command", "command": f"{sys.executable} {deny}"}],
            }
        ],
        "PostToolUse": [{"hooks": [{"type": "command", "command": f"{sys.executable} {record}"}]}],
    }
    (home / "hooks.json").write_text(json.dumps({"version": 1, "hooks": config}))


async def test_real_pre_hook_deny_and_post_hook_input(tmp_path: Path) -> None:
    """Case H8."""
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    (project / "a.txt").write_text("alpha\n")
    log = tmp_path / "post.log"
    write_hooks(home, log)
    settings = make_settings()
    hooks_config = load_hooks_config(settings=settings, home=home, project=project)
    assert hooks_config is not None
    dispatcher = HooksDispatcher(hooks_config, settings, home, project)
    reg = ToolRegistry()
    reg.register_adapter(CodeToolsAdapter(settings), internal=True)
    executor, _ = make_executor(
        reg, settings, callback=PermissionRecorder.always("allow_once"), hooks=dispatcher
    )
    sink = RecordingSink(tmp_path / "artifacts")
    scope = make_scope(project, home, effective_tools=frozenset(CODE_TOOL_NAMES))

    read_turn = await executor.execute_turn([tool_call("code.read_file", "r1", path="a.txt")], scope, sink)
    assert not read_turn.results[0].is_error
    [post_input] = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    assert post_input["hook_event"] == "PostToolUse" and post_input["tool_call_id"] == "r1"
    assert post_input["tool_result"]["is_error"] is False and isinstance(post_input["duration_ms"], int)

    never = PermissionRecorder.never()
    executor, _ = make_executor(reg, settings, callback=never, hooks=dispatcher)
    calls = [
        tool_call("code.write_file", "w1", path="b.txt", content="x"),
        tool_call("code.read_file", "r2", path="a.txt"),
    ]
    outcome = await executor.execute_turn(calls, scope, sink)
    denied, skipped = outcome.results
    assert denied.error is not None and denied.error.type == "hook_denied"
    assert denied.error.code.value == "permission_denied" and "no writes here" in denied.error.message
    assert skipped.metadata == {"skipped": True, "skip_reason": "previous_write_failed"}
    assert not (project / "b.txt").exists()
    by_call: dict[str, list[Any]] = {}
    for event in sink.events:
        by_call.setdefault(event.tool_call_id or "", []).append(event.event_type)
    assert EventType.hook_started in by_call["w1"] and EventType.hook_completed in by_call["w1"]
    assert by_call["w1"][-2:] == [EventType.hook_denied, EventType.tool_denied]
    summary = sink.of_type(EventType.tool_denied)[0].payload["hook_summary"]
    assert summary == {"decision": "deny", "reasons": ["no writes here"], "hook_count": 1}
    assert len(log.read_text().splitlines()) == 1  # no PostToolUse for denied or skipped calls
    await dispatcher.close()

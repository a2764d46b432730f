"""Permission modes (issue 37 item 2) through the public API: each mode on a file write, a command and a
sensitive path — who was asked, what ran, the mode in every audit entry (``replay_session``) and in the
prompt; ``plan`` offers read-only tools only; ``bypass`` is refused without the sandbox; a mode is chosen
per run and switches between runs of one session."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_core import AgentCoreError, PermissionDecision, PermissionRequest
from agent_core.testing import CallTool, FunctionModel, ModelReply, ModelRequest, open_runtime

WRITE = CallTool("code.write_file", {"path": "a.txt", "content": "hello\n"}, "call_write")
COMMAND = CallTool("code.run_command", {"argv": ["touch", "made.txt"]}, "call_cmd")
READ_SECRET = CallTool("code.read_file", {"path": ".env"}, "call_env")
WRITE_SECRET = CallTool(
    "code.write_file", {"path": ".env", "content": "X=2\n", "overwrite": True}, "call_env_w"
)


def one_call(call: CallTool) -> Callable[[ModelRequest], ModelReply]:
    """A model that makes ``call`` once, then answers."""

    def reply(request: ModelRequest) -> ModelReply:
        if any(m.role == "tool" for m in request.messages):
            return ModelReply(text="done")
        return ModelReply(tool_calls=[call])

    return reply


class Asked:
    """A permission callback that allows once and remembers what it was asked."""

    def __init__(self) -> None:
        self.requests: list[PermissionRequest] = []

    async def __call__(self, request: PermissionRequest) -> PermissionDecision:
        self.requests.append(request)
        return PermissionDecision(decision="allow_once")


async def run_call(
    project: Path, call: CallTool, mode: str, *, config: dict[str, Any] | None = None
) -> tuple[Asked, list[Any], FunctionModel]:
    """Runs ``call`` in ``mode``; returns the callback, the session's gate events and the model."""
    (project / ".env").write_text("X=1\n", encoding="utf-8")
    model = FunctionModel(one_call(call))
    asked = Asked()
    async with open_runtime(model, project_dir=project, config=config, permission_callback=asked) as runtime:
        run = await runtime.start("go", permission_mode=mode)  # type: ignore[arg-type]
        assert run.permission_mode == mode
        await run.wait()
        assert run.status.value == "completed", run.error
        replay = await runtime.replay_session(run.session_id)
    gate_events = [
        e for e in replay.events if e.event_type.value in ("tool_started", "tool_denied", "tool_failed")
    ]
    return asked, gate_events, model


def audited_modes(events: list[Any]) -> set[str]:
    return {
        e.payload["permission_audit"]["permission_mode"] for e in events if "permission_audit" in e.payload
    }


SANDBOX = {"tools": {"sandbox": "bwrap"}}

# mode -> (call, asked?, outcome event, file that exists afterwards or None)
CASES: list[tuple[str, CallTool, bool, str, str | None]] = [
    ("default", WRITE, True, "tool_started", "a.txt"),
    ("default", COMMAND, True, "tool_started", "made.txt"),
    ("default", READ_SECRET, True, "tool_started", None),
    ("accept_edits", WRITE, False, "tool_started", "a.txt"),
    ("accept_edits", COMMAND, True, "tool_started", "made.txt"),
    ("accept_edits", WRITE_SECRET, True, "tool_started", None),
    ("plan", WRITE, False, "tool_failed", None),
    ("plan", COMMAND, False, "tool_failed", None),
    ("plan", READ_SECRET, True, "tool_started", None),
    ("dont_ask", WRITE, False, "tool_denied", None),
    ("dont_ask", COMMAND, False, "tool_denied", None),
    ("dont_ask", READ_SECRET, False, "tool_denied", None),
    ("bypass", WRITE, False, "tool_started", "a.txt"),
    ("bypass", COMMAND, False, "tool_started", "made.txt"),
    ("bypass", WRITE_SECRET, True, "tool_started", None),
]


@pytest.mark.parametrize(("mode", "call", "asks", "event", "created"), CASES)
async def test_each_mode_on_a_write_a_command_and_a_sensitive_path(
    tmp_path: Path, mode: str, call: CallTool, asks: bool, event: str, created: str | None
) -> None:
    if mode == "bypass" and shutil.which("bwrap") is None:
        pytest.fail("bubblewrap (bwrap) is required for the bypass mode tests")
    project = tmp_path / "project"
    project.mkdir()
    asked, events, model = await run_call(project, call, mode, config=SANDBOX if mode == "bypass" else None)
    assert [r.tool_name for r in asked.requests] == ([call.name] if asks else [])
    for request in asked.requests:
        assert request.metadata["permission_mode"] == mode
    assert [e.event_type.value for e in events] == [event]
    if event != "tool_failed":  # a call never offered fails before the gate: no audit entry
        assert audited_modes(events) == {mode}
    if created is not None:
        assert (project / created).exists()
    else:
        assert not (project / "a.txt").exists() and not (project / "made.txt").exists()
    if mode == "dont_ask":
        assert events[0].payload["permission_audit"]["decided_by"] == "mode"
        assert "dont_ask" in events[0].payload["reason"]
    system = "\n".join(b.content for b in model.requests[0].system)
    assert f'<permission_mode mode="{mode}"' in system
    offered = {t.name for t in model.requests[0].tools}
    if mode == "plan":
        assert offered and not offered & {"code.write_file", "code.edit_file", "code.run_command"}
        assert {"code.read_file", "agent.plan_template"} <= offered
        assert "plan mode" in str(events[0].payload.get("error")) if event == "tool_failed" else True
    else:
        assert {"code.write_file", "code.run_command"} <= offered


async def test_bypass_is_refused_without_the_sandbox(tmp_path: Path) -> None:
    model = FunctionModel(lambda request: "hi")
    async with open_runtime(model, project_dir=tmp_path) as runtime:
        with pytest.raises(AgentCoreError) as refused:
            await runtime.start("go", permission_mode="bypass")
        assert refused.value.code == "validation_error"
        assert 'sandbox = "bwrap"' in refused.value.message
        with pytest.raises(AgentCoreError) as unknown:
            await runtime.start("go", permission_mode="yolo")  # type: ignore[arg-type]
        assert unknown.value.code == "validation_error"
    with pytest.raises(AgentCoreError) as config:
        async with open_runtime(model, project_dir=tmp_path, config={"permissions": {"mode": "bypass"}}):
            pass
    assert config.value.code == "config_error"
    assert "permissions.mode" in config.value.message


async def test_configured_mode_and_a_switch_between_runs_of_one_session(tmp_path: Path) -> None:
    calls = iter([WRITE, CallTool("code.write_file", {"path": "b.txt", "content": "b"}, "call_b")])

    def reply(request: ModelRequest) -> ModelReply:
        last = request.messages[-1]
        if last.role == "tool":
            return ModelReply(text="done")
        return ModelReply(tool_calls=[next(calls)])

    model = FunctionModel(reply)
    asked = Asked()
    config = {"permissions": {"mode": "accept_edits"}}
    async with open_runtime(model, project_dir=tmp_path, config=config, permission_callback=asked) as runtime:
        first = await runtime.start("first")  # the configured mode
        await first.wait()
        assert first.permission_mode == "accept_edits" and asked.requests == []
        second = await runtime.start("second", session_id=first.session_id, permission_mode="default")
        await second.wait()
        assert second.permission_mode == "default"
        assert [r.tool_name for r in asked.requests] == ["code.write_file"]
        replay = await runtime.replay_session(first.session_id)
    modes = [
        e.payload["permission_audit"]["permission_mode"]
        for e in replay.events
        if e.event_type.value == "tool_started"
    ]
    assert modes == ["accept_edits", "default"]
    by_run = {r.run_id: r.permission_mode for r in replay.runs}
    assert by_run == {first.run_id: "accept_edits", second.run_id: "default"}
    # the second run's prompt names its own mode: the system prompt keeps the first run's (the prompt prefix
    # stays cacheable) and the switch follows the conversation as a system update of the block
    last = model.requests[-1]
    assert '<permission_mode mode="accept_edits">' in "\n".join(b.content for b in last.system)
    updates = [
        text
        for m in last.messages
        for text in [json.dumps(m.model_dump(mode="json"))]
        if 'system_update block=\\"permission_mode\\"' in text
    ]
    assert len(updates) == 1 and 'permission_mode mode=\\"default\\"' in updates[0]
    assert (tmp_path / "a.txt").exists() and (tmp_path / "b.txt").exists()

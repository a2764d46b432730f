"""The CLI permission prompt (issue 14 items 6, 7): model-/file-derived text cannot draw fake lines, and a
long argv cannot hide its payload behind a silent cut."""

from __future__ import annotations

from pathlib import Path

from agent_core.cli._prompt import describe_request
from agent_core.cli._terminal import escape_terminal
from agent_core.config.schema import Settings
from agent_core.permissions._gate import PermissionGate
from agent_core.tools.preflight import Preflight
from agent_core.types.enums import AgentRole, PermissionDecisionKind
from agent_core.types.permissions import PermissionRequest
from agent_core.types.tools import ToolDefinition

SPOOF = "/p/evil\r  target:     /p/ok.txt\x1b[2K\x1b[1A\n  cwd:        /p\u202e"


def request(**overrides: object) -> PermissionRequest:
    fields: dict[str, object] = {
        "request_id": "perm_1",
        "session_id": "sess_1",
        "agent_id": "agent_1",
        "run_id": "run_1",
        "agent_role": "main",
        "tool_name": "code.write_file",
        "permission": "write",
        "tags": ["code", "filesystem", "write"],
        "args_summary": '{"path":"x"}',
        "target_scope": "/p/x",
        "cwd": "/p",
        "env_summary": {},
        "dangerous": False,
        "suggested_decision": PermissionDecisionKind.allow_once,
    }
    fields.update(overrides)
    return PermissionRequest.model_validate(fields)


def control_chars(text: str) -> set[str]:
    return {c for c in text if not c.isprintable() and c != "\n"}


def test_escape_terminal_shows_non_printables_as_escapes() -> None:
    assert escape_terminal("a\rb\x1b[2Jc\nd\u202e\x00\x9b") == "a\\rb\\x1b[2Jc\\nd\\u202e\\x00\\x9b"
    assert escape_terminal("plain é ü 日本") == "plain é ü 日本"
    assert escape_terminal("x\ny", keep_newlines=True) == "x\ny"


def test_prompt_escapes_target_cwd_and_every_derived_field() -> None:
    text = describe_request(
        request(
            target_scope=SPOOF,
            cwd=SPOOF,
            args_summary=SPOOF,
            tool_name="code.write_file\x1b[8m",
            network_host="h\rost",
            hook_summary={"reason": "ok\r\x1b[31m"},
            agent_id="agent\r1",
        )
    )
    assert control_chars(text) == set(), control_chars(text)
    lines = text.split("\n")
    assert sum(1 for line in lines if line.startswith("  target:")) == 1
    assert sum(1 for line in lines if line.startswith("  cwd:")) == 1
    assert "\\r" in text and "\\x1b" in text and "\\u202e" in text


async def test_long_argv_is_shown_in_full_or_clearly_cut(tmp_path: Path) -> None:
    settings = Settings.model_validate({"model": {"provider": "ollama", "name": "m"}})
    gate = PermissionGate(None, settings)
    tool = ToolDefinition(
        name="code.run_command",
        description="run",
        input_schema={"type": "object"},
        permission="write",
        tags=["code", "dangerous"],
    )
    payload = "PAYLOAD-rm-rf-home"
    argv = ["python3", "-c", "print('hello')" + " " * 700 + f"; {payload}"]

    class Scope:
        session_id, agent_id, run_id = "s", "a", "r"
        agent_role = AgentRole.main
        parent_agent_id = parent_run_id = None
        project_dir = tmp_path

    req = gate.build_request(
        tool=tool,
        arguments={"argv": argv},
        requester=Scope(),
        facts=Preflight(target_scope="/usr/bin/python3 @ p"),
        hook_summary=None,
        reasons=("dangerous",),
        target_scope="/usr/bin/python3 @ p",
        suggested=PermissionDecisionKind.allow_once,
        allow_for_session_available=True,
    )
    text = describe_request(req)
    assert payload in text, "the argv payload after character 500 must be visible"
    assert max(len(line) for line in text.split("\n")) <= 120, "long arguments are wrapped"


def test_run_printer_escapes_notices_and_model_text() -> None:
    import io

    from agent_core.cli._run import _Printer
    from agent_core.cli._terminal import Output
    from agent_core.types.enums import EventType
    from agent_core.types.runtime import RuntimeEvent

    out, err = io.StringIO(), io.StringIO()
    printer = _Printer(Output(out), Output(err))

    def event(kind: EventType, payload: dict[str, object]) -> RuntimeEvent:
        return RuntimeEvent.model_validate(
            {
                "event_id": "evt_1",
                "session_id": "s",
                "run_id": "r",
                "agent_id": "a",
                "seq": 1,
                "event_type": kind,
                "payload": payload,
                "created_at": "2026-01-01T00:00:00Z",
            }
        )

    printer.handle(event(EventType.message_delta, {"text": "hi\x1b]0;pwned\x07\n\tok"}))
    printer.handle(event(EventType.tool_started, {"tool_name": "code.read_file", "args_summary": "a\rFAKE"}))
    printer.finish()
    assert control_chars(out.getvalue()) <= {"\t"} and "\\x1b" in out.getvalue()
    assert control_chars(err.getvalue()) == set() and "\\r" in err.getvalue()


def test_prompt_shows_what_allow_for_session_remembers() -> None:
    text = describe_request(
        request(
            tool_name="code.run_command",
            metadata={"argv": ["python3", "x.py"], "session_argv_prefix": ["python3", "x\x1b.py"]},
        )
    )
    assert 'remembers commands starting with "python3" "x\\u001b.py"' in text
    assert 'argv:       "python3" "x.py"' in text

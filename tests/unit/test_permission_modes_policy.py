"""The pure permission-mode policy (``agent_core.permissions._modes``): what each mode changes in a
decision the policy and the rules made, and what it never changes."""

from __future__ import annotations

import pytest

from agent_core.errors import ErrorCode
from agent_core.permissions._modes import apply_mode, check_mode, mode_prompt_text, plan_tools, refuse_ask
from agent_core.permissions._policy import PolicyDecision
from agent_core.types.tools import ToolDefinition


def tool(name: str, permission: str = "write", tags: tuple[str, ...] = ()) -> ToolDefinition:
    return ToolDefinition(
        name=name, description="d", input_schema={"type": "object"}, permission=permission, tags=list(tags)
    )


WRITE = tool("code.write_file")
COMMAND = tool("code.run_command", tags=("code", "dangerous"))
READ = tool("code.read_file", "readonly")
INTERNAL = tool("internal.job_cancel", "write", ("internal",))


def ask(*reasons: str) -> PolicyDecision:
    return PolicyDecision(action="ask", reasons=reasons, target_scope="/p/a.txt")


@pytest.mark.parametrize(
    ("mode", "call", "decision", "action", "changed"),
    [
        ("default", WRITE, ask("write"), "ask", False),
        ("accept_edits", WRITE, ask("write"), "allow", True),
        ("accept_edits", WRITE, ask("write", "rule_confirm"), "ask", False),
        ("accept_edits", WRITE, ask("write", "outside_write_roots"), "ask", False),
        ("accept_edits", WRITE, ask("write", "sensitive_path"), "ask", False),
        ("accept_edits", COMMAND, ask("write", "dangerous"), "ask", False),
        ("bypass", COMMAND, ask("write", "dangerous"), "allow", True),
        ("bypass", COMMAND, ask("write", "dangerous", "network"), "allow", True),
        ("bypass", WRITE, ask("write", "protected_path"), "ask", False),
        ("bypass", READ, ask("credential_path"), "ask", False),
        ("bypass", WRITE, ask("write", "rule_confirm"), "ask", False),
        ("bypass", WRITE, PolicyDecision(action="deny", reasons=("write",)), "deny", False),
        ("plan", WRITE, PolicyDecision(action="allow"), "deny", True),
        ("plan", COMMAND, ask("write", "dangerous"), "deny", True),
        ("plan", READ, ask("sensitive_path"), "ask", False),
        ("plan", INTERNAL, PolicyDecision(action="allow"), "allow", False),
        ("dont_ask", WRITE, ask("write"), "ask", False),  # refused later, after the session grants
    ],
)
def test_apply_mode(
    mode: str, call: ToolDefinition, decision: PolicyDecision, action: str, changed: bool
) -> None:
    result, by_mode = apply_mode(decision, check_mode(mode), call)
    assert (result.action, by_mode) == (action, changed)
    if action == "deny" and changed:
        assert result.deny_code == ErrorCode.permission_denied and "plan mode" in str(result.message)


def test_refuse_ask_and_the_rest() -> None:
    refused = refuse_ask(ask("write"), WRITE)
    assert refused.action == "deny" and "dont_ask" in str(refused.message)
    assert "permission_mode" in refused.reasons
    with pytest.raises(ValueError, match="one of default, accept_edits"):
        check_mode("yolo")
    assert [t.name for t in plan_tools([WRITE, READ, COMMAND])] == ["code.read_file"]
    assert mode_prompt_text("default") == '<permission_mode mode="default"/>'
    assert "plan" in mode_prompt_text("plan") and len(mode_prompt_text("plan")) < 300

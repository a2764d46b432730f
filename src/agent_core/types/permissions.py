"""Permission protocol types (docs/permissions.md#permissionrequest)."""

# No `from __future__ import annotations`: pydantic would compile every field's annotation string when
# the models are created (issue 16, cold start); annotations naming a class defined later are quoted.

from typing import Any, Literal

from pydantic import Field

from agent_core.types.base import StrictModel
from agent_core.types.enums import AgentRole, PermissionDecisionKind

PermissionMode = Literal["default", "accept_edits", "plan", "dont_ask", "bypass"]
"""How a run's permission requests are decided (``[permissions] mode``, ``AgentRuntime.start(...,
permission_mode=...)``): ``default`` asks as the policy says; ``accept_edits`` allows file writes and edits
inside the write roots without asking (commands still ask); ``plan`` offers read-only tools only and ends
with a plan for the user to approve; ``dont_ask`` denies whatever would ask; ``bypass`` allows everything
but protected, sensitive and credential paths and writes outside the write roots (only with the command
sandbox on)."""
PERMISSION_MODES: tuple[PermissionMode, ...] = ("default", "accept_edits", "plan", "dont_ask", "bypass")


class PermissionRequest(StrictModel):
    request_id: str
    session_id: str
    agent_id: str
    run_id: str
    parent_agent_id: str | None = None
    parent_run_id: str | None = None
    agent_role: AgentRole
    tool_name: str
    permission: Literal["readonly", "write"]
    tags: list[str]
    args_summary: str
    target_scope: str | None = None
    cwd: str
    env_summary: dict[str, str]
    network_host: str | None = None
    dangerous: bool
    hook_summary: dict[str, Any] | None = None
    suggested_decision: PermissionDecisionKind
    metadata: dict[str, Any] = Field(default_factory=dict)


class PermissionDecision(StrictModel):
    decision: Literal["allow_once", "allow_for_session", "deny"]
    reason: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class UserQuestion(StrictModel):
    """A question the model asks the user with ``internal.ask_user`` (answered by the question callback,
    or later through ``AgentRuntime.answer_question(request_id, answer)`` when the callback defers)."""

    request_id: str
    session_id: str
    agent_id: str
    run_id: str
    agent_role: AgentRole
    tool_call_id: str
    question: str
    options: list[str] = Field(default_factory=list)
    """Suggested answers (may be empty); any text is a valid answer."""

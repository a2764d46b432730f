"""Permission protocol types (contract.md §3.7–§3.8)."""

# No `from __future__ import annotations`: pydantic would compile every field's annotation string when
# the models are created (issue 16, cold start); annotations naming a class defined later are quoted.

from typing import Any, Literal

from pydantic import Field

from agent_core.types.base import StrictModel
from agent_core.types.enums import AgentRole, PermissionDecisionKind


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

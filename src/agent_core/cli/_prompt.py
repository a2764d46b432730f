"""Permission prompts on the terminal (contract.md §10, config.md §11): the text and the stdin answers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_core.cli._diff import render_diff

if TYPE_CHECKING:
    from agent_core.types.permissions import PermissionRequest

STDIN_TIMEOUT_S = 120.0

_ANSWERS = {
    "1": "allow_once",
    "allow once": "allow_once",
    "2": "allow_for_session",
    "allow for session": "allow_for_session",
    "3": "deny",
    "deny": "deny",
}


def parse_permission_answer(line: str | None) -> str:
    """Maps one stdin answer to a decision; EOF (``None``), empty or any other input → ``deny``."""
    if line is None:
        return "deny"
    return _ANSWERS.get(" ".join(line.strip().lower().split()), "deny")


def describe_request(request: PermissionRequest, *, color: bool = False) -> str:
    """The permission prompt text (config.md §11): everything the user needs to decide; a write/edit
    request also shows the diff it would apply (``cli._diff``; ANSI colours with ``color``)."""
    agent = f"{request.agent_role} agent {request.agent_id} (run {request.run_id})"
    lines = [
        f"Permission requested by the {agent}",
        f"  tool:       {request.tool_name}",
        f"  permission: {request.permission}    dangerous: {'yes' if request.dangerous else 'no'}",
        f"  tags:       {', '.join(request.tags) or '-'}",
        f"  arguments:  {request.args_summary}",
        f"  target:     {request.target_scope or '-'}",
        f"  cwd:        {request.cwd}",
    ]
    if request.network_host:
        lines.append(f"  network:    {request.network_host}")
    if request.parent_agent_id or request.parent_run_id:
        lines.append(
            f"  parent:     agent {request.parent_agent_id or '-'}, run {request.parent_run_id or '-'}"
        )
    if request.hook_summary:
        lines.append(f"  hooks:      {request.hook_summary}")
    lines += render_diff(request, color=color)
    lines.append(f"  suggested:  {request.suggested_decision.value.replace('_', ' ')}")
    choices = "  [1] allow once   [2] allow for session   [3] deny"
    if request.metadata.get("allow_for_session_available") is False:
        choices += "   (no scope to remember: 2 acts as allow once)"
    lines += [choices, "Answer [1/2/3]: "]
    return "\n".join(lines)

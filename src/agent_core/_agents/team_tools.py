"""The ``agent.team_*`` tools over :class:`~agent_core._agents.team.Team` (docs/teams.md).

Each handler returns JSON. ``agent.team_request`` with ``kind="plan_approval"`` returns the lead's answer:
its tool result carries the ``response`` entry to the model and acknowledges it (``inbox_entry_ids``), and
a rejected plan is an error result, which skips the rest of the turn's calls, so nothing acts on it. With
the temporal engine every call is refused (``tool_not_available``): teammates need the local engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_core._agents.team import Team
from agent_core._agents.team_tool_definitions import (
    TEAM_LIST,
    TEAM_REQUEST,
    TEAM_RESPOND,
    TEAM_SEND,
    TEAM_SPAWN,
    team_tool_definitions,
)
from agent_core._loop.recorder import INBOX_ENTRY_IDS
from agent_core._storage.inbox import StoredEntry
from agent_core.errors import ErrorCode, ToolError
from agent_core.tools.context import ToolContext
from agent_core.types.content import ErrorPayload, JsonBlock, TextBlock
from agent_core.types.model import ToolCall
from agent_core.types.tools import ToolDefinition, ToolResult

if TYPE_CHECKING:
    from agent_core._agents.feature import Agents
    from agent_core._inbox.service import Inbox
    from agent_core._orchestrator.feature import TaskFeature
    from agent_core._runtime.runs import RunManager

TEMPORAL_REFUSAL = (
    "teammates run on the local engine only: agent.team_* is not available with [engine] kind = "
    '"temporal" (set kind = "local" to use teams)'
)


class TeamToolsAdapter:
    """:class:`~agent_core.tools.adapter.ToolAdapter` of the team tools."""

    def __init__(self, team: Team, *, refuse: str | None = None) -> None:
        self.team = team
        self._refuse = refuse

    def definitions(self) -> list[ToolDefinition]:
        return team_tool_definitions()

    async def execute(self, call: ToolCall, ctx: ToolContext) -> Any:
        if self._refuse is not None:
            raise ToolError(ErrorCode.tool_not_available, self._refuse)
        args = dict(call.arguments)
        team = self.team
        if call.name == TEAM_SPAWN:
            return await team.spawn(ctx, args)
        if call.name == TEAM_SEND:
            return await team.send(ctx, str(args["to"]), str(args["content"]))
        if call.name == TEAM_REQUEST:
            found = await team.request(ctx, str(args["to"]), str(args["kind"]), str(args["content"]))
            return found if isinstance(found, dict) else _answer(call, found)
        if call.name == TEAM_RESPOND:
            reason = args.get("reason")
            return await team.respond(ctx, str(args["request_id"]), bool(args["approve"]), reason)
        if call.name == TEAM_LIST:
            views = await team.views(ctx.session_id)
            return {"teammates": [v.model_dump(mode="json") for v in views]}
        raise ToolError(ErrorCode.tool_not_available, f"tool '{call.name}' is not available in this run")

    async def close(self) -> None:
        return None  # the team closes with the run manager


def _answer(call: ToolCall, stored: StoredEntry) -> ToolResult:
    """The result of a plan approval request: the answer (acknowledged with this result's node), or the
    shutdown request that arrived first (left for the drain, which stops the teammate)."""
    entry = stored.entry
    if entry.kind == "request":
        error = ErrorPayload(
            code=ErrorCode.cancelled,
            message="a shutdown request arrived while you waited for the plan's approval; stop here",
        )
        return ToolResult(
            tool_call_id=call.tool_call_id,
            tool_name=call.name,
            content=[TextBlock(text=error.message)],
            is_error=True,
            error=error,
        )
    approved = bool(entry.metadata.get("approve"))
    body = {
        "request_id": entry.request_id,
        "approved": approved,
        "reason": entry.content,
        "from": entry.from_,
    }
    metadata = {INBOX_ENTRY_IDS: [stored.entry_id]}
    if approved:
        return ToolResult(
            tool_call_id=call.tool_call_id,
            tool_name=call.name,
            content=[JsonBlock(data=body)],
            metadata=metadata,
        )
    error = ErrorPayload(
        code=ErrorCode.permission_denied,
        message=f"your lead rejected the plan: {entry.content}; revise it before acting",
        details={"request_id": entry.request_id},
    )
    return ToolResult(
        tool_call_id=call.tool_call_id,
        tool_name=call.name,
        content=[TextBlock(text=error.message), JsonBlock(data=body)],
        is_error=True,
        error=error,
        metadata=metadata,
    )


def install(manager: RunManager, inbox: Inbox, agents: Agents, tasks: TaskFeature) -> Team:
    """Builds the team feature (``RunFeatures.team``) and registers the team tools."""
    team = Team(manager, inbox, agents.registry, tasks)
    refuse = TEMPORAL_REFUSAL if manager.services.settings.engine.kind == "temporal" else None
    manager.services.tools.register_adapter(TeamToolsAdapter(team, refuse=refuse), internal=True)
    return team

"""The static definitions of the team tools (``agent.team_*``, docs/teams.md): registered at open when
``[agents] max_teammates_per_session > 0``, without importing the team machinery."""

from __future__ import annotations

from typing import Any

from agent_core.types.tools import ToolDefinition

TEAM_SPAWN = "agent.team_spawn"
TEAM_SEND = "agent.team_send"
TEAM_REQUEST = "agent.team_request"
TEAM_RESPOND = "agent.team_respond"
TEAM_LIST = "agent.team_list"
TEAM_TOOLS = frozenset({TEAM_SPAWN, TEAM_SEND, TEAM_REQUEST, TEAM_RESPOND, TEAM_LIST})
NAME_PATTERN = "^[a-z][a-z0-9_-]{0,31}$"


def _tool(
    name: str, description: str, properties: dict[str, Any], required: list[str], **meta: Any
) -> ToolDefinition:
    return ToolDefinition(
        name=name,
        description=description,
        input_schema={
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        },
        permission="readonly",
        tags=["agent", "internal", *(["readonly"] if name == TEAM_LIST else [])],
        metadata={"source": "internal", **meta},
    )


def team_tool_definitions() -> list[ToolDefinition]:
    """``agent.team_spawn``, ``agent.team_send``, ``agent.team_request``, ``agent.team_respond``,
    ``agent.team_list``."""
    to = {
        "type": "string",
        "minLength": 1,
        "description": 'A teammate\'s name, or "lead" for the agent that leads the team.',
    }
    return [
        _tool(
            TEAM_SPAWN,
            "Start a teammate: an agent with its own session that works on `task` next to you, in the same "
            "project, and talks to you through its inbox. A resident teammate waits for more messages after "
            "each reply; a non-resident one sends you its final answer and stops. Returns its agent_id and "
            "session_id at once (it works in the background).",
            {
                "name": {"type": "string", "pattern": NAME_PATTERN, "description": "Its name in the team."},
                "task": {"type": "string", "minLength": 1, "description": "Its first task, self-contained."},
                "agent_definition_id": {
                    "type": "string",
                    "description": "Agent definition for its instructions and model (agent.list_agent_definitions).",
                },
                "resident": {"type": "boolean", "description": "Keep it after its task (default true)."},
                "isolation": {
                    "type": "string",
                    "enum": ["shared", "worktree"],
                    "description": "`worktree`: it works in its own git worktree and branch (default shared).",
                },
                "autonomous": {
                    "type": "boolean",
                    "description": "When idle, it claims ready steps of your Task board in its worker pool "
                    "(resident teammates of an Orchestrator).",
                },
                "worker_pool_id": {
                    "type": "string",
                    "description": "The worker pool whose steps an autonomous teammate claims (default pool).",
                },
            },
            ["name", "task"],
            concurrency="serial",
        ),
        _tool(
            TEAM_SEND,
            "Send a message to a teammate's inbox (or to your lead's with to=\"lead\"). It reads it before its "
            "next step, or wakes up for it when idle.",
            {"to": to, "content": {"type": "string", "minLength": 1}},
            ["to", "content"],
            concurrency="parallel",
        ),
        _tool(
            TEAM_REQUEST,
            "Ask for a decision, correlated by request_id. kind=plan_approval (a teammate to its lead): send "
            "your plan; the call returns once the lead answered, and a rejected plan ends your turn so you "
            "can revise it. kind=shutdown (the lead to a teammate): it finishes its current step, answers "
            "and stops; the answer arrives in your inbox.",
            {
                "to": to,
                "kind": {"type": "string", "enum": ["plan_approval", "shutdown"]},
                "content": {"type": "string", "minLength": 1},
            },
            ["to", "kind", "content"],
            concurrency="serial",
        ),
        _tool(
            TEAM_RESPOND,
            "Answer a request from your inbox (approve or reject, with a reason); the answer reaches the "
            "requester's inbox with the same request_id.",
            {
                "request_id": {"type": "string", "minLength": 1},
                "approve": {"type": "boolean"},
                "reason": {"type": "string"},
            },
            ["request_id", "approve"],
            concurrency="serial",
        ),
        _tool(
            TEAM_LIST,
            "List the team: each teammate's name, agent_id, session_id, state (working, idle, stopped) and "
            "how many unread entries its inbox holds.",
            {},
            [],
            concurrency="parallel",
        ),
    ]

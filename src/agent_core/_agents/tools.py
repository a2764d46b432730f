"""``agent.list_agent_definitions``, ``agent.create_sub_agent`` and ``agent.fork_agent``
(docs/multi-agent.md#agent-tools, docs/multi-agent.md#agentlist_agent_definitions,
docs/multi-agent.md#agentcreate_sub_agent, docs/multi-agent.md#agentfork_agent) and :func:`install`, which
wires the registry, the launcher and the tools.

Definitions: permission ``readonly``, tags ``agent`` + ``internal`` (the list tool also ``readonly``),
``metadata.concurrency`` ``parallel`` for the list tool and ``agent`` for the two creating tools, input
schemas with ``additionalProperties: false`` (so ``system_prompt``, ``instructions`` or ``model`` arguments
are ``validation_error``). The creating tools return ``{child_agent_id, child_run_id, stream_id,
agent_definition_id, result}`` as JSON; a failed, timed-out or cancelled child, or a result that violates
``expected_output_schema``, is an error result that still carries that content. The parent's prompt
receives only this result, never the child transcript.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agent_core._agents.children import ChildLauncher
from agent_core._agents.registry import AgentDefinitionRegistry
from agent_core._agents.spec import ChildSpec
from agent_core._agents.tool_definitions import (
    CREATE_SUB_AGENT_TOOL,
    FORK_AGENT_TOOL,
    LIST_DEFINITIONS_TOOL,
    agent_tool_definitions,
)
from agent_core._notes import escape_note_text
from agent_core.errors import (
    ErrorCode,
    InternalError,
    InvalidArgumentError,
    ToolNotAvailableError,
)
from agent_core.tools.context import ToolContext
from agent_core.types.content import ToolCallBlock
from agent_core.types.enums import AgentRole
from agent_core.types.model import ToolCall
from agent_core.types.runtime import Node
from agent_core.types.tools import ToolDefinition

DELEGATED_TASK = "delegated_task"


def delegation_text(wrapper: str, sections: Sequence[tuple[str, str | None]]) -> str:
    """The first-node text of a child: ``<wrapper>`` with one ``<name>…</name>`` part per non-empty section."""
    lines = [f"<{wrapper}>"]
    for name, body in sections:
        if body:
            lines += [f"<{name}>", escape_note_text(body), f"</{name}>"]
    lines.append(f"</{wrapper}>")
    return "\n".join(lines)


def _task_sections(args: dict[str, Any], task: str) -> list[tuple[str, str | None]]:
    constraints = args.get("constraints") or []
    schema = args.get("expected_output_schema")
    return [
        ("task", task),
        ("context", args.get("context")),
        ("constraints", "\n".join(f"- {c}" for c in constraints) if constraints else None),
        ("expected_output_schema", json.dumps(schema, indent=2, ensure_ascii=False) if schema else None),
    ]


class AgentToolsAdapter:
    """:class:`~agent_core.tools.adapter.ToolAdapter` for the definition catalog and sub/fork children."""

    def __init__(self, registry: AgentDefinitionRegistry, launcher: ChildLauncher) -> None:
        self.registry = registry
        self.launcher = launcher

    def definitions(self) -> list[ToolDefinition]:
        return agent_tool_definitions()

    async def execute(self, call: ToolCall, ctx: ToolContext) -> Any:
        role = ctx.scope.agent_role
        if call.name == LIST_DEFINITIONS_TOOL and role in (AgentRole.main, AgentRole.orchestrator):
            return {"agent_definitions": self.registry.catalog(AgentRole.sub)}
        if call.name == CREATE_SUB_AGENT_TOOL and role in (AgentRole.main, AgentRole.orchestrator):
            return await self._create(call, ctx, AgentRole.sub)
        if call.name == FORK_AGENT_TOOL and role == AgentRole.main:
            return await self._create(call, ctx, AgentRole.fork)
        raise ToolNotAvailableError(
            ErrorCode.tool_not_available, f"tool '{call.name}' is not available in this run"
        )

    async def _create(self, call: ToolCall, ctx: ToolContext, role: AgentRole) -> Any:
        args = dict(call.arguments)
        task = args.get("task")
        if not isinstance(task, str) or not task.strip():
            raise InvalidArgumentError(ErrorCode.validation_error, "task must be a non-empty string")
        agents = self.launcher.settings.agents
        default_id = (
            agents.default_fork_agent_definition
            if role == AgentRole.fork
            else agents.default_sub_agent_definition
        )
        definition = self.registry.for_child(args.get("agent_definition_id") or default_id)
        base_path: Sequence[Node] = ()
        fork_from: str | None = None
        if role == AgentRole.fork:
            base_path = _fork_path(ctx.sink.active_path(), ctx.tool_call_id)
            fork_from = base_path[-1].node_id
        spec = ChildSpec(
            role=role,
            definition=definition,
            tool_call_id=ctx.tool_call_id,
            first_text=delegation_text(DELEGATED_TASK, _task_sections(args, task)),
            purpose=role.value,
            allowed_tools=args.get("allowed_tools"),
            expected_output_schema=args.get("expected_output_schema"),
            timeout_ms=args.get("timeout_ms"),
            base_path=base_path,
            fork_from_node_id=fork_from,
        )
        outcome = await self.launcher.run(ctx, spec)
        body = {
            **outcome.ids,
            "agent_definition_id": definition.agent_definition_id,
            "result": outcome.result.model_dump(mode="json"),
        }
        return outcome.tool_result(ctx.tool_call_id, call.name, body)

    async def close(self) -> None:
        return None


def _fork_path(path: Sequence[Node], tool_call_id: str) -> list[Node]:
    """The parent's active path up to (including) the assistant node that issued ``tool_call_id``."""
    for index in range(len(path) - 1, -1, -1):
        node = path[index]
        if node.role == "assistant" and any(
            isinstance(b, ToolCallBlock) and b.tool_call_id == tool_call_id for b in node.content
        ):
            return list(path[: index + 1])
    raise InternalError(
        ErrorCode.internal_error,
        f"the assistant node that issued tool call {tool_call_id!r} is not on the path",
    )

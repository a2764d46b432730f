"""``agent.list_agent_definitions``, ``agent.create_sub_agent`` and ``agent.fork_agent`` (contract.md §6.1,
multi-agent.md §6-§8) and :func:`install`, which wires the registry, the launcher and the tools.

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
from collections.abc import Collection, Sequence
from typing import Any

from agent_core.agents.children import ChildLauncher
from agent_core.agents.registry import AgentDefinitionRegistry
from agent_core.agents.spec import ChildSpec
from agent_core.context.prompt import DynamicSource
from agent_core.errors import AgentCoreError, ErrorCode, ToolError
from agent_core.runtime.runs import RunManager
from agent_core.runtime.services import Services
from agent_core.runtime.state import RunState
from agent_core.tools.context import ToolContext
from agent_core.tools.effective import EffectiveTools
from agent_core.types.content import ToolCallBlock
from agent_core.types.enums import AgentRole
from agent_core.types.model import SystemBlock, ToolCall
from agent_core.types.runtime import AgentDefinition, Node
from agent_core.types.tools import ToolDefinition

LIST_DEFINITIONS_TOOL = "agent.list_agent_definitions"
CREATE_SUB_AGENT_TOOL = "agent.create_sub_agent"
FORK_AGENT_TOOL = "agent.fork_agent"
DELEGATED_TASK = "delegated_task"

_STRING_LIST = {"type": "array", "items": {"type": "string"}}
_COMMON_PROPERTIES: dict[str, Any] = {
    "agent_definition_id": {
        "type": "string",
        "description": "Id of the agent definition to use (see agent.list_agent_definitions); default "
        "definition when omitted.",
    },
    "task": {"type": "string", "minLength": 1, "description": "The complete, self-contained task."},
    "constraints": {**_STRING_LIST, "description": "Rules the child must follow."},
    "allowed_tools": {
        **_STRING_LIST,
        "description": "Canonical tool names the child may use (narrows its default tool set).",
    },
    "expected_output_schema": {
        "type": "object",
        "description": "JSON Schema (core subset) the child's final JSON result must match.",
    },
    "timeout_ms": {"type": "integer", "minimum": 1, "description": "Maximum child run time in ms."},
}


def _definitions() -> list[ToolDefinition]:
    create_props = dict(_COMMON_PROPERTIES)
    create_props["context"] = {
        "type": "string",
        "description": "Everything the child needs to know; it does not see this conversation.",
    }
    return [
        ToolDefinition(
            name=LIST_DEFINITIONS_TOOL,
            description="List the agent definitions available for agent.create_sub_agent and "
            "agent.fork_agent, with their descriptions, tags and suggested tools.",
            input_schema={"type": "object", "properties": {}, "additionalProperties": False},
            permission="readonly",
            tags=["agent", "internal", "readonly"],
            metadata={"concurrency": "parallel", "source": "internal"},
        ),
        ToolDefinition(
            name=CREATE_SUB_AGENT_TOOL,
            description="Run a one-shot sub agent on a self-contained task and wait for its structured "
            "result. The sub agent starts with an empty context: pass everything it needs in task/context.",
            input_schema={
                "type": "object",
                "properties": create_props,
                "required": ["task"],
                "additionalProperties": False,
            },
            permission="readonly",
            tags=["agent", "internal"],
            metadata={"concurrency": "agent", "source": "internal"},
        ),
        ToolDefinition(
            name=FORK_AGENT_TOOL,
            description="Run a one-shot fork that inherits the current conversation context to do one side "
            "task, and wait for its structured result. The fork's work does not enter this conversation.",
            input_schema={
                "type": "object",
                "properties": dict(_COMMON_PROPERTIES),
                "required": ["task"],
                "additionalProperties": False,
            },
            permission="readonly",
            tags=["agent", "internal"],
            metadata={"concurrency": "agent", "source": "internal"},
        ),
    ]


def delegation_text(wrapper: str, sections: Sequence[tuple[str, str | None]]) -> str:
    """The first-node text of a child: ``<wrapper>`` with one ``<name>…</name>`` part per non-empty section."""
    lines = [f"<{wrapper}>"]
    for name, body in sections:
        if body:
            lines += [f"<{name}>", body, f"</{name}>"]
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
        return _definitions()

    async def execute(self, call: ToolCall, ctx: ToolContext) -> Any:
        role = ctx.scope.agent_role
        if call.name == LIST_DEFINITIONS_TOOL and role in (AgentRole.main, AgentRole.orchestrator):
            return {"agent_definitions": self.registry.catalog(AgentRole.sub)}
        if call.name == CREATE_SUB_AGENT_TOOL and role in (AgentRole.main, AgentRole.orchestrator):
            return await self._create(call, ctx, AgentRole.sub)
        if call.name == FORK_AGENT_TOOL and role == AgentRole.main:
            return await self._create(call, ctx, AgentRole.fork)
        raise ToolError(ErrorCode.tool_not_available, f"tool '{call.name}' is not available in this run")

    async def _create(self, call: ToolCall, ctx: ToolContext, role: AgentRole) -> Any:
        args = dict(call.arguments)
        task = args.get("task")
        if not isinstance(task, str) or not task.strip():
            raise AgentCoreError(ErrorCode.validation_error, "task must be a non-empty string")
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
    raise AgentCoreError(
        ErrorCode.internal_error,
        f"the assistant node that issued tool call {tool_call_id!r} is not on the path",
    )


def definition_sources(state: RunState, role: AgentRole, effective: EffectiveTools) -> list[DynamicSource]:
    """``RunManager.extra_dynamic_sources`` feature: the child's ``agent_definition:<id>`` block."""
    block = state.definition_block
    if block is None or role in (AgentRole.main, AgentRole.orchestrator):
        return []

    def source(_path: Sequence[Node]) -> list[SystemBlock]:
        return [block]

    return [source]


def _mcp_server_ids(services: Services) -> Collection[str]:
    mcp = services.extras.get("mcp")
    if mcp is not None:
        return set(mcp.catalog.servers)
    from agent_core.mcp.catalog import load_mcp_catalog

    return set(load_mcp_catalog(services.config).servers)


def install(manager: RunManager, code_definitions: Sequence[AgentDefinition]) -> AgentDefinitionRegistry:
    """Builds the registry (startup errors propagate), registers the agent tools and hooks the launcher.

    Puts the registry in ``services.extras["agent_definitions"]`` and the launcher in
    ``services.extras["child_launcher"]``; appends :func:`definition_sources` to
    ``manager.extra_dynamic_sources`` and the launcher's cancel propagation to ``manager.on_cancel``.
    """
    services = manager.services
    registry = AgentDefinitionRegistry(
        assets=services.assets,
        config=services.config,
        tools=services.tools.definitions,
        has_permission_callback=services.gate.has_callback,
        mcp_server_ids=lambda: _mcp_server_ids(services),
    )
    registry.load(code_definitions)
    launcher = ChildLauncher(manager, registry)
    services.tools.register_adapter(AgentToolsAdapter(registry, launcher), internal=True)
    services.extras["agent_definitions"] = registry
    services.extras["child_launcher"] = launcher
    manager.extra_dynamic_sources.append(definition_sources)
    manager.on_cancel.append(launcher.on_parent_cancel)
    return registry

"""The static definitions of the agent tools (docs/multi-agent.md#agent-tools): registered at open without
importing the child-run machinery, which loads on the first call (``agents/feature.py``)."""

from __future__ import annotations

from typing import Any

from agent_core.types.tools import ToolDefinition

LIST_DEFINITIONS_TOOL = "agent.list_agent_definitions"
CREATE_SUB_AGENT_TOOL = "agent.create_sub_agent"
FORK_AGENT_TOOL = "agent.fork_agent"

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


def agent_tool_definitions() -> list[ToolDefinition]:
    """``agent.list_agent_definitions``, ``agent.create_sub_agent`` and ``agent.fork_agent``."""
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

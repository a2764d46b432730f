"""The static definition of ``internal.load_skill``: registered at open without importing the tool's
implementation (``_skills/tool.py``), which loads on the first call (cold start, issue 16)."""

from __future__ import annotations

from agent_core.types.tools import ToolDefinition

LOAD_SKILL_TOOL = "internal.load_skill"


def load_skill_definition() -> ToolDefinition:
    return ToolDefinition(
        name=LOAD_SKILL_TOOL,
        description=(
            "Load the full instructions of one skill from the skill catalog into the conversation. "
            "Pass the exact, case-sensitive skill name. Loading an unchanged skill again has no effect."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "Exact skill name as listed in the skill catalog."}
            },
            "required": ["name"],
            "additionalProperties": False,
        },
        permission="readonly",
        tags=["internal", "readonly"],
        metadata={"concurrency": "parallel", "source": "internal"},
    )

"""The static definition of ``internal.ask_user`` (registered at open; the tool is imported on first use)."""

from __future__ import annotations

from agent_core.types.tools import ToolDefinition

ASK_USER_TOOL = "internal.ask_user"
MAX_QUESTION_CHARS = 4000
MAX_OPTIONS = 10
MAX_OPTION_CHARS = 200


def ask_user_definition() -> ToolDefinition:
    return ToolDefinition(
        name=ASK_USER_TOOL,
        description=(
            "Ask the user and wait for {answer}; options: likely answers. Only for what you cannot find "
            "out; fails when nobody can answer (then decide yourself)."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "question": {"type": "string"},
                "options": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["question"],
            "additionalProperties": False,
        },
        permission="readonly",
        tags=["internal", "readonly"],
        metadata={"concurrency": "parallel", "source": "internal"},
    )

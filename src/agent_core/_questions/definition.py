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
            "Ask the user a question and wait for the answer. Use it when you cannot continue well "
            "without a decision or a fact only the user has (which of two designs, a missing value); "
            "do not ask what you can find out yourself. Offer the likely answers as options when there "
            "are few. The result is {answer}; when nobody can answer (a non-interactive run) the call "
            "fails: then decide yourself and state your assumption."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "question": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_QUESTION_CHARS,
                    "description": "The question, complete and self-contained.",
                },
                "options": {
                    "type": "array",
                    "items": {"type": "string", "minLength": 1, "maxLength": MAX_OPTION_CHARS},
                    "maxItems": MAX_OPTIONS,
                    "description": "Suggested answers (the user may still answer in their own words).",
                },
            },
            "required": ["question"],
            "additionalProperties": False,
        },
        permission="readonly",
        tags=["internal", "readonly"],
        metadata={"concurrency": "parallel", "source": "internal"},
    )

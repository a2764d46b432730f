"""Tool protocol types: :class:`ToolDefinition` and :class:`ToolResult` (docs/tools.md#results,
docs/tools.md#names-and-definitions)."""

# No `from __future__ import annotations`: pydantic would compile every field's annotation string when
# the models are created (issue 16, cold start); annotations naming a class defined later are quoted.

from typing import Any, Literal

from pydantic import Field, field_validator

from agent_core.types.base import StrictModel, empty_list
from agent_core.types.content import ContentBlock, ErrorPayload


class ToolDefinition(StrictModel):
    name: str
    description: str
    input_schema: dict[str, Any]
    permission: Literal["readonly", "write"]
    tags: list[str] = Field(default_factory=empty_list)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("tags")
    @classmethod
    def _unique_tags(cls, tags: list[str]) -> list[str]:
        if len(set(tags)) != len(tags):
            raise ValueError("tags must be unique")
        return tags


class ToolResult(StrictModel):
    tool_call_id: str
    tool_name: str
    content: list[ContentBlock]
    is_error: bool = False
    error: ErrorPayload | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

"""Content blocks (contract.md §3.1); re-exports :class:`ErrorPayload` (§3.5, defined in ``errors.payloads``)."""

# No `from __future__ import annotations`: pydantic would compile every field's annotation string when
# the models are created (issue 16, cold start); annotations naming a class defined later are quoted.

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, TypeAdapter

from agent_core.errors.payloads import ErrorPayload as ErrorPayload
from agent_core.types.base import StrictModel


class TextBlock(StrictModel):
    type: Literal["text"] = "text"
    text: str


class JsonBlock(StrictModel):
    type: Literal["json"] = "json"
    data: Any | None = None
    summary: str | None = None
    artifact_id: str | None = None


class ToolCallBlock(StrictModel):
    type: Literal["tool_call"] = "tool_call"
    tool_call_id: str
    name: str
    arguments: dict[str, Any]
    metadata: dict[str, Any] = Field(default_factory=dict)


class ToolResultBlock(StrictModel):
    type: Literal["tool_result"] = "tool_result"
    tool_call_id: str
    is_error: bool = False
    content: "list[ContentBlock]"
    error: ErrorPayload | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class ArtifactRefBlock(StrictModel):
    type: Literal["artifact_ref"] = "artifact_ref"
    artifact_id: str
    summary: str | None = None
    mime_type: str | None = None


ContentBlock = Annotated[
    TextBlock | JsonBlock | ToolCallBlock | ToolResultBlock | ArtifactRefBlock,
    Field(discriminator="type"),
]
"""Discriminated union of the five v1 block types."""


content_list_adapter: TypeAdapter[list[ContentBlock]] = TypeAdapter(
    list[ContentBlock], config=ConfigDict(defer_build=True)
)
"""Validates/serialises ``list[ContentBlock]`` (e.g. ``content_json`` columns)."""


def text_of(blocks: list[ContentBlock]) -> str:
    """Concatenated text of the ``text`` blocks."""
    return "".join(b.text for b in blocks if isinstance(b, TextBlock))

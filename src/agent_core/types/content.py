"""Content blocks (docs/storage.md#content-blocks); re-exports :class:`ErrorPayload`
(docs/errors.md#errorpayload, defined in ``errors.payloads``)."""

# No `from __future__ import annotations`: pydantic would compile every field's annotation string when
# the models are created (issue 16, cold start); annotations naming a class defined later are quoted.

from collections.abc import Iterable
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


class ReasoningBlock(StrictModel):
    """A model's reasoning (OpenAI reasoning summaries, Anthropic thinking, Ollama ``thinking``).

    ``signature`` is the provider's opaque proof or payload that must travel back unchanged (Anthropic's
    thinking ``signature`` or a ``redacted_thinking`` block's ``data``; the Responses API's
    ``encrypted_content``); ``None`` when the provider gives none. ``provider`` is the provider key that
    produced it: the block is sent back only to that provider (and model). ``redacted``: the provider
    withheld the text (Anthropic ``redacted_thinking``; ``text`` is then empty).
    """

    type: Literal["reasoning"] = "reasoning"
    text: str = ""
    signature: str | None = None
    provider: str
    redacted: bool = False


class ImageBlock(StrictModel):
    """An image the model sees; the bytes are the artifact ``artifact_id`` (never inline in storage).

    ``detail`` is OpenAI's resolution hint (``auto``/``low``/``high``); other providers ignore it.
    """

    type: Literal["image"] = "image"
    artifact_id: str
    mime_type: str
    detail: Literal["auto", "low", "high"] | None = None


class DocumentBlock(StrictModel):
    """A document (PDF) the model reads; the bytes are the artifact ``artifact_id``."""

    type: Literal["document"] = "document"
    artifact_id: str
    mime_type: str = "application/pdf"


ContentBlock = Annotated[
    TextBlock
    | JsonBlock
    | ToolCallBlock
    | ToolResultBlock
    | ArtifactRefBlock
    | ReasoningBlock
    | ImageBlock
    | DocumentBlock,
    Field(discriminator="type"),
]
"""Discriminated union of the content block types."""

MediaBlock = ImageBlock | DocumentBlock
"""The blocks whose bytes an adapter sends from ``ModelRequest.attachments``."""


content_list_adapter: TypeAdapter[list[ContentBlock]] = TypeAdapter(
    list[ContentBlock], config=ConfigDict(defer_build=True)
)
"""Validates/serialises ``list[ContentBlock]`` (e.g. ``content_json`` columns)."""


def media_blocks(blocks: "Iterable[ContentBlock]") -> list[MediaBlock]:
    """The image and document blocks of ``blocks`` (tool results included), in order.

    Runs over a whole conversation for every request, so it dispatches on the ``type`` discriminator (a
    string comparison) rather than ``isinstance`` against the model classes (several times slower)."""
    found: list[MediaBlock] = []
    for block in blocks:
        if block.type == "image" or block.type == "document":
            found.append(block)
        elif block.type == "tool_result":
            found.extend(media_blocks(block.content))
    return found


def media_ids(blocks: "Iterable[ContentBlock]") -> list[str]:
    """Artifact ids of the image and document blocks of ``blocks`` (tool results included), in order."""
    return [block.artifact_id for block in media_blocks(blocks)]


def reasoning_of(blocks: "list[ContentBlock]") -> str:
    """The text of the ``reasoning`` blocks, joined by blank lines."""
    return "\n\n".join(b.text for b in blocks if isinstance(b, ReasoningBlock) and b.text)


def text_of(blocks: list[ContentBlock]) -> str:
    """Concatenated text of the ``text`` blocks."""
    return "".join(b.text for b in blocks if isinstance(b, TextBlock))

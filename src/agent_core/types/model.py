"""Provider-neutral model protocol (docs/providers.md#the-protocol): requests, tool calls, usage and stream
events."""

# No `from __future__ import annotations`: pydantic would compile every field's annotation string when
# the models are created (issue 16, cold start); annotations naming a class defined later are quoted.

from typing import Annotated, Any, Literal

from pydantic import Field

from agent_core.errors import ErrorCode, SchemaError
from agent_core.errors.payloads import ProviderErrorPayload as ProviderErrorPayload
from agent_core.types.base import StrictModel, empty_list
from agent_core.types.content import (
    ArtifactRefBlock,
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    JsonBlock,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from agent_core.types.tools import ToolDefinition


class ModelMessage(StrictModel):
    role: Literal["system", "user", "assistant", "tool"]
    content: list[ContentBlock]
    metadata: dict[str, Any] = Field(default_factory=dict)


class SystemBlock(StrictModel):
    """One system prompt block; the contract's ``PromptBlock`` is the same model."""

    block_id: str
    source: str
    content: str
    priority: int = 0
    dynamic: bool = False
    token_count: int | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


PromptBlock = SystemBlock


class ToolChoiceNamed(StrictModel):
    name: str


class ModelRequest(StrictModel):
    model: str
    system: list[SystemBlock] = Field(default_factory=empty_list)
    messages: list[ModelMessage]
    tools: list[ToolDefinition] = Field(default_factory=empty_list)
    tool_choice: Literal["auto", "none", "required"] | ToolChoiceNamed = "auto"
    temperature: float | None = None
    max_output_tokens: int | None = None
    stop_sequences: list[str] = Field(default_factory=empty_list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    provider_options: dict[str, dict[str, Any]] = Field(default_factory=dict)
    attachments: dict[str, bytes] = Field(default_factory=dict)
    """The bytes of the artifacts the request's image and document blocks reference, by artifact id
    (loaded by the runtime for this request; never stored). An adapter encodes them its provider's way."""


_ALLOWED_BLOCKS: dict[str, tuple[type, ...]] = {
    "system": (TextBlock,),
    "user": (TextBlock, JsonBlock, ArtifactRefBlock, ImageBlock, DocumentBlock),
    "assistant": (TextBlock, JsonBlock, ToolCallBlock, ReasoningBlock),
    "tool": (ToolResultBlock,),
}


def message_tool_names(message: ModelMessage) -> tuple[str, ...]:
    """Tool names of the message's ``tool_call`` blocks, after checking its block types
    (docs/providers.md#the-protocol).

    Raises ``SchemaError`` for a block type the role may not carry. An adapter checks each message of a
    conversation once (``providers/_prefix.py`` keeps the names of the history it has seen).
    """
    allowed = _ALLOWED_BLOCKS[message.role]
    for block in message.content:
        if not isinstance(block, allowed):
            raise SchemaError(
                ErrorCode.schema_error,
                f"a message with role {message.role!r} may not contain a {block.type!r} block",
            )
    return tuple(b.name for b in message.content if isinstance(b, ToolCallBlock))


def validate_request_messages(request: ModelRequest) -> None:
    """Raises ``SchemaError`` when a message holds a block type its role may not carry
    (docs/providers.md#the-protocol)."""
    for index, message in enumerate(request.messages):
        try:
            message_tool_names(message)
        except SchemaError as exc:
            raise SchemaError(ErrorCode.schema_error, f"message {index}: {exc.message}") from None


class ToolCall(StrictModel):
    tool_call_id: str
    name: str
    arguments: dict[str, Any]
    metadata: dict[str, Any] = Field(default_factory=dict)


class Usage(StrictModel):
    """Token usage of model calls. ``input_tokens`` counts the whole prompt, whichever provider: the
    uncached part plus ``cache_read_tokens`` (read from the provider's prompt cache) plus
    ``cache_write_tokens`` (written to it); :attr:`uncached_input_tokens` is the first part."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None
    raw_usage: dict[str, Any] = Field(default_factory=dict)

    @property
    def uncached_input_tokens(self) -> int:
        """Input tokens neither read from nor written to the prompt cache."""
        return max(0, self.input_tokens - (self.cache_read_tokens or 0) - (self.cache_write_tokens or 0))


def sum_usage(items: list[Usage]) -> Usage:
    """Field-wise sum; optional counters stay ``None`` unless some call reported them
    (docs/providers.md#options-raw-data-and-token-counts)."""
    total = Usage()
    for u in items:
        total.input_tokens += u.input_tokens
        total.output_tokens += u.output_tokens
        total.total_tokens += u.total_tokens
        for name in ("cache_read_tokens", "cache_write_tokens", "reasoning_tokens"):
            value = getattr(u, name)
            if value is not None:
                setattr(total, name, (getattr(total, name) or 0) + value)
    return total


class StopReason(StrictModel):
    reason: Literal["end_turn", "tool_use", "max_tokens", "stop_sequence", "content_filter", "error"]
    raw_stop_reason: str | None = None


class ModelStarted(StrictModel):
    type: Literal["model_started"] = "model_started"
    provider: str
    model: str
    metadata: dict[str, Any] = Field(default_factory=dict)


class ModelTextDelta(StrictModel):
    type: Literal["model_text_delta"] = "model_text_delta"
    text: str = Field(min_length=1)


class ModelReasoningDelta(StrictModel):
    """A fragment of the model's reasoning text (a reasoning summary, thinking); live only."""

    type: Literal["model_reasoning_delta"] = "model_reasoning_delta"
    text: str = Field(min_length=1)


class ToolCallDelta(StrictModel):
    type: Literal["tool_call_delta"] = "tool_call_delta"
    index: int
    phase: Literal["start", "delta", "end"]
    tool_call_id: str | None = None
    name: str | None = None
    arguments_delta: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)


class ModelCompleted(StrictModel):
    type: Literal["model_completed"] = "model_completed"
    content: list[ContentBlock]
    tool_calls: list[ToolCall]
    usage: Usage
    stop_reason: StopReason
    metadata: dict[str, Any] = Field(default_factory=dict)


class ModelFailed(StrictModel):
    type: Literal["model_failed"] = "model_failed"
    error: ProviderErrorPayload
    usage: Usage | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class ProviderDebug(StrictModel):
    type: Literal["provider_debug"] = "provider_debug"
    kind: str
    data: dict[str, Any]


ModelEvent = Annotated[
    ModelStarted
    | ModelTextDelta
    | ModelReasoningDelta
    | ToolCallDelta
    | ModelCompleted
    | ModelFailed
    | ProviderDebug,
    Field(discriminator="type"),
]

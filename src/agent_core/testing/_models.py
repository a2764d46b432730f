"""In-process test models: a reply (text and/or tool calls) streamed as provider-neutral events.

:func:`stream_reply` turns one :class:`ModelReply` into the adapter stream grammar (``model_started``,
text deltas, ``tool_call_delta`` start/delta/end, ``model_completed``). :class:`FunctionModel` computes
the reply with a user function; :class:`InProcessModel` is the shared adapter base (records requests,
counts closes, is its own provider factory).
"""

from __future__ import annotations

import asyncio
import inspect
import json
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_core._ids import new_id
from agent_core.config.model import ResolvedModelConfig
from agent_core.errors import ErrorCode, InvalidArgumentTypeError
from agent_core.testing._wire import split_text
from agent_core.types.content import ContentBlock, TextBlock, ToolCallBlock, ToolResultBlock, text_of
from agent_core.types.model import (
    ModelCompleted,
    ModelEvent,
    ModelRequest,
    ModelStarted,
    ModelTextDelta,
    StopReason,
    ToolCall,
    ToolCallDelta,
    Usage,
)

DEFAULT_PROVIDER_KEY = "testing"
"""The provider key the in-process models register under unless told otherwise."""


@dataclass(frozen=True, slots=True)
class CallTool:
    """One tool call of a scripted reply; ``tool_call_id`` is generated when omitted."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    tool_call_id: str | None = None


@dataclass(frozen=True, slots=True)
class ModelReply:
    """What a test model answers: text, tool calls, or both (text first)."""

    text: str = ""
    tool_calls: Sequence[CallTool] = ()


ReplyValue = str | ModelReply
ReplyFunction = Callable[[ModelRequest], ReplyValue | Awaitable[ReplyValue]]


def estimate_tokens(text: str) -> int:
    """A deterministic token estimate for test usage figures (4 characters per token, at least 1)."""
    return max(1, len(text) // 4) if text else 0


async def stream_reply(
    reply: ModelReply,
    *,
    provider: str,
    model: str,
    chunks: int = 3,
    usage: Usage | None = None,
    stop: str | None = None,
    argument_deltas: bool = True,
    delay: float = 0.0,
    split: Callable[[str, int], list[str]] = split_text,
) -> AsyncIterator[ModelEvent]:
    """Streams ``reply``: text split into ``chunks`` deltas, then each call's start/arguments/end."""
    yield ModelStarted(provider=provider, model=model)
    if reply.text:
        for piece in split(reply.text, chunks):
            if delay:
                await asyncio.sleep(delay)
            yield ModelTextDelta(text=piece)
    made: list[ToolCall] = []
    for index, spec in enumerate(reply.tool_calls):
        call_id = spec.tool_call_id or new_id("call_")
        yield ToolCallDelta(index=index, phase="start", tool_call_id=call_id, name=spec.name)
        if argument_deltas and spec.arguments:
            for piece in split_text(json.dumps(spec.arguments), chunks):
                yield ToolCallDelta(index=index, phase="delta", tool_call_id=call_id, arguments_delta=piece)
        yield ToolCallDelta(index=index, phase="end", tool_call_id=call_id, name=spec.name)
        made.append(ToolCall(tool_call_id=call_id, name=spec.name, arguments=dict(spec.arguments)))
    content: list[ContentBlock] = [TextBlock(text=reply.text)] if reply.text else []
    content += [ToolCallBlock(tool_call_id=c.tool_call_id, name=c.name, arguments=c.arguments) for c in made]
    if usage is None:
        out = estimate_tokens(reply.text) + sum(estimate_tokens(json.dumps(c.arguments)) for c in made)
        usage = Usage(input_tokens=10, output_tokens=out, total_tokens=10 + out)
    reason = stop or ("tool_use" if made else "end_turn")
    yield ModelCompleted(
        content=content,
        tool_calls=made,
        usage=usage,
        stop_reason=StopReason.model_validate({"reason": reason, "raw_stop_reason": reason}),
        metadata={"provider": provider, "model": model},
    )


class InProcessModel(ABC):
    """Base of the in-process test models: a ``ProviderAdapter`` that is also its own provider factory.

    ``requests`` holds every request received (provider-neutral), ``configs`` every resolved model
    config the runtime built it with; ``closed`` counts ``close()`` calls.
    """

    model_name = "test-model"

    def __init__(self, *, provider_key: str = DEFAULT_PROVIDER_KEY) -> None:
        self.provider_key = provider_key
        self.requests: list[ModelRequest] = []
        self.configs: list[ResolvedModelConfig] = []
        self.closed = 0

    def factory(self, config: ResolvedModelConfig) -> InProcessModel:
        """The ``ProviderFactory`` to register (``registry.register(key, model.factory)``)."""
        self.configs.append(config)
        return self

    @abstractmethod
    async def reply(self, request: ModelRequest) -> ModelReply:
        """The reply to ``request`` (subclasses decide)."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        reply = await self.reply(request)
        async for event in stream_reply(reply, provider=self.provider_key, model=request.model):
            yield event

    async def close(self) -> None:
        self.closed += 1


class FunctionModel(InProcessModel):
    """A model whose reply is computed by ``fn(request)`` (sync or async) from the neutral request.

    ``fn`` returns a ``str`` (a text answer) or a :class:`ModelReply` (text and/or tool calls). The reply
    is streamed as deltas, like a real provider. An exception raised by ``fn`` fails the run with
    ``internal_error`` naming it.
    """

    def __init__(self, fn: ReplyFunction, *, provider_key: str = DEFAULT_PROVIDER_KEY) -> None:
        super().__init__(provider_key=provider_key)
        if not callable(fn):
            raise InvalidArgumentTypeError(
                ErrorCode.validation_error, f"FunctionModel needs a callable, not {type(fn).__name__}"
            )
        self.fn = fn

    async def reply(self, request: ModelRequest) -> ModelReply:
        value = self.fn(request)
        if inspect.isawaitable(value):
            value = await value
        if isinstance(value, str):
            return ModelReply(text=value)
        if isinstance(value, ModelReply):
            return value
        raise InvalidArgumentTypeError(
            ErrorCode.validation_error,
            f"FunctionModel function returned {type(value).__name__}; expected str or ModelReply",
        )


def last_user_text(request: ModelRequest) -> str:
    """The text of the last user message of ``request`` ('' when there is none)."""
    for message in reversed(request.messages):
        if message.role == "user":
            return "".join(b.text for b in message.content if isinstance(b, TextBlock))
    return ""


def tool_results(request: ModelRequest) -> dict[str, str]:
    """Text of the tool results in the last tool turn of ``request``, by ``tool_call_id``."""
    results: dict[str, str] = {}
    for message in reversed(request.messages):
        if message.role != "tool":
            if results:
                break
            continue
        for block in message.content:
            if isinstance(block, ToolResultBlock):
                results[block.tool_call_id] = text_of(block.content)
    return results

"""The provider adapter contract (docs/providers.md#the-adapter) and the pure helpers shared by the stream
translators.

An adapter's ``stream(request)`` is an async generator obeying the grammar of
docs/providers.md#events-and-their-grammar::

    stream := model_failed                        # pre-flight rejection, nothing sent
            | model_started (model_text_delta | tool_call_delta | provider_debug)* terminal

:class:`MessageAssembler` holds the aggregation state every translator needs (text segments, tool-call
fragments, usage, stop reason) and builds the final ``model_completed`` exactly as
docs/providers.md#events-and-their-grammar requires.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from agent_core._ids import is_printable_id, new_id
from agent_core.config.model import ResolvedModelConfig
from agent_core.errors import ErrorCode
from agent_core.providers._tool_mapping import ToolNameMap
from agent_core.types.content import ContentBlock, ReasoningBlock, TextBlock, ToolCallBlock
from agent_core.types.model import (
    ModelCompleted,
    ModelEvent,
    ModelFailed,
    ModelReasoningDelta,
    ModelRequest,
    ModelTextDelta,
    ProviderErrorPayload,
    StopReason,
    ToolCall,
    ToolCallDelta,
    Usage,
)


@runtime_checkable
class ProviderAdapter(Protocol):
    """A streaming model adapter. ``close()`` is idempotent; ``stream()`` after close fails ``closed``."""

    provider_key: str

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]: ...

    async def close(self) -> None: ...


ProviderFactory = Callable[[ResolvedModelConfig], ProviderAdapter]
"""An adapter class or factory receiving the fully resolved model config
(docs/tools.md#registering-python-tools)."""

ERROR_TYPES: dict[str, tuple[ErrorCode, bool]] = {
    "unsupported_capability": (ErrorCode.unsupported_capability, False),
    "auth": (ErrorCode.provider_auth_failed, False),
    "rate_limit": (ErrorCode.provider_rate_limited, True),
    "timeout": (ErrorCode.provider_timeout, True),
    "server": (ErrorCode.provider_error, True),
    "network": (ErrorCode.provider_error, True),
    "invalid_request": (ErrorCode.provider_error, False),
    "config": (ErrorCode.config_error, False),
    "protocol": (ErrorCode.provider_error, False),
    "closed": (ErrorCode.provider_error, False),
    "internal": (ErrorCode.internal_error, False),
    "prompt_too_long": (ErrorCode.validation_error, False),
}
"""The classification table of docs/providers.md#errors-and-retries: error ``type`` -> (``code``,
``retryable``)."""


def error_payload(
    type_: str,
    message: str,
    *,
    provider: str | None = None,
    model: str | None = None,
    code: ErrorCode | None = None,
    **fields: Any,
) -> ProviderErrorPayload:
    """Builds a :class:`ProviderErrorPayload` whose ``code``/``retryable`` follow the
    docs/providers.md#errors-and-retries table."""
    default_code, retryable = ERROR_TYPES[type_]
    return ProviderErrorPayload(
        type=type_,
        code=(code or default_code).value,
        message=message,
        retryable=retryable,
        provider=provider,
        model=model,
        **fields,
    )


_TOOLS_UNSUPPORTED = re.compile(
    r"(?is)(does not support|doesn't support|not support|unsupported).{0,60}\b(tools?|function)"
    r"|\b(tools?|function calling|functions?)\b.{0,60}(not supported|unsupported|not available)"
)


def mentions_tools_unsupported(message: str) -> bool:
    """True when a provider error text says the model cannot use tools."""
    return bool(_TOOLS_UNSUPPORTED.search(message))


def as_dict(value: object) -> dict[str, Any]:
    """``value`` when it is a dict, else an empty dict (lenient reads of provider chunks)."""
    return value if isinstance(value, dict) else {}


def as_int(value: object) -> int:
    """Lenient integer read of a usage counter (``None``/bad values count as 0)."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value == value:
        return int(value)
    return 0


def optional_int(mapping: object, key: str) -> int | None:
    """``mapping[key]`` as an int when present and numeric, else ``None`` (unknown counters stay None)."""
    if not isinstance(mapping, dict):
        return None
    value = mapping.get(key)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    return None


def parse_arguments(text: str) -> tuple[dict[str, Any], str | None]:
    """Parses tool-argument text (docs/providers.md#the-protocol): ``({}, None)`` for empty text,
    ``({}, error)`` when invalid."""
    if not text.strip():
        return {}, None
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        return {}, f"invalid JSON in tool arguments: {exc}"
    if not isinstance(value, dict):
        return {}, f"tool arguments must be a JSON object, got {type(value).__name__}"
    return value, None


def stop_reason(reason: str, raw: str | None, *, has_tool_calls: bool) -> StopReason:
    """Final stop reason; any tool call forces ``tool_use`` (docs/providers.md#the-protocol)."""
    if has_tool_calls:
        reason = "tool_use"
    return StopReason.model_validate({"reason": reason, "raw_stop_reason": raw})


@dataclass(slots=True)
class _Reasoning:
    """One reasoning block in the making (its text arrives in fragments; the signature at its end)."""

    fragments: list[str] = field(default_factory=list)
    signature: str | None = None
    redacted: bool = False


@dataclass(slots=True)
class _PendingCall:
    index: int
    provider_id: str | None
    provider_name: str
    tool_call_id: str | None
    metadata: dict[str, Any]
    fragments: list[str] = field(default_factory=list)
    closed: bool = False


class MessageAssembler:
    """Aggregation state of one streamed assistant message (text segments + tool calls in order).

    Tool calls are addressed by a provider-specific ``key`` (stream index, content-block index, ...);
    the ``index`` of emitted ``tool_call_delta`` events is the 0-based position of the call in this
    message. Provider ids are kept when printable and at most 128 characters, otherwise (or when
    repeated within the message) a ``call_`` id is generated and the raw value kept in metadata.
    """

    def __init__(self, *, provider: str, model: str, name_map: ToolNameMap) -> None:
        self.provider = provider
        self.model = model
        self.name_map = name_map
        self.usage = Usage()
        self.response_id: str | None = None
        self.delta_count = 0
        self._parts: list[list[str] | _PendingCall | _Reasoning] = []
        self._reasoning: dict[object, _Reasoning] = {}
        self._calls: dict[object, _PendingCall] = {}
        self._used_ids: set[str] = set()

    # -- text -------------------------------------------------------------------------------------
    def text(self, text: str) -> list[ModelEvent]:
        if not text:
            return []
        if self._parts and isinstance(self._parts[-1], list):
            self._parts[-1].append(text)
        else:
            self._parts.append([text])
        self.delta_count += 1
        return [ModelTextDelta(text=text)]

    def break_text(self) -> None:
        """Starts a new text segment (a provider text block boundary)."""
        if self._parts and isinstance(self._parts[-1], list) and self._parts[-1]:
            self._parts.append([])

    # -- reasoning --------------------------------------------------------------------------------
    def start_reasoning(self, key: object, *, redacted: bool = False, signature: str | None = None) -> None:
        """Opens a reasoning block (a provider reasoning/thinking item) at the current position."""
        part = _Reasoning(signature=signature, redacted=redacted)
        self._reasoning[key] = part
        self._parts.append(part)

    def has_reasoning(self, key: object) -> bool:
        return key in self._reasoning

    def reasoning(self, key: object, text: str) -> list[ModelEvent]:
        """A reasoning text fragment (a block is opened on first sight of ``key``)."""
        if not self.has_reasoning(key):
            self.start_reasoning(key)
        if not text:
            return []
        self._reasoning[key].fragments.append(text)
        self.delta_count += 1
        return [ModelReasoningDelta(text=text)]

    def reasoning_signature(self, key: object, signature: str, *, append: bool = False) -> None:
        """Sets (or, ``append``, extends) the opaque signature of reasoning block ``key``."""
        if not self.has_reasoning(key):
            self.start_reasoning(key)
        part = self._reasoning[key]
        part.signature = (part.signature or "") + signature if append else signature

    def set_reasoning_text(self, key: object, text: str) -> None:
        """Replaces the text of block ``key`` (the provider's final text for it, when it differs)."""
        if not self.has_reasoning(key):
            self.start_reasoning(key)
        self._reasoning[key].fragments = [text] if text else []

    def reasoning_text(self, key: object) -> str:
        part = self._reasoning.get(key)
        return "".join(part.fragments) if part is not None else ""

    # -- tool calls -------------------------------------------------------------------------------
    def has_call(self, key: object) -> bool:
        return key in self._calls

    def call_keys(self) -> list[object]:
        return list(self._calls)

    def start_call(
        self,
        key: object,
        *,
        provider_id: str | None,
        provider_name: str,
        metadata: dict[str, Any] | None = None,
        id_may_follow: bool = False,
    ) -> list[ModelEvent]:
        """Opens a tool call; emits ``tool_call_delta(phase="start")`` with the canonical name.

        Without a provider id a ``call_`` id is generated at once, unless ``id_may_follow`` (the id may
        arrive in a later fragment; it is then fixed at :meth:`set_call_id` or at the call's end).
        """
        meta = dict(metadata or {})
        meta["provider_tool_name"] = provider_name
        call = _PendingCall(
            index=len(self._calls),
            provider_id=provider_id,
            provider_name=provider_name,
            tool_call_id=None,
            metadata=meta,
        )
        if provider_id is not None or not id_may_follow:
            call.tool_call_id = self._claim_id(call, provider_id)
        self._calls[key] = call
        self._parts.append(call)
        self.delta_count += 1
        return [
            ToolCallDelta(
                index=call.index,
                phase="start",
                tool_call_id=call.tool_call_id,
                name=self.name_map.unmangle(provider_name),
                metadata={"provider_tool_name": provider_name},
            )
        ]

    def set_call_id(self, key: object, provider_id: str) -> None:
        """Records a provider id that arrived after the call's first fragment."""
        call = self._calls[key]
        if call.tool_call_id is None and provider_id:
            call.provider_id = provider_id
            call.tool_call_id = self._claim_id(call, provider_id)

    def call_arguments(self, key: object, fragment: str) -> list[ModelEvent]:
        if not fragment:
            return []
        call = self._calls[key]
        call.fragments.append(fragment)
        self.delta_count += 1
        return [
            ToolCallDelta(
                index=call.index, phase="delta", tool_call_id=call.tool_call_id, arguments_delta=fragment
            )
        ]

    def end_call(self, key: object) -> list[ModelEvent]:
        call = self._calls[key]
        if call.closed:
            return []
        call.closed = True
        if call.tool_call_id is None:
            call.tool_call_id = self._claim_id(call, call.provider_id)
        return [ToolCallDelta(index=call.index, phase="end", tool_call_id=call.tool_call_id)]

    def end_open_calls(self) -> list[ModelEvent]:
        events: list[ModelEvent] = []
        for key in self._calls:
            events.extend(self.end_call(key))
        return events

    def _claim_id(self, call: _PendingCall, provider_id: str | None) -> str:
        if provider_id is not None:
            call.metadata["provider_tool_call_id"] = provider_id
        if provider_id is not None and is_printable_id(provider_id) and provider_id not in self._used_ids:
            chosen = provider_id
        else:
            chosen = new_id("call_")
            while chosen in self._used_ids:
                chosen = new_id("call_")
        self._used_ids.add(chosen)
        return chosen

    # -- terminal events --------------------------------------------------------------------------
    def completed(self, reason: str, raw_stop_reason: str | None) -> ModelCompleted:
        """The complete assistant message: text/tool_call blocks in output order plus ``tool_calls``."""
        self.end_open_calls()
        content: list[ContentBlock] = []
        tool_calls: list[ToolCall] = []
        for part in self._parts:
            if isinstance(part, list):
                text = "".join(part)
                if text:
                    content.append(TextBlock(text=text))
                continue
            if isinstance(part, _Reasoning):
                text = "".join(part.fragments)
                if text or part.signature or part.redacted:
                    content.append(
                        ReasoningBlock(
                            text=text,
                            signature=part.signature,
                            provider=self.provider,
                            redacted=part.redacted,
                        )
                    )
                continue
            raw = "".join(part.fragments)
            arguments, error = parse_arguments(raw)
            metadata = dict(part.metadata)
            if error is not None:
                metadata["arguments_error"] = error
                metadata["raw_arguments"] = raw
            assert part.tool_call_id is not None  # set by end_open_calls
            name = self.name_map.unmangle(part.provider_name)
            tool_calls.append(
                ToolCall(tool_call_id=part.tool_call_id, name=name, arguments=arguments, metadata=metadata)
            )
            content.append(
                ToolCallBlock(
                    tool_call_id=part.tool_call_id, name=name, arguments=arguments, metadata=dict(metadata)
                )
            )
        if not self.usage.total_tokens:
            self.usage.total_tokens = self.usage.input_tokens + self.usage.output_tokens
        return ModelCompleted(
            content=content,
            tool_calls=tool_calls,
            usage=self.usage,
            stop_reason=stop_reason(reason, raw_stop_reason, has_tool_calls=bool(tool_calls)),
            metadata={"provider": self.provider, "model": self.model, "response_id": self.response_id},
        )

    def failed(self, payload: ProviderErrorPayload) -> ModelFailed:
        usage = None
        if self.usage.input_tokens or self.usage.output_tokens:
            usage = self.usage.model_copy()
            usage.total_tokens = usage.total_tokens or usage.input_tokens + usage.output_tokens
        return ModelFailed(
            error=payload,
            usage=usage,
            metadata={"provider": self.provider, "model": self.model, "response_id": self.response_id},
        )

    def protocol_failure(self, message: str) -> ModelFailed:
        return self.failed(error_payload("protocol", message, provider=self.provider, model=self.model))

"""``anthropic`` adapter: the Messages streaming protocol (docs/providers.md#anthropic).

``build_payload`` and :class:`StreamTranslator` are pure; :class:`AnthropicAdapter` adds the transport.
Tool-call arguments come only from ``input_json_delta`` fragments, never from the start block's ``input``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent_core._jsontext import compact_json
from agent_core.providers._media import b64
from agent_core.providers._model_fields import RequestFields
from agent_core.providers._overflow import overflow_message, recognise_overflow
from agent_core.providers._prefix import PrefixEntry
from agent_core.providers._streaming import ChunkTranslator, HttpStreamAdapter, decode_json_object, sse_events
from agent_core.providers._tool_mapping import (
    ToolNameMap,
    conversation,
    render_block,
    render_tool_result,
    system_texts,
)
from agent_core.providers.base import MessageAssembler, as_dict, as_int, error_payload, optional_int
from agent_core.types.content import (
    DocumentBlock,
    ImageBlock,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from agent_core.types.model import ModelEvent, ModelRequest, ProviderDebug, ToolChoiceNamed, Usage

if TYPE_CHECKING:
    import httpx

API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
STOP_REASONS = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "refusal": "content_filter",
}
ERROR_TYPES = {
    "overloaded_error": "server",
    "api_error": "server",
    "rate_limit_error": "rate_limit",
    "authentication_error": "auth",
    "permission_error": "auth",
    "invalid_request_error": "invalid_request",
    "not_found_error": "invalid_request",
    "request_too_large": "invalid_request",
    "timeout_error": "timeout",
}
OPTION_KEYS = frozenset({"top_p", "top_k"})
EXTENDED_TTL_BETA = "extended-cache-ttl-2025-04-11"
"""The ``anthropic-beta`` value that enables one-hour cache entries (``ttl: "1h"``)."""
THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})
"""Content block types that carry no ``cache_control`` (Anthropic refuses a breakpoint on them)."""
_BLOCKS_KEY = "anthropic_blocks"
"""Key in ``PrefixEntry.extra``: (messages, message blocks) of the conversation's previous request."""


def _tool_block_as_text(block: ToolCallBlock | ToolResultBlock) -> dict[str, Any]:
    """A tool call or result written as text, for a request that offers no tools."""
    if isinstance(block, ToolCallBlock):
        arguments = compact_json(block.arguments)
        return {"type": "text", "text": f"[tool call {block.name} {arguments}]"}
    result = render_tool_result(block, provider_has_error_flag=False)
    return {"type": "text", "text": f"[tool result {block.tool_call_id}]\n{result}"}


@dataclass(frozen=True, slots=True)
class CachePlan:
    """Where a request asks Anthropic to cache its prompt (``cache_control`` breakpoints, at most 4).

    The prompt is cached in the order tools → system → messages; a breakpoint makes the prefix up to and
    including its block a cache entry, and a later request reads the longest entry its own prefix repeats
    (looking back at most 20 blocks from each of its breakpoints). So: one breakpoint on the last tool
    definition, one on the last system block, and a rolling one on the last block of the last message,
    which the next request of the conversation reads. ``bridge`` is the index (in the request's message
    blocks, in order) of the previous request's last block: marking it too lets a request whose new blocks
    exceed the lookback (a turn with many parallel tool calls) still read the previous request's entry.
    """

    ttl: str = "5m"
    bridge: int | None = None

    def control(self) -> dict[str, str]:
        return {"type": "ephemeral", "ttl": "1h"} if self.ttl == "1h" else {"type": "ephemeral"}


def media_block(block: ImageBlock | DocumentBlock, attachments: dict[str, bytes]) -> dict[str, Any]:
    """An ``image`` or ``document`` block with a base64 source."""
    kind = "image" if isinstance(block, ImageBlock) else "document"
    data = attachments.get(block.artifact_id, b"")
    return {"type": kind, "source": {"type": "base64", "media_type": block.mime_type, "data": b64(data)}}


def thinking_block(block: ReasoningBlock) -> dict[str, Any] | None:
    """A ``thinking`` (text and signature) or ``redacted_thinking`` (data) block, exactly as received;
    ``None`` for a block Anthropic cannot take back (another provider's, or one without a signature)."""
    if block.provider != "anthropic" or not block.signature:
        return None
    if block.redacted:
        return {"type": "redacted_thinking", "data": block.signature}
    return {"type": "thinking", "thinking": block.text, "signature": block.signature}


def _tool_result(block: ToolResultBlock, attachments: dict[str, bytes]) -> dict[str, Any]:
    content: str | list[dict[str, Any]] = render_tool_result(block, provider_has_error_flag=True)
    media = [b for b in block.content if isinstance(b, ImageBlock | DocumentBlock)]
    if media:
        parts: list[dict[str, Any]] = [{"type": "text", "text": content}] if content else []
        content = parts + [media_block(b, attachments) for b in media]
    return {
        "type": "tool_result",
        "tool_use_id": block.tool_call_id,
        "content": content,
        "is_error": block.is_error,
    }


def tool_loop_lost_thinking(messages: list[dict[str, Any]]) -> bool:
    """Whether the request continues a tool loop (it ends with tool results) whose last assistant message
    does not start with a thinking block: Anthropic refuses such a request while thinking is enabled."""
    if not messages or messages[-1]["role"] != "user":
        return False
    if not any(b.get("type") == "tool_result" for b in messages[-1]["content"]):
        return False
    for message in reversed(messages[:-1]):
        if message["role"] == "assistant":
            content = message["content"]
            return not content or content[0].get("type") not in THINKING_TYPES
    return False


def build_payload(
    request: ModelRequest,
    name_map: ToolNameMap,
    cache: CachePlan | None = None,
    fields: RequestFields | None = None,
) -> dict[str, Any]:
    """The ``POST /v1/messages`` body for ``request`` (pure). Same-role neighbours are merged.

    The Messages API rejects ``tool_use``/``tool_result`` blocks in a request without ``tools``
    ("Requests which include tool_use or tool_result blocks must define tools"), so a request that
    offers no tools (the limits' final answer call) carries the earlier calls and results as text.
    ``cache`` places the prompt-cache breakpoints (:class:`CachePlan`); ``None`` sends none.

    Thinking (``fields.thinking_budget``): Anthropic's signed thinking blocks go back exactly as they came,
    first in their assistant message. A request that continues a tool loop whose assistant message has no
    thinking block (a block was dropped, or the turn began on another model) is sent with thinking off:
    Anthropic refuses it with thinking on. With thinking off, no thinking block is sent.
    """
    fields = fields or RequestFields(request.temperature, "max_tokens", request.max_output_tokens)
    thinking = fields.thinking_budget
    messages = _messages(request, name_map, keep_thinking=True)
    if thinking is not None and tool_loop_lost_thinking(messages):
        thinking = None
    if thinking is None and any(b.get("type") in THINKING_TYPES for m in messages for b in m["content"]):
        messages = _messages(request, name_map, keep_thinking=False)
    payload: dict[str, Any] = {
        "model": request.model,
        "max_tokens": fields.max_output_tokens or request.max_output_tokens or DEFAULT_MAX_TOKENS,
        "messages": messages,
        "stream": True,
    }
    if thinking is not None:
        payload["thinking"] = {"type": "enabled", "budget_tokens": thinking}
    system = system_texts(request)
    if system:
        payload["system"] = [{"type": "text", "text": text} for text in system]
    if request.tools:
        payload["tools"] = [
            {"name": name_map.mangle(t.name), "description": t.description, "input_schema": t.input_schema}
            for t in request.tools
        ]
        choice = request.tool_choice
        if isinstance(choice, ToolChoiceNamed):
            payload["tool_choice"] = {"type": "tool", "name": name_map.mangle(choice.name)}
        else:
            payload["tool_choice"] = {"type": {"auto": "auto", "required": "any", "none": "none"}[choice]}
    # thinking planned but off for this request: the configured temperature goes out again
    temperature = request.temperature if thinking is None else fields.temperature
    if temperature is not None:
        payload["temperature"] = temperature
    if request.stop_sequences:
        payload["stop_sequences"] = list(request.stop_sequences)
    for key, value in request.provider_options.get("anthropic", {}).items():
        if key in OPTION_KEYS:
            payload[key] = value
    if cache is not None:
        mark_breakpoints(payload, cache)
    return payload


def thinking_lost(payload: dict[str, Any], fields: RequestFields) -> bool:
    """Whether :func:`build_payload` turned thinking off for a tool loop that lost its thinking block."""
    return fields.thinking_budget is not None and "thinking" not in payload


def _messages(request: ModelRequest, name_map: ToolNameMap, *, keep_thinking: bool) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    tools_offered = bool(request.tools)
    attachments = request.attachments
    for message in conversation(request.messages):
        role = "assistant" if message.role == "assistant" else "user"
        blocks: list[dict[str, Any]] = []
        for block in message.content:
            if isinstance(block, ReasoningBlock):
                thought = thinking_block(block) if keep_thinking and role == "assistant" else None
                if thought is not None:
                    blocks.append(thought)
            elif isinstance(block, ImageBlock | DocumentBlock):
                blocks.append(media_block(block, attachments))
            elif not tools_offered and isinstance(block, ToolCallBlock | ToolResultBlock):
                blocks.append(_tool_block_as_text(block))
            elif isinstance(block, ToolCallBlock):
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": block.tool_call_id,
                        "name": name_map.mangle(block.name),
                        "input": block.arguments,
                    }
                )
            elif isinstance(block, ToolResultBlock):
                blocks.append(_tool_result(block, attachments))
            else:
                text = block.text if isinstance(block, TextBlock) else render_block(block)
                if text:
                    blocks.append({"type": "text", "text": text})
        if not blocks:
            continue
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})
    return messages


def message_blocks(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The content blocks of the payload's messages, in order."""
    return [block for message in payload["messages"] for block in message["content"]]


def mark_breakpoints(payload: dict[str, Any], cache: CachePlan) -> None:
    """Adds the ``cache_control`` breakpoints of ``cache`` to ``payload`` (copies the marked entries)."""
    control = cache.control()
    for key in ("tools", "system"):
        entries = payload.get(key)
        if entries:
            entries[-1] = {**entries[-1], "cache_control": control}
    messages = payload["messages"]
    positions = [(m, b) for m, message in enumerate(messages) for b in range(len(message["content"]))]
    if not positions:
        return

    def markable(index: int) -> int | None:
        """``index`` or the nearest block before it that may carry ``cache_control`` (not thinking)."""
        while index >= 0:
            m, b = positions[index]
            if messages[m]["content"][b].get("type") not in THINKING_TYPES:
                return index
            index -= 1
        return None

    marks: set[int] = set()
    last = markable(len(positions) - 1)
    if last is not None:
        marks.add(last)
    if cache.bridge is not None and 0 <= cache.bridge < len(positions) - 1:
        bridge = markable(cache.bridge)
        if bridge is not None:
            marks.add(bridge)
    for index in sorted(marks):
        m, b = positions[index]
        content = list(messages[m]["content"])
        content[b] = {**content[b], "cache_control": control}
        messages[m] = {**messages[m], "content": content}


def map_usage(raw: dict[str, Any]) -> Usage:
    """Messages ``usage`` -> :class:`Usage`. Anthropic's ``input_tokens`` counts only the input after the
    last cache breakpoint; ``Usage.input_tokens`` counts the whole prompt, so the cache counters are added
    to it (``uncached_input_tokens`` is Anthropic's figure)."""
    read = optional_int(raw, "cache_read_input_tokens")
    write = optional_int(raw, "cache_creation_input_tokens")
    input_tokens = as_int(raw.get("input_tokens")) + (read or 0) + (write or 0)
    output_tokens = as_int(raw.get("output_tokens"))
    return Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=input_tokens + output_tokens,
        cache_read_tokens=read,
        cache_write_tokens=write,
        raw_usage=dict(raw),
    )


class StreamTranslator:
    """Messages SSE events (parsed ``data`` objects, ``type`` set) -> ``ModelEvent``s."""

    def __init__(self, *, provider: str = "anthropic", model: str, name_map: ToolNameMap) -> None:
        self._asm = MessageAssembler(provider=provider, model=model, name_map=name_map)
        self._blocks: dict[int, str] = {}
        self._raw_usage: dict[str, Any] = {}
        self._stop_reason: str | None = None
        self._stopped = False
        self._failed = False

    def _update_usage(self, usage: object) -> None:
        if not isinstance(usage, dict):
            return
        self._raw_usage.update(usage)
        self._asm.usage = map_usage(self._raw_usage)

    def feed(self, chunk: dict[str, Any]) -> list[ModelEvent]:
        kind = chunk.get("type")
        if kind == "message_start":
            message = as_dict(chunk.get("message"))
            if message.get("id"):
                self._asm.response_id = str(message["id"])
            self._update_usage(message.get("usage"))
            return []
        if kind == "content_block_start":
            return self._block_start(chunk)
        if kind == "content_block_delta":
            return self._block_delta(chunk)
        if kind == "content_block_stop":
            index = chunk.get("index")
            if isinstance(index, int) and self._blocks.get(index) == "tool_use":
                return self._asm.end_call(index)
            return []
        if kind == "message_delta":
            delta = as_dict(chunk.get("delta"))
            if delta.get("stop_reason"):
                self._stop_reason = str(delta["stop_reason"])
            self._update_usage(chunk.get("usage"))
            return []
        if kind == "message_stop":
            self._stopped = True
            events = self._asm.end_open_calls()
            raw = self._stop_reason
            events.append(self._asm.completed(STOP_REASONS.get(raw or "", "end_turn"), raw))
            return events
        if kind == "ping":
            return []
        if kind == "error":
            self._failed = True
            error = as_dict(chunk.get("error"))
            overflow = recognise_overflow({"error": error})
            if overflow is not None:
                payload = error_payload(
                    "prompt_too_long",
                    overflow_message("anthropic", overflow, str(error.get("message") or "")),
                    provider=self._asm.provider,
                    model=self._asm.model,
                    raw={"error": error},
                    prompt_tokens=overflow.prompt_tokens,
                    context_window=overflow.context_window,
                )
                return [self._asm.failed(payload)]
            payload = error_payload(
                ERROR_TYPES.get(str(error.get("type")), "server"),
                f"anthropic stream error ({error.get('type')}): {error.get('message') or ''}",
                provider=self._asm.provider,
                model=self._asm.model,
                raw={"error": error},
            )
            return [self._asm.failed(payload)]
        return [ProviderDebug(kind="unknown_chunk", data={"type": kind})]

    def _block_start(self, chunk: dict[str, Any]) -> list[ModelEvent]:
        index = chunk.get("index")
        block = as_dict(chunk.get("content_block"))
        block_type = str(block.get("type"))
        if not isinstance(index, int):
            return [self._asm.protocol_failure("anthropic content_block_start without an index")]
        self._blocks[index] = block_type
        if block_type == "text":
            self._asm.break_text()
            return self._asm.text(str(block.get("text") or ""))
        if block_type == "thinking":
            self._asm.start_reasoning(index)
            events = self._asm.reasoning(index, str(block.get("thinking") or ""))
            if block.get("signature"):
                self._asm.reasoning_signature(index, str(block["signature"]))
            return events
        if block_type == "redacted_thinking":
            self._asm.start_reasoning(index, redacted=True, signature=str(block.get("data") or ""))
            return []
        if block_type == "tool_use":
            block_id = block.get("id")
            return self._asm.start_call(
                index,
                provider_id=str(block_id) if block_id else None,
                provider_name=str(block.get("name") or ""),
                metadata={"provider_index": index, "provider_content_block_id": block_id},
            )
        return [ProviderDebug(kind="ignored_block", data={"index": index, "block_type": block_type})]

    def _block_delta(self, chunk: dict[str, Any]) -> list[ModelEvent]:
        index = chunk.get("index")
        delta = as_dict(chunk.get("delta"))
        delta_type = delta.get("type")
        if delta_type == "text_delta":
            return self._asm.text(str(delta.get("text") or ""))
        if delta_type == "input_json_delta" and isinstance(index, int) and self._asm.has_call(index):
            return self._asm.call_arguments(index, str(delta.get("partial_json") or ""))
        if delta_type == "thinking_delta" and isinstance(index, int):
            return self._asm.reasoning(index, str(delta.get("thinking") or ""))
        if delta_type == "signature_delta" and isinstance(index, int):
            self._asm.reasoning_signature(index, str(delta.get("signature") or ""), append=True)
            return []
        return []  # citation deltas are not part of the unified protocol

    def finish(self) -> list[ModelEvent]:
        if self._stopped or self._failed:
            return []
        return [self._asm.protocol_failure("anthropic stream ended before message_stop")]


class AnthropicAdapter(HttpStreamAdapter):
    """Built-in ``anthropic`` provider (Messages API over SSE)."""

    provider_key = "anthropic"
    default_base_url = "https://api.anthropic.com"
    option_keys = OPTION_KEYS
    request_id_header = "request-id"

    def _url(self) -> str:
        return f"{self.base_url}/v1/messages"

    def _headers(self, api_key: str | None) -> dict[str, str]:
        headers = {
            "anthropic-version": API_VERSION,
            "content-type": "application/json",
            "accept": "text/event-stream",
        }
        if api_key:
            headers["x-api-key"] = api_key
        if self.config.prompt_cache == "auto" and self.config.prompt_cache_ttl == "1h":
            headers["anthropic-beta"] = EXTENDED_TTL_BETA
        return headers

    def _payload(
        self, request: ModelRequest, name_map: ToolNameMap, prefix: tuple[PrefixEntry, int] | None = None
    ) -> dict[str, Any]:
        fields = self._fields(request)
        if self.config.prompt_cache == "off":
            return build_payload(request, name_map, None, fields)
        bridge: int | None = None
        previous = prefix[0].extra.get(_BLOCKS_KEY) if prefix is not None else None
        if prefix is not None and previous is not None and prefix[1] == previous[0]:
            bridge = previous[1] - 1  # the previous request is this one's prefix: its last block
        plan = CachePlan(ttl=self.config.prompt_cache_ttl, bridge=bridge)
        payload = build_payload(request, name_map, plan, fields)
        if prefix is not None:
            prefix[0].extra[_BLOCKS_KEY] = (len(request.messages), len(message_blocks(payload)))
        return payload

    def _translator(self, request: ModelRequest, name_map: ToolNameMap) -> StreamTranslator:
        return StreamTranslator(provider=self.provider_key, model=request.model, name_map=name_map)

    async def _chunks(
        self, response: httpx.Response, translator: ChunkTranslator
    ) -> AsyncGenerator[dict[str, Any], None]:
        async with aclosing(sse_events(response)) as events:
            async for name, data in events:
                if not data.strip():
                    continue
                chunk = decode_json_object(data)
                if "type" not in chunk and name:
                    chunk["type"] = name
                yield chunk

"""``openai_responses`` adapter: OpenAI's Responses API, streaming ``POST {base_url}/responses``.

Stateless: every request sends the whole conversation (``store: false``), so nothing is kept on OpenAI's
side; with reasoning configured (``[model] reasoning_effort``) it asks for
``include: ["reasoning.encrypted_content"]`` and reasoning summaries, and each reasoning item comes back as
a :class:`~agent_core.types.content.ReasoningBlock` (summary text; the encrypted content as its
``signature``) that goes back, unchanged and before the calls it led to, in the next request. Items are
sent without their ids (``store: false`` keeps none to look up).

Wire mapping: system blocks → ``instructions``; user text/images/PDFs → a user message with
``input_text`` / ``input_image`` (data URL) / ``input_file`` parts; assistant text → an assistant message;
tool calls → ``function_call`` items; tool results → ``function_call_output`` items (their images and PDFs
as input parts of ``output``). Stream: ``response.output_item.added`` opens a message, function call or
reasoning item; ``response.output_text.delta``, ``response.function_call_arguments.delta`` and
``response.reasoning_summary_text.delta`` carry their parts; ``response.output_item.done`` closes them
(a reasoning item's ``encrypted_content`` arrives there); ``response.completed`` / ``response.incomplete``
end the answer with its usage (cached input in ``input_tokens_details.cached_tokens``, reasoning in
``output_tokens_details.reasoning_tokens``); ``response.failed`` and ``error`` fail it. Structured output
uses ``text.format`` (``provider_options["openai_responses"]["text"]``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from agent_core.config.model import ResolvedModelConfig
from agent_core.providers._media import data_url, document_filename
from agent_core.providers._model_fields import RequestFields
from agent_core.providers._overflow import overflow_message, recognise_overflow
from agent_core.providers._prefix import PrefixEntry
from agent_core.providers._streaming import (
    ChunkTranslator,
    HttpStreamAdapter,
    SleepFn,
    body_message,
    decode_json_object,
    sse_events,
    status_error_type,
)
from agent_core.providers._tool_mapping import (
    ToolNameMap,
    conversation,
    render_blocks,
    render_tool_result,
    system_texts,
)
from agent_core.providers.base import (
    MessageAssembler,
    as_dict,
    as_int,
    error_payload,
    mentions_tools_unsupported,
    optional_int,
)
from agent_core.types.content import (
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    ReasoningBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from agent_core.types.model import ModelEvent, ModelRequest, ProviderErrorPayload, ToolChoiceNamed, Usage

if TYPE_CHECKING:
    import httpx

PROVIDER = "openai_responses"
OPTION_KEYS = frozenset({"top_p", "parallel_tool_calls", "user", "text", "service_tier"})
ENCRYPTED_REASONING = "reasoning.encrypted_content"
INCOMPLETE_REASONS = {"max_output_tokens": "max_tokens", "content_filter": "content_filter"}
FAILURE_TYPES = {
    "rate_limit_exceeded": "rate_limit",
    "server_error": "server",
    "vector_store_timeout": "timeout",
    "invalid_prompt": "invalid_request",
}


# -- the request ----------------------------------------------------------------------------------------
def _input_parts(blocks: list[ContentBlock], attachments: dict[str, bytes]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, ImageBlock):
            data = attachments.get(block.artifact_id, b"")
            parts.append(
                {
                    "type": "input_image",
                    "image_url": data_url(block.mime_type, data),
                    "detail": block.detail or "auto",
                }
            )
        elif isinstance(block, DocumentBlock):
            data = attachments.get(block.artifact_id, b"")
            parts.append(
                {
                    "type": "input_file",
                    "filename": document_filename(block),
                    "file_data": data_url(block.mime_type, data),
                }
            )
        else:
            text = render_blocks([block])
            if text:
                parts.append({"type": "input_text", "text": text})
    return parts


def reasoning_item(block: ReasoningBlock) -> dict[str, Any] | None:
    """The reasoning input item of a block this provider produced (with its encrypted content), else
    ``None`` (another provider's reasoning, or one that cannot be carried without OpenAI's storage)."""
    if block.provider != PROVIDER or not block.signature:
        return None
    summary = [{"type": "summary_text", "text": block.text}] if block.text else []
    return {"type": "reasoning", "summary": summary, "encrypted_content": block.signature}


def _output(block: ToolResultBlock, attachments: dict[str, bytes]) -> str | list[dict[str, Any]]:
    text = render_tool_result(block, provider_has_error_flag=False)
    media = [b for b in block.content if isinstance(b, ImageBlock | DocumentBlock)]
    if not media:
        return text
    parts = [{"type": "input_text", "text": text}] if text else []
    return parts + _input_parts(list(media), attachments)


def input_items(request: ModelRequest, name_map: ToolNameMap) -> list[dict[str, Any]]:
    """The ``input`` list of ``request`` (system blocks go to ``instructions``)."""
    items: list[dict[str, Any]] = []
    attachments = request.attachments
    for message in conversation(request.messages):
        if message.role == "user":
            parts = _input_parts(list(message.content), attachments)
            if parts:
                items.append({"role": "user", "content": parts})
        elif message.role == "assistant":
            items.extend(_assistant_items(message.content, name_map))
        else:
            for block in message.content:
                if isinstance(block, ToolResultBlock):
                    items.append(
                        {
                            "type": "function_call_output",
                            "call_id": block.tool_call_id,
                            "output": _output(block, attachments),
                        }
                    )
    return items


def _assistant_items(blocks: list[ContentBlock], name_map: ToolNameMap) -> list[dict[str, Any]]:
    """An assistant message's items in output order: reasoning, text messages, function calls."""
    items: list[dict[str, Any]] = []
    text: list[str] = []
    for block in [*blocks, None]:
        if not isinstance(block, ReasoningBlock | ToolCallBlock | None):
            text.append(render_blocks([block]))
            continue
        if "".join(text):
            items.append({"role": "assistant", "content": "".join(text)})
        text = []
        if isinstance(block, ReasoningBlock):
            item = reasoning_item(block)
            if item is not None:
                items.append(item)
        elif isinstance(block, ToolCallBlock):
            items.append(
                {
                    "type": "function_call",
                    "call_id": block.tool_call_id,
                    "name": name_map.mangle(block.name),
                    "arguments": json.dumps(block.arguments, ensure_ascii=False),
                }
            )
    return items


def build_payload(
    request: ModelRequest,
    name_map: ToolNameMap,
    fields: RequestFields | None = None,
    extra: list[tuple[str, Any]] | None = None,
) -> dict[str, Any]:
    """The ``POST /responses`` body for ``request`` (pure); ``extra`` fields (the prompt-cache key) last."""
    fields = fields or RequestFields(request.temperature, "max_output_tokens", request.max_output_tokens)
    payload: dict[str, Any] = {"model": request.model}
    system = system_texts(request)
    if system:
        payload["instructions"] = "\n\n".join(system)
    payload["input"] = input_items(request, name_map)
    payload["stream"] = True
    payload["store"] = False
    if fields.temperature is not None:
        payload["temperature"] = fields.temperature
    if fields.max_output_tokens is not None:
        payload["max_output_tokens"] = fields.max_output_tokens
    if fields.reasoning_effort is not None:
        payload["reasoning"] = {"effort": fields.reasoning_effort, "summary": "auto"}
        payload["include"] = [ENCRYPTED_REASONING]
    if request.tools:
        payload["tools"] = [
            {
                "type": "function",
                "name": name_map.mangle(t.name),
                "description": t.description,
                "parameters": t.input_schema,
                "strict": False,
            }
            for t in request.tools
        ]
        choice = request.tool_choice
        if isinstance(choice, ToolChoiceNamed):
            payload["tool_choice"] = {"type": "function", "name": name_map.mangle(choice.name)}
        else:
            payload["tool_choice"] = choice
    for key, value in request.provider_options.get(PROVIDER, {}).items():
        if key in OPTION_KEYS:
            payload[key] = value
    for key, value in extra or []:
        payload[key] = value
    return payload


# -- the stream -----------------------------------------------------------------------------------------
def map_usage(raw: dict[str, Any]) -> Usage:
    """Responses ``usage``: ``input_tokens`` is the whole prompt, its cached part
    ``input_tokens_details.cached_tokens``; ``output_tokens_details.reasoning_tokens``."""
    input_tokens = as_int(raw.get("input_tokens"))
    output_tokens = as_int(raw.get("output_tokens"))
    return Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=as_int(raw.get("total_tokens")) or input_tokens + output_tokens,
        cache_read_tokens=optional_int(raw.get("input_tokens_details"), "cached_tokens"),
        cache_write_tokens=None,
        reasoning_tokens=optional_int(raw.get("output_tokens_details"), "reasoning_tokens"),
        raw_usage=dict(raw),
    )


class StreamTranslator:
    """Responses API SSE events (``type`` set) -> ``ModelEvent`` s; items are keyed by ``output_index``."""

    def __init__(self, *, provider: str = PROVIDER, model: str, name_map: ToolNameMap) -> None:
        self._asm = MessageAssembler(provider=provider, model=model, name_map=name_map)
        self._items: dict[int, str] = {}
        self._summary_index: dict[int, int] = {}
        self._streamed: set[int] = set()
        self._finished = False

    def _index(self, chunk: dict[str, Any]) -> int:
        index = chunk.get("output_index")
        return index if isinstance(index, int) and not isinstance(index, bool) else -1

    def feed(self, chunk: dict[str, Any]) -> list[ModelEvent]:
        if self._finished:
            return []
        kind = str(chunk.get("type") or "")
        response = as_dict(chunk.get("response"))
        if response.get("id"):
            self._asm.response_id = str(response["id"])
        if kind == "response.output_item.added":
            return self._item_added(self._index(chunk), as_dict(chunk.get("item")))
        if kind == "response.output_text.delta" or kind == "response.refusal.delta":
            return self._asm.text(str(chunk.get("delta") or ""))
        if kind == "response.function_call_arguments.delta":
            index = self._index(chunk)
            if self._asm.has_call(index):
                self._streamed.add(index)
                return self._asm.call_arguments(index, str(chunk.get("delta") or ""))
            return []
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            return self._reasoning_delta(chunk)
        if kind == "response.output_item.done":
            return self._item_done(self._index(chunk), as_dict(chunk.get("item")))
        if kind in ("response.completed", "response.incomplete"):
            return self._completed(response)
        if kind in ("response.failed", "error"):
            return self._failed(chunk, response)
        return []

    def _item_added(self, index: int, item: dict[str, Any]) -> list[ModelEvent]:
        item_type = str(item.get("type") or "")
        self._items[index] = item_type
        if item_type == "function_call":
            call_id = item.get("call_id") or None
            return self._asm.start_call(
                index,
                provider_id=str(call_id) if call_id else None,
                provider_name=str(item.get("name") or ""),
                metadata={"provider_index": index, "provider_item_id": item.get("id")},
            )
        if item_type == "reasoning":
            self._asm.start_reasoning(index)
        elif item_type == "message":
            self._asm.break_text()
        return []

    def _reasoning_delta(self, chunk: dict[str, Any]) -> list[ModelEvent]:
        index = self._index(chunk)
        summary = chunk.get("summary_index")
        events: list[ModelEvent] = []
        if (
            isinstance(summary, int)
            and index in self._summary_index
            and self._summary_index[index] != summary
        ):
            events += self._asm.reasoning(index, "\n\n")  # a new summary part
        if isinstance(summary, int):
            self._summary_index[index] = summary
        self._streamed.add(index)
        return events + self._asm.reasoning(index, str(chunk.get("delta") or ""))

    def _item_done(self, index: int, item: dict[str, Any]) -> list[ModelEvent]:
        item_type = str(item.get("type") or self._items.get(index, ""))
        if item_type == "function_call":
            if not self._asm.has_call(index):
                self._item_added(index, item)
            events: list[ModelEvent] = []
            if index not in self._streamed and isinstance(item.get("arguments"), str):
                events += self._asm.call_arguments(index, item["arguments"])
            return events + self._asm.end_call(index)
        if item_type == "reasoning":
            if not self._asm.has_reasoning(index):
                self._asm.start_reasoning(index)
            encrypted = item.get("encrypted_content")
            if isinstance(encrypted, str) and encrypted:
                self._asm.reasoning_signature(index, encrypted)
            if index not in self._streamed:  # no deltas: the summary comes whole
                texts = [
                    str(part.get("text") or "")
                    for part in item.get("summary") or []
                    if isinstance(part, dict)
                ]
                joined = "\n\n".join(t for t in texts if t)
                if joined:
                    return self._asm.reasoning(index, joined)
        return []

    def _completed(self, response: dict[str, Any]) -> list[ModelEvent]:
        self._finished = True
        if isinstance(response.get("usage"), dict):
            self._asm.usage = map_usage(response["usage"])
        events = self._asm.end_open_calls()
        raw: str | None = str(response.get("status") or "completed")
        reason = "end_turn"
        if raw == "incomplete":
            detail = str(as_dict(response.get("incomplete_details")).get("reason") or "")
            reason = INCOMPLETE_REASONS.get(detail, "end_turn")
            raw = detail or raw
        events.append(self._asm.completed(reason, raw))
        return events

    def _failed(self, chunk: dict[str, Any], response: dict[str, Any]) -> list[ModelEvent]:
        self._finished = True
        error = as_dict(response.get("error")) or {
            k: chunk[k] for k in ("code", "message", "param") if k in chunk
        }
        message = str(error.get("message") or "response failed")
        overflow = recognise_overflow({"error": error})
        if overflow is not None:
            payload = error_payload(
                "prompt_too_long",
                overflow_message(PROVIDER, overflow, message),
                provider=self._asm.provider,
                model=self._asm.model,
                raw={"error": error},
                prompt_tokens=overflow.prompt_tokens,
                context_window=overflow.context_window,
            )
        else:
            payload = error_payload(
                FAILURE_TYPES.get(str(error.get("code") or ""), "server"),
                f"{PROVIDER} stream error ({error.get('code')}): {message}",
                provider=self._asm.provider,
                model=self._asm.model,
                raw={"error": error},
            )
        return [self._asm.failed(payload)]

    def finish(self) -> list[ModelEvent]:
        if self._finished:
            return []
        self._finished = True
        return [self._asm.protocol_failure(f"{PROVIDER} stream ended before response.completed")]


class OpenAIResponsesAdapter(HttpStreamAdapter):
    """Built-in ``openai_responses`` provider (the Responses API over SSE)."""

    provider_key = PROVIDER
    default_base_url = "https://api.openai.com/v1"
    option_keys = OPTION_KEYS
    request_id_header = "x-request-id"

    def __init__(self, config: ResolvedModelConfig, *, sleep: SleepFn | None = None) -> None:
        super().__init__(config, sleep=sleep)

    def _url(self) -> str:
        return f"{self.base_url}/responses"

    def _headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        return headers

    def _payload(
        self, request: ModelRequest, name_map: ToolNameMap, prefix: tuple[PrefixEntry, int] | None = None
    ) -> dict[str, Any]:
        extra: list[tuple[str, Any]] = []
        key = request.metadata.get("prompt_cache_key")
        if (
            self.config.prompt_cache != "off"
            and self.config.openai_cache_fields
            and isinstance(key, str)
            and key
        ):
            extra.append(("prompt_cache_key", key))
        return build_payload(request, name_map, self._fields(request), extra)

    def _translator(self, request: ModelRequest, name_map: ToolNameMap) -> StreamTranslator:
        return StreamTranslator(provider=self.provider_key, model=request.model, name_map=name_map)

    async def _chunks(
        self, response: httpx.Response, translator: ChunkTranslator
    ) -> AsyncGenerator[dict[str, Any], None]:
        async with aclosing(sse_events(response)) as events:
            async for name, data in events:
                text = data.strip()
                if not text or text == "[DONE]":
                    continue
                chunk = decode_json_object(text)
                if "type" not in chunk and name:
                    chunk["type"] = name
                yield chunk

    def _http_error(self, request: ModelRequest, status: int, raw: dict[str, Any]) -> ProviderErrorPayload:
        message = body_message(raw) or "no error message"
        client_error = 400 <= status < 500 and status not in (401, 403, 408, 429)
        if request.tools and client_error and mentions_tools_unsupported(message):
            return self._error(
                "unsupported_capability",
                f"{PROVIDER} model {request.model!r} does not support tools: {message}",
                request,
                raw=raw,
                capability="tools",
                request_feature="tools",
            )
        if client_error and "'temperature'" in message:
            message += ' (a reasoning model: set [model] reasoning_effort or temperature = "default")'
        return self._error(
            status_error_type(status), f"{PROVIDER} HTTP {status}: {message}", request, raw=raw
        )

"""``openai`` adapter: the Chat Completions streaming protocol (docs/providers.md#openai).

Also used for Chat-Completions-compatible gateways (``base_url`` includes the ``/v1`` segment).
``build_payload`` and :class:`StreamTranslator` are pure; :class:`OpenAIAdapter` adds the transport.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from agent_core.config.model import ResolvedModelConfig
from agent_core.providers._openai_wire import OPTION_KEYS, BodyEncoder, build_payload
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
from agent_core.providers._tool_mapping import ToolNameMap
from agent_core.providers.base import (
    MessageAssembler,
    as_dict,
    as_int,
    error_payload,
    mentions_tools_unsupported,
    optional_int,
)
from agent_core.types.model import (
    ModelEvent,
    ModelRequest,
    ProviderErrorPayload,
    Usage,
)

if TYPE_CHECKING:
    import httpx

STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "content_filter",
}
END_OF_STREAM: dict[str, Any] = {"__end_of_stream__": True}
"""Chunk the transport feeds for the ``data: [DONE]`` terminator."""


def map_usage(raw: dict[str, Any], timings: dict[str, Any] | None = None) -> Usage:
    """Chat Completions ``usage`` -> :class:`Usage` (docs/providers.md#openai). ``prompt_tokens`` counts the
    whole prompt; the cached part is ``prompt_tokens_details.cached_tokens`` (OpenAI, vLLM, recent llama.cpp)
    or, from a llama.cpp server that reports only its ``timings``, ``timings.cache_n``."""
    input_tokens = as_int(raw.get("prompt_tokens"))
    output_tokens = as_int(raw.get("completion_tokens"))
    cached = optional_int(raw.get("prompt_tokens_details"), "cached_tokens")
    if cached is None and timings is not None:
        cached = optional_int(timings, "cache_n")
    return Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=as_int(raw.get("total_tokens")) or input_tokens + output_tokens,
        cache_read_tokens=cached,
        cache_write_tokens=None,
        reasoning_tokens=optional_int(raw.get("completion_tokens_details"), "reasoning_tokens"),
        raw_usage=raw if timings is None else {**raw, "timings": timings},
    )


def local_address(base_url: str) -> bool:
    """Whether ``base_url`` names this machine or a private network (``localhost``, loopback, private,
    link-local or unique-local addresses)."""
    host = (urlsplit(base_url).hostname or "").strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


def in_stream_error_type(error: dict[str, Any]) -> str:
    """Maps an in-stream ``error`` object to a docs/providers.md#errors-and-retries type."""
    label = f"{error.get('type') or ''} {error.get('code') or ''}".lower()
    if "rate_limit" in label or "rate limit" in label:
        return "rate_limit"
    if "auth" in label or "api_key" in label or "permission" in label:
        return "auth"
    if "timeout" in label:
        return "timeout"
    if "invalid_request" in label:
        return "invalid_request"
    return "server"


class StreamTranslator:
    """Chat Completions chunks -> ``ModelEvent``s. Tool calls aggregate by ``index`` (else by ``id``)."""

    def __init__(self, *, provider: str = "openai", model: str, name_map: ToolNameMap) -> None:
        self._asm = MessageAssembler(provider=provider, model=model, name_map=name_map)
        self._finish_reason: str | None = None
        self._done = False
        self._failed = False
        self._finished = False
        self._ids: dict[str, object] = {}
        self._last_key: object | None = None
        self._next_index = 0
        self._usage: dict[str, Any] | None = None
        self._timings: dict[str, Any] | None = None

    def feed(self, chunk: dict[str, Any]) -> list[ModelEvent]:
        if chunk.get("__end_of_stream__"):
            self._done = True
            return self.finish()
        error = chunk.get("error")
        if error:
            self._failed = True
            err = error if isinstance(error, dict) else {"message": str(error)}
            payload = error_payload(
                in_stream_error_type(err),
                f"openai stream error: {err.get('message') or err}",
                provider=self._asm.provider,
                model=self._asm.model,
                raw={"error": err},
            )
            return [self._asm.failed(payload)]
        if chunk.get("id"):
            self._asm.response_id = str(chunk["id"])
        if isinstance(chunk.get("timings"), dict):  # llama.cpp: cache_n = prompt tokens reused
            self._timings = chunk["timings"]
            if self._usage is not None:
                self._asm.usage = map_usage(self._usage, self._timings)
        if isinstance(chunk.get("usage"), dict):
            self._usage = chunk["usage"]
            self._asm.usage = map_usage(self._usage, self._timings)
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return []
        choice = choices[0]
        events: list[ModelEvent] = []
        delta = choice.get("delta") or {}
        if isinstance(delta, dict):
            # reasoning text: ``reasoning_content`` (DeepSeek, vLLM, llama.cpp), ``reasoning`` (OpenRouter)
            for key in ("reasoning_content", "reasoning"):
                thought = delta.get(key)
                if isinstance(thought, str) and thought:
                    events += self._asm.reasoning("reasoning", thought)
                    break
            content = delta.get("content")
            if isinstance(content, str):
                events += self._asm.text(content)
            for fragment in delta.get("tool_calls") or []:
                if isinstance(fragment, dict):
                    events += self._tool_fragment(fragment)
            legacy = delta.get("function_call")
            if isinstance(legacy, dict):
                events += self._tool_fragment({"index": -1, "function": legacy})
        if choice.get("finish_reason"):
            self._finish_reason = str(choice["finish_reason"])
        return events

    def _tool_fragment(self, fragment: dict[str, Any]) -> list[ModelEvent]:
        index = fragment.get("index")
        call_id = fragment.get("id") if isinstance(fragment.get("id"), str) else None
        function = as_dict(fragment.get("function"))
        key: object | None
        if isinstance(index, int) and not isinstance(index, bool):
            key = ("index", index)
        elif call_id and call_id in self._ids:
            key = self._ids[call_id]
        elif call_id or function.get("name") or self._last_key is None:
            key = ("allocated", self._next_index)
        else:  # an anonymous continuation fragment belongs to the latest call
            key = self._last_key
        events: list[ModelEvent] = []
        if not self._asm.has_call(key):
            self._next_index += 1
            events += self._asm.start_call(
                key,
                provider_id=call_id or None,
                provider_name=str(function.get("name") or ""),
                metadata={"provider_index": index} if isinstance(index, int) else {},
                id_may_follow=True,
            )
        elif call_id:
            self._asm.set_call_id(key, call_id)
        if call_id:
            self._ids[call_id] = key
        self._last_key = key
        arguments = function.get("arguments")
        if isinstance(arguments, dict):
            arguments = json.dumps(arguments, ensure_ascii=False)
        if isinstance(arguments, str):
            events += self._asm.call_arguments(key, arguments)
        return events

    def finish(self) -> list[ModelEvent]:
        if self._failed or self._finished:
            return []
        self._finished = True
        if not self._done and self._finish_reason is None:
            return [self._asm.protocol_failure("openai stream ended before [DONE] or a finish_reason")]
        events = self._asm.end_open_calls()
        raw = self._finish_reason
        events.append(self._asm.completed(STOP_REASONS.get(raw or "", "end_turn"), raw))
        return events


class OpenAIAdapter(HttpStreamAdapter):
    """Built-in ``openai`` provider (Chat Completions over SSE)."""

    provider_key = "openai"
    default_base_url = "https://api.openai.com/v1"
    option_keys = OPTION_KEYS
    request_id_header = "x-request-id"

    def __init__(self, config: ResolvedModelConfig, *, sleep: SleepFn | None = None) -> None:
        super().__init__(config, sleep=sleep)
        self._encoder = BodyEncoder()
        self._local_server = local_address(self.base_url)

    def _url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def _headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        return headers

    def _payload(
        self, request: ModelRequest, name_map: ToolNameMap, prefix: tuple[PrefixEntry, int] | None = None
    ) -> dict[str, Any]:
        return build_payload(request, name_map, self._cache_fields(request), self._fields(request))

    def _body(
        self, request: ModelRequest, name_map: ToolNameMap, prefix: tuple[PrefixEntry, int] | None = None
    ) -> bytes:
        return self._encoder.encode(
            request, name_map, prefix, self._cache_fields(request), self._fields(request)
        )

    def _cache_fields(self, request: ModelRequest) -> list[tuple[str, Any]]:
        """The prompt-cache fields: ``prompt_cache_key`` (the request's ``metadata["prompt_cache_key"]``,
        stable per agent of a session, so the server routes its requests to where their prefix is
        cached) and, to a server on a loopback or private address (where llama.cpp's server runs),
        ``cache_prompt: true``. None with ``[model] prompt_cache = "off"`` or ``openai_cache_fields =
        false``; OpenAI itself caches every prompt prefix of 1024 tokens or more without a field."""
        config = self.config
        if config.prompt_cache == "off" or not config.openai_cache_fields:
            return []
        fields: list[tuple[str, Any]] = []
        key = request.metadata.get("prompt_cache_key")
        if isinstance(key, str) and key:
            fields.append(("prompt_cache_key", key))
        if self._local_server:
            fields.append(("cache_prompt", True))
        return fields

    def _translator(self, request: ModelRequest, name_map: ToolNameMap) -> StreamTranslator:
        return StreamTranslator(provider=self.provider_key, model=request.model, name_map=name_map)

    async def _chunks(
        self, response: httpx.Response, translator: ChunkTranslator
    ) -> AsyncGenerator[dict[str, Any], None]:
        async with aclosing(sse_events(response)) as events:
            async for _name, data in events:
                text = data.strip()
                if text == "[DONE]":
                    yield END_OF_STREAM
                elif text:
                    yield decode_json_object(text)

    def _http_error(self, request: ModelRequest, status: int, raw: dict[str, Any]) -> ProviderErrorPayload:
        message = body_message(raw) or "no error message"
        client_error = 400 <= status < 500 and status not in (401, 403, 408, 429)
        if request.tools and client_error and mentions_tools_unsupported(message):
            return self._error(
                "unsupported_capability",
                f"openai model {request.model!r} does not support tools: {message}",
                request,
                raw=raw,
                capability="tools",
                request_feature="tools",
            )
        if client_error and ("'max_tokens'" in message or "'temperature'" in message):
            message += (
                " (a reasoning model: set [model] reasoning_effort, or openai_token_field = "
                '"max_completion_tokens" and temperature = "default")'
            )
        if client_error and ("prompt_cache_key" in message or "cache_prompt" in message):
            message += (
                " (this server rejects the prompt-cache fields: set [model] openai_cache_fields = false)"
            )
        return self._error(status_error_type(status), f"openai HTTP {status}: {message}", request, raw=raw)
